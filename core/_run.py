"""Reading a stored run: ``tripwire.open_run(path) -> Run``.

The reader follows a run that is still being written (``refresh()`` reads the records appended
since the last read) and reads every complete record after a crash (a torn tail is ignored).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ._config import MODES
from ._errors import RunNotFoundError, TensorNotFoundError
from ._finding import Finding
from ._format import (
    CONTROL_DIR,
    FINDINGS_DIR,
    RUN_FILE,
    WORKERS_DIR,
    ArrayRef,
    end_marker_name,
    iter_records,
)
from ._history import History
from ._validate import did_you_mean


@dataclass(frozen=True)
class TensorView:
    """One tensor of a run: its values and reductions by step, mode and worker.

    ``mode=None`` (the default of every method) is ``train`` when the tensor has values there, else
    the one mode that has them (a ``val_loss`` is read in ``eval`` without saying so); a tensor
    with values in several modes other than ``train`` needs ``mode=``."""

    run: Run
    name: str

    @property
    def collections(self) -> list[str]:
        return self.run.tensor_collections(self.name)

    def reductions(self) -> list[str]:
        return self.run.reductions(self.name)

    def modes(self, worker: int = 0) -> list[str]:
        """The modes in which this tensor has a value (any reduction or array) from ``worker``."""
        return [m for m in MODES if self._steps_in(m, worker)]

    def _steps_in(self, mode: str, worker: int, reduction: str | None = None) -> list[int]:
        if reduction is not None:
            return sorted(set(self.run.series(self.name, reduction, mode, worker)[0].tolist()))
        out = set(self.run.array_steps(self.name, "raw", mode, worker))
        out |= set(self.run.array_steps(self.name, "hist_counts", mode, worker))
        for r in self.reductions():
            out |= set(self.run.series(self.name, r, mode, worker)[0].tolist())
        return sorted(out)

    def _mode(self, mode: str | None, worker: int) -> str:
        if mode is not None:
            return mode
        have = self.modes(worker)
        if not have or "train" in have:
            return "train"
        if len(have) == 1:
            return have[0]
        raise TensorNotFoundError(f"tensor {self.name!r} has values in modes {', '.join(have)} (not train): "
                                  f"pass mode=, one of them")

    def steps(self, mode: str | None = None, worker: int = 0, reduction: str | None = None) -> list[int]:
        """Steps with a value of ``reduction`` (any stored value when None)."""
        return self._steps_in(self._mode(mode, worker), worker, reduction)

    def value(self, step: int, mode: str | None = None, worker: int = 0) -> np.ndarray:
        """The raw tensor at ``step`` (saved with the ``raw`` reduction)."""
        return self.run.array(self.name, step, "raw", self._mode(mode, worker), worker)

    def reduction(self, reduction: str, step: int, mode: str | None = None, worker: int = 0) -> float:
        mode = self._mode(mode, worker)
        v = self.run.value(self.name, reduction, step, mode, worker)
        if v is None:
            have = self.reductions()
            if reduction not in have:
                raise TensorNotFoundError(
                    f"tensor {self.name!r} has no reduction {reduction!r}{did_you_mean(reduction, have)}; available: {', '.join(have) or 'none'}"
                )
            raise TensorNotFoundError(
                f"tensor {self.name!r} has no {reduction!r} at step {step} in mode {mode!r} (worker {worker}); "
                f"steps with one: {self.steps(mode, worker, reduction)[:20]}"
            )
        return v

    def series(self, reduction: str = "raw", mode: str | None = None, worker: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """``(steps, values)`` of one reduction (see :meth:`Run.series`)."""
        return self.run.series(self.name, reduction, self._mode(mode, worker), worker)

    def histogram(self, step: int, mode: str | None = None, worker: int = 0) -> tuple[np.ndarray, np.ndarray]:
        return self.run.histogram(self.name, step, self._mode(mode, worker), worker)

    def workers(self) -> list[int]:
        return self.run.workers


def headline_reduction(reductions: Sequence[str]) -> str | None:
    """The reduction that stands for a tensor where one is shown (``tripwire inspect``, ``plot``):
    ``raw`` for a scalar, else ``l2``, else the first of ``reductions``; None when there is none."""
    for preferred in ("raw", "l2"):
        if preferred in reductions:
            return preferred
    return reductions[0] if reductions else None


class Run(History):
    """A stored run. Use :func:`open_run`."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(keep_arrays=None)
        self.path = Path(path)
        run_file = self.path / RUN_FILE
        if not run_file.is_file():
            if not self.path.exists():
                raise RunNotFoundError(f"no tripwire run at {str(self.path)!r}: the directory does not exist")
            raise RunNotFoundError(f"no tripwire run at {str(self.path)!r}: {RUN_FILE} is missing")
        self.info: dict[str, Any] = json.loads(run_file.read_text(encoding="utf-8"))
        self._offsets: dict[Path, int] = {}
        self._finding_offsets: dict[Path, int] = {}
        self._findings: list[Finding] = []
        #: ``{rule: {parameter: name}}`` an integration pointed at its own names in the training
        #: (``Session.bind_inputs``; XGBoost's loss rules read ``train-logloss``), from the first
        #: worker meta file that holds them; ``tripwire watch`` applies them to parameters left at default
        self.rule_inputs: dict[str, dict[str, str]] = {}
        self.refresh()

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r}, workers={self.workers}, complete={self.is_complete})"

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.info.get("config", {}))

    @property
    def environment(self) -> dict[str, Any]:
        return dict(self.info.get("environment", {}))

    @property
    def world_size(self) -> int:
        return int(self.info.get("world_size", 1))

    def refresh(self) -> int:
        """Read what was appended since the last read; return the number of new step records."""
        new = 0
        workers = self.path / WORKERS_DIR
        if workers.is_dir():
            for shard in sorted(workers.glob("worker-*.twr")):
                worker = int(shard.stem.split("-")[1])
                new += self._read_shard(shard, worker)
            self._read_meta(workers)
        findings = self.path / FINDINGS_DIR
        if findings.is_dir():
            for fpath in sorted(findings.glob("*.jsonl")):
                self._read_findings(fpath)
        return new

    def _read_meta(self, workers: Path) -> None:
        """What the writing sessions knew, from the worker meta files (read once per refresh; a file
        being replaced right now keeps what was read before): ``planned_steps``, the planned
        training length (rules scale windows by it; the largest of the workers'); ``every_step``,
        ``{collection: train save interval}`` of the collections kept at every step (rules read
        such series in save intervals; see ``History.every_step``); :attr:`rule_inputs`."""
        metas = []
        for path in sorted(workers.glob("worker-*[0-9].json")):
            try:
                metas.append(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                return
        planned = [v for v in (m.get("planned_steps") for m in metas) if isinstance(v, int) and v >= 1]
        if planned:
            self.planned_steps = max(planned)
        every = next((v for v in (m.get("every_step") for m in metas) if isinstance(v, dict)), None)
        if every is not None:
            self.every_step = {str(k): int(v) for k, v in every.items() if isinstance(v, int) and v >= 1}
        bound = next((v for v in (m.get("rule_inputs") for m in metas) if isinstance(v, dict)), None)
        if bound is not None:
            self.rule_inputs = {str(r): {str(k): str(v) for k, v in p.items()} for r, p in bound.items()
                                if isinstance(p, dict)}

    def _read_shard(self, shard: Path, worker: int) -> int:
        start = self._offsets.get(shard, 0)
        size = shard.stat().st_size
        if size <= start:
            return 0
        n = 0
        spath = str(shard)
        with open(shard, "rb") as f:
            for rec in iter_records(f, spath, start, size):
                h = rec.header
                if h.get("type") == "steps":  # several steps sharing one scalar layout
                    layout = [(t, tuple(r)) for t, r in h["scalars"]]
                    rows = rec.scalars.reshape(len(h["steps"]), -1)
                    for step, wall, row in zip(h["steps"], h["wall_times"], rows):
                        self.add_step(h["mode"], step, worker, wall, layout, row)
                    self._offsets[shard] = rec.end_offset
                    n += len(h["steps"])
                    continue
                arrays = [
                    (
                        a["tensor"],
                        a["kind"],
                        ArrayRef(spath, rec.payload_offset + a["offset"], a["dtype"], tuple(a["shape"]), a["nbytes"], a["crc"]),
                    )
                    for a in h.get("arrays", ())
                ]
                self.add_step(
                    h["mode"], h["step"], worker, h.get("wall_time", 0.0),
                    [(t, tuple(r)) for t, r in h.get("scalars", ())], rec.scalars, arrays, h.get("declare"),
                )
                self._offsets[shard] = rec.end_offset
                n += 1
        return n

    def _read_findings(self, fpath: Path) -> None:
        start = self._finding_offsets.get(fpath, 0)
        with open(fpath, "rb") as f:
            f.seek(start)
            data = f.read()
        end = data.rfind(b"\n") + 1  # a partial last line is still being written
        for line in data[:end].splitlines():
            if line.strip():
                self._findings.append(Finding.from_dict(json.loads(line)))
        self._finding_offsets[fpath] = start + end

    @property
    def findings(self) -> list[Finding]:
        """Every finding written to the run (in-process and by ``tripwire watch``)."""
        return sorted(self._findings, key=lambda f: (f.wall_time, f.step))

    @property
    def end_markers(self) -> dict[int, dict[str, Any]]:
        out = {}
        workers = self.path / WORKERS_DIR
        for marker in workers.glob("worker-*.end.json"):
            rank = int(marker.name.split("-")[1].split(".")[0])
            out[rank] = json.loads(marker.read_text(encoding="utf-8"))
        return out

    @property
    def is_complete(self) -> bool:
        """True when every writing worker left its end-of-run marker."""
        workers = self.path / WORKERS_DIR
        shards = {int(p.stem.split("-")[1]) for p in workers.glob("worker-*.twr")}
        if not shards:
            return False
        return all((workers / end_marker_name(r)).exists() for r in shards)

    @property
    def status(self) -> str:
        """``running`` (or crashed), or the end status: ``complete``, ``stopped``, ``failed``."""
        markers = self.end_markers
        if not self.is_complete:
            return "running"
        statuses = {m.get("status", "complete") for m in markers.values()}
        for s in ("failed", "stopped"):
            if s in statuses:
                return s
        return "complete"

    def tensor(self, name: str) -> TensorView:
        self._check_tensor(name)
        return TensorView(self, name)

    def stop_requests(self) -> list[dict[str, Any]]:
        """Stop requests written by ``tripwire watch`` (see :func:`request_stop`)."""
        return read_stop_requests(self.path)


def open_run(path: str | os.PathLike[str]) -> Run:
    """Open a stored run (local path) for reading."""
    return Run(path)


def request_stop(run_dir: str | os.PathLike[str], finding: Finding) -> None:
    """Ask the in-process callback of a running job to stop at its next step."""
    from ._writer import atomic_write_json

    control = Path(run_dir) / CONTROL_DIR
    control.mkdir(parents=True, exist_ok=True)
    atomic_write_json(control / "stop.json", {"finding": finding.to_dict()})


def read_stop_requests(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    path = Path(run_dir) / CONTROL_DIR / "stop.json"
    if not path.exists():
        return []
    return [json.loads(path.read_text(encoding="utf-8"))]

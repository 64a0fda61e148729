"""Trial 29b F3: an offline replay (``tripwire watch --once``, ``tripwire.watch``) read every
tensor's series, cut to the record replayed, at every record for ``exploding_tensor`` (1.8 ms a
record over 50 tensors). Once a tensor was seen in a window, the others are passed over where the
run holds no bad value of theirs at a step of it; the findings are the same."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire._watch import HistoryAsOf

TENSORS = 8
STEPS = 40


def _write(path: Path, bad: list[tuple[int, str, float]] | None = None, nonfinite_count: bool = True,
           rules: list[Any] | None = None) -> list[tripwire.Finding]:
    """A run of ``TENSORS`` gradients and the loss, every step; ``bad``: ``(step, tensor, value)``,
    one element of that tensor set to the value there. Returns the in-process findings."""
    reds = ["l2", "mean", "max"] + (["nonfinite_count"] if nonfinite_count else [])
    bad = bad or []
    with tripwire.Session({"out_dir": str(path), "save": {"interval": 1}, "rules": [] if rules is None else rules,
                           "collections": {"gradients": {"reductions": reds}, "losses": {}}}) as s:
        for step in range(STEPS):
            tensors: dict[str, tuple[Any, str]] = {"loss": (1.0, "losses")}
            for i in range(TENSORS):
                g = np.full(4, 0.1 * (i + 1), dtype=np.float32)
                for at, name, value in bad:
                    if at == step and name == f"g{i}":
                        g[2] = value
                tensors[f"g{i}"] = (g, "gradients")
            s.step("train", step, tensors)
        return list(s.findings)


def _replay(path: Path, **config: Any) -> list[tripwire.Finding]:
    logging.disable(logging.WARNING)
    try:
        return tripwire.watch(path, {"rules": [{"name": "exploding_tensor", **config}]}, once=True, record=False)
    finally:
        logging.disable(logging.NOTSET)


def test_a_replay_does_not_cut_every_tensors_series_at_every_record(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path / "run")
    cuts: list[tuple[Any, ...]] = []
    real = HistoryAsOf._cut

    def counted(self: HistoryAsOf, *args: Any) -> Any:
        cuts.append(args)
        return real(self, *args)

    monkeypatch.setattr(HistoryAsOf, "_cut", counted)
    assert _replay(tmp_path / "run") == []
    # (the loss, first in the order of collections, at every record; the gradients not: before, each
    # of them at each record too, 9 reads a record)
    assert len(cuts) <= 2 * STEPS, len(cuts)
    assert {a[0] for a in cuts} == {"loss"}


@pytest.mark.parametrize("nonfinite_count", [True, False])
@pytest.mark.parametrize(("bad", "only_nan"), [
    ([(25, "g5", float("nan"))], False),
    ([(25, "g5", float("inf")), (31, "g2", float("nan"))], False),
    ([(25, "g5", float("inf")), (31, "g2", float("nan"))], True),
    ([(12, "g7", float("inf")), (12, "g1", float("-inf")), (30, "g0", float("nan"))], False),
])
def test_the_replay_finds_what_the_training_found(tmp_path: Path, bad: list[tuple[int, str, float]],
                                                  only_nan: bool, nonfinite_count: bool) -> None:
    """The first bad step and, there, the first bad tensor, in training and in the replay (of the
    same run written without rules), each finding of a rule that fires again."""
    rule = {"name": "exploding_tensor", "only_nan": only_nan, "repeat": True}
    trained = _write(tmp_path / "trained", bad, nonfinite_count, rules=[rule])
    _write(tmp_path / "run", bad, nonfinite_count)
    replayed = _replay(tmp_path / "run", only_nan=only_nan, repeat=True)
    said = [(f.step, f.tensors, f.message) for f in trained]
    assert said and [(f.step, f.tensors, f.message) for f in replayed] == said
    counted = sorted((s, name) for s, name, v in bad if not only_nan or np.isnan(v))
    assert said[0][0] == counted[0][0] and list(said[0][1]) == [counted[0][1]]

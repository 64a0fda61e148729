"""Out-of-process watching: ``tripwire watch RUN --config rules.yaml``.

A :class:`Watcher` follows a run while it is written (``Run.refresh()``), evaluates the rules on every
new record of every worker and mode in write order, as of that record (a rule sees only what was
written up to then, so a backlog is replayed exactly as in-process), appends its findings to
``findings/watch-00000.jsonl`` (the writer's JSON-lines format) and, for a rule whose actions include
``stop_training`` (or ``raise``), or for every finding with ``--stop``, asks the training to stop through
:func:`tripwire.request_stop` (the in-process session honours it at its next step). It also raises
``stalled_training`` when no new data arrives. It ends when every worker left its end marker, or
after one pass with ``--once``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ._actions import Action, resolve_action
from ._config import MODES, Config, load_config
from ._errors import ActionError, ConfigError, RunNotFoundError, TripwireError
from ._finding import Finding
from ._format import FINDINGS_DIR, RUN_FILE
from ._history import History
from ._run import Run, open_run, request_stop
from ._session import _feedable
from ._validate import check_float
from .rules._base import Rule
from .rules._common import BuiltinRule, unfed_message, unfed_rules, unmatched_inputs
from .rules._registry import _init_parameters, build_rules
from .rules.stalled_training import StalledTraining

logger = logging.getLogger("tripwire")

WATCH_SOURCE = "watch"
WATCH_FINDINGS = f"{WATCH_SOURCE}-00000.jsonl"


class HistoryAsOf:
    """A read-only view of a History limited to the records written up to a wall time.

    Rules evaluated by the watcher at an old record must not see later records (a rule checking
    "is the latest value at this step" would otherwise skip a backlog)."""

    def __init__(self, history: History) -> None:
        self._h = history
        self.limit: float | None = None
        self._max_step: dict[tuple[str, int], float] = {}

    def set_limit(self, limit: float | None) -> None:
        self.limit = limit
        self._max_step = {}

    def __getattr__(self, name: str) -> Any:  # everything not time-dependent
        return getattr(self._h, name)

    def _allowed(self, mode: str, worker: int) -> tuple[int, float]:
        """(number of records, largest step) of ``mode`` written up to the limit."""
        steps, walls = self._h.wall_times(mode, worker)
        if self.limit is None:
            return len(steps), float(steps.max()) if len(steps) else -1.0
        n = int(np.count_nonzero(walls <= self.limit))
        return n, float(steps[:n].max()) if n else -1.0

    def wall_times(self, mode: str = "train", worker: int = 0) -> tuple[np.ndarray, np.ndarray]:
        steps, walls = self._h.wall_times(mode, worker)
        n, _ = self._allowed(mode, worker)
        return steps[:n], walls[:n]

    def steps(self, mode: str = "train", worker: int | None = None) -> list[int]:
        workers = self._h.workers if worker is None else [worker]
        out: set[int] = set()
        for w in workers:
            out.update(self.wall_times(mode, w)[0].tolist())
        return sorted(out)

    def modes(self) -> list[str]:
        return [m for m in MODES if any(len(self.wall_times(m, w)[0]) for w in self._h.workers)]

    def series(self, tensor: str, reduction: str = "raw", mode: str = "train", worker: int = 0) -> tuple[np.ndarray, np.ndarray]:
        steps, values = self._h.series(tensor, reduction, mode, worker)
        if self.limit is None or not len(steps):
            return steps, values
        key = (mode, worker)
        top = self._max_step.get(key)
        if top is None:
            top = self._max_step[key] = self._allowed(mode, worker)[1]
        if steps[-1] <= top:
            return steps, values
        keep = steps <= top
        return steps[keep], values[keep]

    # defined through ``series``: History's own methods, reading this view's limited series
    latest = History.latest
    value = History.value

    def array_steps(self, tensor: str, kind: str = "raw", mode: str = "train", worker: int = 0) -> list[int]:
        _, top = self._allowed(mode, worker)
        return [s for s in self._h.array_steps(tensor, kind, mode, worker) if s <= top]


class Watcher:
    """Evaluate rules over a stored run while it is written.

    ``config``: a YAML path, mapping or :class:`Config` whose ``rules`` and ``actions`` are used (None:
    the rules stored with the run, else the ``default`` set). ``stop``: every finding requests a stop.
    ``echo``: called with each finding (default: print it).
    """

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        config: str | os.PathLike[str] | Mapping[str, Any] | Config | None = None,
        *,
        stop: bool = False,
        echo: Callable[[Finding], None] | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        self._config_source = config
        self.stop = stop
        self.echo = echo if echo is not None else (lambda f: print(str(f), flush=True))
        self._echo_prints = echo is None  # the default echo prints each finding: the log action would repeat it
        self.config: Config | None = None
        self.run: Run | None = None
        self.view: HistoryAsOf | None = None
        self.findings: list[Finding] = []
        self.stop_requested: Finding | None = None
        self._rules: dict[int, list[Rule]] = {}
        self._actions: dict[int, list[list[Action]]] = {}
        self._fired: set[tuple[int, int]] = set()
        self._disabled: set[tuple[int, int]] = set()
        self._done: dict[tuple[str, int], int] = {}
        self._preexisting: set[tuple[str, int]] = set()
        if config is not None:
            self.config = load_config(config)  # validate early, before the run exists

    # --------------------------------------------------------------------------------- setup
    def _open(self) -> bool:
        if self.run is not None:
            return True
        if not (self.run_dir / RUN_FILE).is_file():
            return False
        self.run = open_run(self.run_dir)
        self.view = HistoryAsOf(self.run)
        if self.config is None:
            stored = self.run.config.get("rules") or ["default"]
            try:
                self.config = load_config({"rules": stored, "actions": self.run.config.get("actions", ["log", "record"])})
            except ConfigError:
                self.config = load_config({"rules": ["default"]})
        for f in self.run.findings:  # a restarted watcher does not repeat its findings
            if f.source == WATCH_SOURCE:
                self._preexisting.add((f.rule, f.worker))
        return True

    def _rules_for(self, worker: int) -> list[Rule]:
        rules = self._rules.get(worker)
        if rules is None:
            assert self.config is not None
            assert self.run is not None
            # as the training's session judged: a rule set's members that its integration cannot
            # feed (vanishing_gradient on XGBoost) are left out, a rule named alone is refused
            info = self.run.info
            rules = _feedable(self.config, build_rules(self.config.rules), str(info.get("framework", "python")),
                              info.get("provides"))
            _bind_as_in_training(rules, self.run.rule_inputs)
            default = [resolve_action(a, f"actions[{i}]") for i, a in enumerate(self.config.actions)]
            actions = []
            for i, rule in enumerate(rules):
                if isinstance(rule, BuiltinRule):
                    rule.worker = worker
                actions.append(
                    [resolve_action(a, f"rules[{rule.name}].actions[{k}]") for k, a in enumerate(rule.actions)]
                    if rule.actions is not None else default
                )
                if (rule.name, worker) in self._preexisting:
                    self._fired.add((worker, i))
            self._rules[worker] = rules
            self._actions[worker] = actions
        return rules

    # ------------------------------------------------------------------------------ one pass
    def poll(self, now: float | None = None) -> list[Finding]:
        """Read what is new, evaluate it, act; return the new findings."""
        if not self._open():
            return []
        assert self.run is not None and self.view is not None
        self.run.refresh()
        new: list[Finding] = []
        pending: list[tuple[float, int, str, int, int]] = []  # wall, worker, mode, step, order
        for worker in self.run.workers:
            for mode in MODES:
                steps, walls = self.run.wall_times(mode, worker)
                start = self._done.get((mode, worker), 0)
                for k in range(start, len(steps)):
                    pending.append((float(walls[k]), worker, mode, int(steps[k]), k))
                self._done[(mode, worker)] = len(steps)
        pending.sort()
        for wall, worker, mode, step, _ in pending:
            self.view.set_limit(wall)
            new += self._evaluate(worker, step, mode)
        self.view.set_limit(None)
        if not pending and not self.run.is_complete:
            new += self._idle(time.time() if now is None else now)
        return new

    def _evaluate(self, worker: int, step: int, mode: str) -> list[Finding]:
        out = []
        rules = self._rules_for(worker)
        for i, rule in enumerate(rules):
            if (worker, i) in self._disabled or ((worker, i) in self._fired and not rule.repeat):
                continue
            try:
                found = rule.evaluate(self.view, step, mode)  # type: ignore[arg-type]
            except Exception as exc:
                self._disabled.add((worker, i))
                err = Finding(
                    rule=rule.name, step=step, mode=mode, kind="error", severity="error", worker=worker,
                    message=f"the rule raised {type(exc).__name__}: {exc}; it is disabled for the rest of the watch",
                    details={"traceback": traceback.format_exc()}, source=WATCH_SOURCE,
                )
                self._emit(err, [])
                out.append(err)
                continue
            for f in found:
                f = Finding(**{**f.__dict__, "worker": worker, "rule": f.rule or rule.name, "source": WATCH_SOURCE})
                self._fired.add((worker, i))
                self._emit(f, self._actions[worker][i])
                out.append(f)
                if not rule.repeat:
                    break
        return out

    def _idle(self, now: float) -> list[Finding]:
        out = []
        for worker in self.run.workers if self.run is not None else []:
            for i, rule in enumerate(self._rules_for(worker)):
                if not isinstance(rule, StalledTraining) or (worker, i) in self._fired or (worker, i) in self._disabled:
                    continue
                f = rule.check_idle(self.view, now)  # type: ignore[arg-type]
                if f is not None:
                    f = Finding(**{**f.__dict__, "worker": worker, "source": WATCH_SOURCE})
                    self._fired.add((worker, i))
                    self._emit(f, self._actions[worker][i])
                    out.append(f)
        return out

    def _emit(self, finding: Finding, actions: Iterable[Action]) -> None:
        self.findings.append(finding)
        append_finding(self.run_dir, finding)
        self.echo(finding)
        wants_stop = self.stop and finding.kind == "finding"
        for action in actions:
            if action.stops or action.raises:
                wants_stop = True
                continue
            if action.name == "log" and self._echo_prints:
                continue
            try:
                action.fire(finding)
            except ActionError as exc:  # says what went wrong: no traceback
                logger.error("tripwire watch: action %r failed for %s: %s", action.name, finding, exc)
            except Exception:
                logger.exception("tripwire watch: action %r failed for %s", action.name, finding)
        if wants_stop and self.stop_requested is None:
            self.stop_requested = finding
            request_stop(self.run_dir, finding)

    def unfed(self) -> dict[str, list[str]]:
        """Rules this run cannot feed: ``{rule: [collections it needs that the run has none of]}``
        (a rule needs what the training captured; ``tripwire watch`` names them at the end)."""
        if not self._open():
            return {}
        assert self.run is not None
        return unfed_rules(self._first_worker_rules(), self.run.collections())

    def unmatched(self) -> list[str]:
        """Rule parameters naming a loss or metric that this run does not have (see
        :func:`tripwire.rules._common.unmatched_inputs`; ``tripwire watch`` prints them at the end)."""
        if not self._open():
            return []
        assert self.run is not None
        return unmatched_inputs(self._first_worker_rules(), self.run)

    def _first_worker_rules(self) -> list[Rule]:
        """The rules of the run's first worker (every worker's rules are configured alike)."""
        assert self.run is not None
        return self._rules_for(self.run.workers[0] if self.run.workers else 0)

    # ---------------------------------------------------------------------------------- loop
    @property
    def complete(self) -> bool:
        return self.run is not None and self.run.is_complete

    def watch(self, interval: float = 5.0, once: bool = False, timeout: float | None = None) -> list[Finding]:
        """Poll every ``interval`` seconds until the run is complete (or once); return all findings."""
        started = time.monotonic()
        if once:
            if not self._open():
                raise RunNotFoundError(f"no tripwire run at {str(self.run_dir)!r}: {RUN_FILE} is missing")
            self.poll()
            return self.findings
        while True:
            self.poll()
            if self.complete:
                self.poll()  # records written just before the end markers
                return self.findings
            if timeout is not None and time.monotonic() - started > timeout:
                return self.findings
            time.sleep(interval)


def append_finding(run_dir: str | os.PathLike[str], finding: Finding) -> None:
    """Append one finding as a JSON line to the run's watch findings file (one write, flushed, fsynced)."""
    folder = Path(run_dir) / FINDINGS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(finding.to_dict(), allow_nan=True) + "\n").encode("utf-8")
    fd = os.open(folder / WATCH_FINDINGS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(line)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)


def watch(
    run_dir: str | os.PathLike[str],
    config: str | os.PathLike[str] | Mapping[str, Any] | Config | None = None,
    *,
    interval: float = 5.0,
    once: bool = False,
    stop: bool = False,
    timeout: float | None = None,
    echo: Callable[[Finding], None] | None = None,
) -> list[Finding]:
    """Watch a run (see :class:`Watcher`); return the findings made."""
    check_float(interval, "interval", minimum=0.0, min_inclusive=False)
    return Watcher(run_dir, config, stop=stop, echo=echo).watch(interval, once, timeout)


# -------------------------------------------------------------------------------------- CLI
def _bind_as_in_training(rules: list[Rule], bound: dict[str, dict[str, str]]) -> None:
    """Point rule parameters left at their defaults where the training's integration pointed them
    (``Run.rule_inputs``: XGBoost's loss rules read ``train-logloss``, not ``loss``)."""
    for rule in rules:
        params = _init_parameters(type(rule))
        for param, name in bound.get(rule.name, {}).items():
            p = params.get(param)
            if p is not None and hasattr(rule, param) and getattr(rule, param) == p.default:
                setattr(rule, param, name)


def _handle(args: argparse.Namespace) -> int:
    try:
        if args.interval <= 0:
            raise ConfigError(f"--interval: got {args.interval!r}; accepted: a number of seconds > 0")
        if args.once and not Path(args.run).exists():
            raise RunNotFoundError(f"no tripwire run at {args.run!r}: the directory does not exist")
        watcher = Watcher(args.run, args.config, stop=args.stop)
        findings = watcher.watch(args.interval, args.once, args.timeout)
        have = watcher.run.collections() if watcher.run is not None else []
        for rule, missing in watcher.unfed().items():
            print(f"tripwire watch: {unfed_message(rule, missing, have)}; capture it in the training's config",
                  file=sys.stderr)
        for message in watcher.unmatched():
            print(f"tripwire watch: {message}", file=sys.stderr)
    except TripwireError as exc:
        print(f"tripwire watch: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 1 if any(f.kind == "finding" for f in findings) else 0


def register(subparsers: Any) -> None:
    """Add ``tripwire watch`` to the CLI."""
    p = subparsers.add_parser(
        "watch",
        help="evaluate rules over a run while it is written (out of process)",
        description=(
            "Evaluate rules over a stored run while the training writes it; findings go to "
            "RUN/findings/watch-00000.jsonl. Exit status: 0 no rule fired, 1 a rule fired, 2 bad input."
        ),
    )
    p.add_argument("run", help="the run directory")
    p.add_argument("--config", default=None, help="YAML config whose rules/actions to use (default: the run's own rules, else the default set)")
    p.add_argument("--interval", type=float, default=5.0, help="seconds between polls (default 5)")
    p.add_argument("--once", action="store_true", help="evaluate what is there now, then exit")
    p.add_argument("--stop", action="store_true", help="ask the training to stop at the first finding")
    p.add_argument("--timeout", type=float, default=None, help="give up after this many seconds (default: wait for the end of the run)")
    p.set_defaults(func=_handle)


__all__ = ["HistoryAsOf", "Watcher", "append_finding", "register", "watch"]

"""The :class:`Tuner`: samples configurations, runs trials on an executor, applies the strategy's
stopping decisions to every report, journals everything, stops on the completion criteria.

Completion criteria (any that is set ends the job):

- ``max_jobs``: no new trial starts once ``max_jobs`` trials exist; running ones finish.
- ``target_value``: the best objective reaches it (``>=`` for ``max``, ``<=`` for ``min``).
- ``max_no_improvement``: ``N`` trials in a row ended (completed, stopped or failed: a failed trial
  ended without improving the best, trial 26b) without improving the best, in the order they
  ended (a resume replays the journal's trials in that order: :func:`_in_end_order`).
- ``max_wall_time``: seconds of tuning, summed over sessions (a resumed job continues the count),
  each from its start: the workers' start-up and ``setup()`` count (trial 25f); a session killed
  outright counts to its last heartbeat (every :data:`HEARTBEAT_S`, trial 28b).
- ``max_total_resource``: resource units (epochs, rounds) summed over all trials (a trial's last
  reported step; ``max_resource`` for one that returned without reporting, counted when it ends;
  0 without a ``max_resource``, so ``max_total_resource`` as the only criterion of a strategy without
  one is refused: a ``train`` that does not report would never spend it, trial 30e).

All but ``max_jobs`` also stop the running trials at their next report (status ``stopped``,
reason naming the criterion), except a report at ``max_resource``: that trial ran its full budget
and is ``completed``, reason ``reached max_resource=M`` (trial 23o). A resume whose criterion is
met already reruns the trials that were running when its tuner stopped (launched before the halt),
and stops each at its first report likewise; no new trial starts (after fail fast, they stay
``pending``: the same error would fail them). A trial that raises is
``failed`` with its traceback; the job goes on. A failed trial's values leave the rungs when it
fails, as a rule-stopped trial's (a broken run judges no later trial, trial 25f).
``trial_timeout`` (seconds) cancels a trial that runs longer (``failed``, kind timeout).
A trial whose objective is NaN (the float ``train`` returned, the dict's objective key, or the last
reported value when ``train`` returns None) is ``failed`` (reason ``failed (objective is nan)``,
error ``the objective is nan: ...``), as in Optuna; ``+-inf`` is a value.

Fail fast (``fail_fast=True``, the default): while no trial of the job has ended without failing,
once ``max(2, max_parallel_jobs)`` trials of this session failed with the same error certain to
repeat (the same last line of the traceback, compared with ``trial <N>``, ``process <N>`` and
``pid <N>`` masked; a ConfigError such as a misspelled metric name, a ReportError of a misused
trial, an ImportError, a NameError..., train returning no objective, or a TypeError about None
where the strategy has no ``max_resource``: the training loop's ``trial.max_resource``; the
reason then says how to set it), no new trial starts and
the job ends like a completion criterion. Other errors (a ValueError, a RuntimeError, a NaN
objective: maybe one configuration's failure) never end the job. A job with a mix of failures
and successes goes on. When no trial produced an objective, :meth:`Tuner.fit` logs a WARNING on the
``tripwire.tune`` logger with the number of failed trials and the first error's last line.

SIGTERM while :meth:`Tuner.fit` runs in the main thread takes the same path as Ctrl-C: the workers
are stopped, the trials that were running become ``pending`` (rerun by :meth:`Tuner.resume`; one
told to stop already ends with its last reported value, trial 27b), the journal is released; then
the signal is delivered again to the handler that was there before.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import json
import linecache
import logging
import math
import multiprocessing as mp
import numbers
import os
import re
import secrets
import shutil
import signal
import sys
import tempfile
import threading
import time
import tokenize
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from tripwire._validate import did_you_mean
from tripwire._validate import checked_keywords

from ._errors import ConfigError, JournalError, TuneError, error_summary
from ._executor import (NESTED_START_EXIT, Executor, Failed, Finished, LocalExecutor, MainScriptStop, Report,
                        Started, TrialSpec, in_worker_startup, loading_main, note_fit_call)
from ._format import format_value
from ._journal import Journal, journal_path_problem
from ._result import TrialRecord, TuningResult, check_journal_arg, ended_before_any_trial, journal_url_problem
from ._scheduler import Decision, FIFOScheduler, HyperbandScheduler
from ._space import Categorical, Integer, Parameter, Space
from ._strategy import GridSearch, Hyperband, RandomSearch, Strategy, strategy_from_dict
from ._trial import number_like
from ._view import LiveView

__all__ = ["LIMITS", "Tuner", "executor_from_spec", "import_ref"]

#: The job's limits: :meth:`Tuner.resume` may change them, and writes the new values to the journal.
LIMITS = ("max_jobs", "max_parallel_jobs", "trial_timeout", "target_value", "max_no_improvement", "max_wall_time",
          "max_total_resource", "fail_fast")

Progress = Callable[[dict[str, Any]], None]
logger = logging.getLogger("tripwire.tune")
#: Attribute set on the log records that sum a finished job up (``fit()``'s end); ``tripwire tune``,
#: which prints the job's summary itself, leaves them out.
SUMMARY_RECORD = "tripwire_summary"


class _Terminated(BaseException):
    """Raised in the main thread by the SIGTERM handler that :meth:`Tuner.fit` installs."""


class _JournalGone(Exception):
    """Raised in :meth:`Tuner._run` when the journal's file is no longer at its path: ``args`` are
    :meth:`Journal.file_problem`'s text and whether the job had ended; :meth:`Tuner._fit` rescues
    the job and raises a :class:`JournalError`."""


#: Seconds between two checks that the journal's file is still at its path while a job runs
#: (one ``os.stat``; trial 29c), and once more when the job ends.
JOURNAL_CHECK_S = 1.0




#: Errors that do not depend on a trial's hyperparameters: a config or API mistake (tripwire's
#: ConfigError, say a misspelled trial_metric; a misused trial), a missing import or name. Only
#: these count towards fail fast: a ValueError or RuntimeError may be one configuration's failure.
_CERTAIN_ERRORS = frozenset({"ConfigError", "MissingDependencyError", "ReportError", "TrialDetachedError",
                             "ImportError", "ModuleNotFoundError", "NameError", "UnboundLocalError",
                             "SyntaxError", "IndentationError"})
_ERROR_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::|$)")
#: Dask's error for a task its worker cannot unpickle (a function a long-lived cluster's workers do
#: not have: a module they imported before it was changed)
DESERIALIZATION = "Error during deserialization of the task graph"
# what differs between the trials that fail alike: the trial's number, a worker's pid
_VARYING = re.compile(r"\b(trial|process|pid) \d+\b")


def _error_key(line: str) -> str:
    """A failed trial's last error line with the trial number (and a worker pid) masked, so that the
    same mistake in trials 0 and 1 (``ReportError: trial 0: duplicate step=1 ...``) counts as one."""
    return _VARYING.sub(lambda m: f"{m.group(1)} <N>", line)


#: Start of the error of a trial whose objective is NaN (a diverged configuration: it fails that
#: trial, not every trial, so it never counts towards fail fast).
NAN_OBJECTIVE = "the objective is nan"
#: ``fit(progress=...)`` gets a snapshot at most once per this many seconds (and once at the end).
PROGRESS_INTERVAL_S = 0.2
#: Seconds between two heartbeats of a running job: each refreshes the journal lock's heartbeat and
#: writes the job's time so far (meta ``wall_seconds``), so a session killed outright counts its time
#: to within this period (trial 28b).
HEARTBEAT_S = 10.0


#: Why a TypeError about None fails every trial of a strategy without ``max_resource``: the
#: issue's loop ``range(1, trial.max_resource + 1)`` reads it.
NO_MAX_RESOURCE_HINT = ("trial.max_resource is None: this strategy has no max_resource (a loop such as "
                        "range(1, trial.max_resource + 1) needs one); pass RandomSearch(max_resource=N) or "
                        "GridSearch(max_resource=N), or use Hyperband")


def _none_max_resource(last_line: str, max_resource: int | None) -> bool:
    """A TypeError about None in a job whose trials get ``max_resource=None``: most likely the
    training loop's own ``trial.max_resource`` (it fails every trial alike)."""
    return max_resource is None and last_line.startswith("TypeError") and "NoneType" in last_line


def _certain_to_repeat(last_line: str, max_resource: int | None = 0) -> bool:
    """Whether a failed trial's error (the last line of its traceback, or the tuner's own message
    when train broke the contract, e.g. returned no objective) would fail every trial alike
    (``max_resource``: the strategy's; None makes a TypeError about None one)."""
    if last_line.startswith(NAN_OBJECTIVE):  # one configuration diverged
        return False
    if last_line.startswith("train returned "):  # the tuner's message: train broke the contract
        return True
    if _none_max_resource(last_line, max_resource):
        return True
    if DESERIALIZATION in last_line:  # (the trial's code cannot be loaded where it runs: every trial alike)
        return True
    m = _ERROR_LINE.match(last_line)  # (a timeout or a dead worker is no exception: not certain)
    return m is not None and m.group(1).rsplit(".", 1)[-1] in _CERTAIN_ERRORS


def _broken(status: str, rule: str | None) -> bool:
    """Whether a trial that ended is a broken run, whose rung values judge no other trial: one a
    tripwire rule stopped, or one that failed (it raised, returned no objective or NaN, ran past
    ``trial_timeout``, or its worker died; trial 25f). Such a trial is never ``best``: its values
    would stop candidates in its place."""
    return rule is not None or status == "failed"


def _outside_space(params: Mapping[str, Any], space: Space) -> str | None:
    """Why a trial's ``params`` (an earlier job's, ``warm_start``) lie outside ``space``: the first
    parameter whose value its range here does not hold (``"x=0.9, outside Continuous(low=0.2, ...)"``;
    a value inside an ``Integer`` range that is no integer: ``"x=0.51, not an integer, as Integer(...)
    holds integers only"``), or None when every value is in its range."""
    for name, p in space.ranges.items():
        if name not in params:
            return f"no value of {name!r}"
        v = params[name]
        if isinstance(p, Categorical):
            inside = any(type(v) is type(c) and v == c for c in p.values)
        else:
            inside = isinstance(v, numbers.Real) and not isinstance(v, bool) and p.low <= v <= p.high  # type: ignore[attr-defined]
            if inside and isinstance(p, Integer) and not float(v).is_integer():
                # (trial 30g F9: 0.51 in Integer(0, 1) was said to be "outside" it)
                return f"{name}={v!r}, not an integer, as {p!r} holds integers only"
        if not inside:
            return f"{name}={v!r}, outside {p!r}"
    return None


#: How ``halt`` starts when fail fast ended the job.
FAIL_FAST = "fail_fast"
#: The statuses of a trial that ended.
ENDED = ("completed", "stopped", "failed")


def _in_end_order(rows: Sequence[Mapping[str, Any]], mode: str) -> list[Mapping[str, Any]]:
    """The journal's ended trials (``rows``: :meth:`Journal.trials`, in number order) in the order
    they ended (their ``ended`` time), as a live session counts ``max_no_improvement``. Trials
    that ended at the same recorded time (a coarse clock) are put with the best value last (in
    ``mode``; one that cannot improve the best, failed, rule-stopped or without a value, first),
    so that the count after them is the smallest it may have been, never a halt the live job
    would not have reached; then by number. An ended trial without an end time (not written
    so by tripwire) comes first, in number order: before the trials whose order is known."""
    def goodness(r: Mapping[str, Any]) -> float:
        v = r["value"]
        if r["status"] == "failed" or r["rule"] is not None or v is None or math.isnan(v):
            return -math.inf
        return float(v) if mode == "max" else -float(v)

    ended = [r for r in rows if r["status"] in ENDED]
    return sorted(ended, key=lambda r: (r["ended"] is not None, r["ended"] or 0.0, goodness(r), r["number"]))


def _metric(v: Any) -> Any:
    """A returned metric as JSON keeps it: str, int, float, bool, None; a numpy number or a 1-element
    array or tensor as the number it holds (the workers convert them already; an executor of the
    user's may not, trial 22b); anything else as its str."""
    v = number_like(v)
    if v is None or isinstance(v, (str, bool)):
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        return float(v)
    return str(v)


#: How to guard a script's entry point (trial 22b).
GUARD_HINT = ("guard the script's entry point: put the code that runs the job (the call that reaches "
              "`tuner.fit()`) under `if __name__ == \"__main__\":`")


def _is_name_guard(test: ast.expr) -> bool:
    """Whether an ``if`` test reads ``__name__`` (``__name__ == "__main__"`` and its variants)."""
    return any(isinstance(n, ast.Name) and n.id == "__name__" for n in ast.walk(test))


def _unguarded_main_call() -> tuple[str, int] | None:
    """``(script, line)`` when this call runs from the main script's module-level code at a line
    outside any ``if __name__ ...:`` block (the script is unguarded: a process that re-runs it as
    ``__mp_main__`` runs the call again); None when guarded, or when that cannot be read (no
    script file: ``python -c``, a notebook)."""
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_code.co_name == "<module>"
                                     and frame.f_globals.get("__name__") == "__main__"):
        frame = frame.f_back
    if frame is None:
        return None
    path, line = frame.f_code.co_filename, frame.f_lineno
    main = sys.modules.get("__main__")
    main_file = getattr(getattr(main, "__spec__", None), "origin", None) or getattr(main, "__file__", None)
    if not isinstance(main_file, str) or not os.path.isfile(path) \
            or os.path.realpath(path) != os.path.realpath(main_file):
        return None
    try:
        with tokenize.open(path) as fh:
            tree = ast.parse(fh.read(), path)
    except (OSError, SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_name_guard(node.test) \
                and node.lineno <= line <= (node.end_lineno or node.lineno):
            return None
    return path, line


def _main_attr(ref: str | None) -> Any:
    """``"__main__:name"`` resolved against the running ``__main__`` module, or None."""
    if not ref or not ref.startswith("__main__:"):
        return None
    obj: Any = sys.modules.get("__main__")
    for part in ref.partition(":")[2].split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj if callable(obj) else None


def import_ref(ref: str, what: str = "train") -> Callable[..., Any]:
    """Import ``"module:qualname"``."""
    if not isinstance(ref, str) or ":" not in ref:
        raise ConfigError(f"{what}={ref!r} must be 'module:function'")
    mod_name, _, qual = ref.partition(":")
    try:
        obj: Any = importlib.import_module(mod_name)
    except ImportError as exc:
        raise ConfigError(f"{what}={ref!r}: module {mod_name!r} does not import ({exc})") from None
    except Exception as exc:  # its own code failed: a SyntaxError, a file it reads at import ...
        raise ConfigError(f"{what}={ref!r}: module {mod_name!r} raised when imported: {_where_raised(exc)}") from exc
    for part in qual.split("."):
        if not hasattr(obj, part):
            # the functions and classes defined there (not what it imported)
            defined = sorted(n for n, v in vars(obj).items() if not n.startswith("_") and callable(v)
                             and getattr(v, "__module__", None) == getattr(obj, "__name__", mod_name))
            raise ConfigError(f"{what}={ref!r}: {mod_name!r} has no attribute {part!r}"
                              f"{did_you_mean(part, defined)}; defined there: {', '.join(defined) or 'none'}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ConfigError(f"{what}={ref!r} is not callable")
    return obj  # type: ignore[no-any-return]


def _where_raised(exc: BaseException) -> str:
    """``exc`` in one line with the place it names or was raised at: ``SyntaxError: expected ':'
    (mod.py, line 1)``; ``FileNotFoundError: ... (mod.py, line 3)``."""
    said = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[-1]
    if isinstance(exc, SyntaxError):
        return f"{said} ({exc.filename}, line {exc.lineno})"
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if "importlib" not in f.filename]
    return f"{said} ({user[-1].filename}, line {user[-1].lineno})" if user else said


def _ref_of(fn: Callable[..., Any] | None) -> str | None:
    if fn is None:
        return None
    mod, qual = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not mod or not qual or "<" in qual:
        return None
    return f"{mod}:{qual}"


def _has_rungs(strategy: Any) -> bool:
    """Whether ``strategy`` has a rung that an earlier journal's values can join as priors: a
    Hyperband of more than one bracket (``max_resource >= reduction_factor * min_resource``)."""
    if not isinstance(strategy, Hyperband):
        return False
    plan = strategy.scheduler("max", 0).plan
    return any(plan.rungs(b) for b in range(plan.n_brackets))


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _strategy_hint(strategy: Any) -> str:
    """For a strategy that is none of tripwire's instances: what was meant (trial 41c: the class
    ``Hyperband`` itself read "is not one of Hyperband, ...")."""
    if isinstance(strategy, type) and strategy in (Hyperband, RandomSearch, GridSearch):
        return f": the class itself was given; accepted: an instance, {strategy.__name__}(...)"
    if isinstance(strategy, (str, Mapping)):
        return ("; accepted: an instance, Hyperband(min_resource=1, max_resource=27, reduction_factor=3), "
                "RandomSearch(...) or GridSearch(...) (the YAML form, {type: hyperband, ...}, is tripwire tune's)")
    return "; accepted: an instance of one of them (Hyperband(...), RandomSearch(...), GridSearch(...))"


def _same_train(train: Callable[..., Any], job: Mapping[str, Any]) -> bool:
    """Whether the journaled ``train`` of ``job`` is ``train``: the same function name in the same
    source file (trial 41c: a script run as ``__main__`` and imported later, as ``module:train``, is
    one training)."""
    ref, file = job.get("train"), job.get("train_file")
    mine = _ref_of(train)
    if not ref or not file or not mine:
        return False
    return ref.partition(":")[2] == mine.partition(":")[2] and _file_of(train) == file


def _file_of(fn: Callable[..., Any] | None) -> str | None:
    """The source file that defines ``fn`` (resolved), or None (a builtin, a callable object)."""
    code = getattr(fn, "__code__", None)
    name = getattr(code, "co_filename", None)
    if not name or name.startswith("<"):
        return None
    return os.path.realpath(name)


def _other_train(train: Callable[..., Any], job: Mapping[str, Any], journal: str) -> str | None:
    """Why a ``__main__:name`` found in the running script is not the journaled function (None when
    it is): another script's ``train`` (or one it imported) would run the rest of the job and mix its
    results into the journal's."""
    ref, file = job.get("train"), job.get("train_file")
    mine = _file_of(train)
    if file and mine and mine != file:  # (a journal written before train_file existed: not checked)
        return (f"Tuner.resume({journal!r}): the journal's train is {ref} defined in {file}, but this script's "
                f"{ref.partition(':')[2]} is defined in {mine}: resuming would run another function and mix its "
                f"results into the job; resume from the script that started it, or pass Tuner.resume(journal, "
                f"train=...) to run this one on purpose")
    return None


def _after_ref(message: str, what: str, ref: str) -> str:
    """:func:`import_ref`'s error without its ``what=ref: `` head."""
    head = f"{what}={ref!r}: "
    return message[len(head):] if message.startswith(head) else message


def _import_root(module: str, file: str | None) -> str | None:
    """The folder that must be on the import path for ``module`` to import from ``file`` (where it
    was defined when the job was journaled): ``/x`` for ``pkg.mod`` in ``/x/pkg/mod.py``; None where
    ``file`` is not that module's file (unknown, or another layout)."""
    if not module or not file or module == "__main__":
        return None
    path = os.path.normpath(file)
    stem, ext = os.path.splitext(path)
    if ext != ".py":
        return None
    parts = stem.split(os.sep)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    names = module.split(".")
    if len(parts) <= len(names) or parts[-len(names):] != names:
        return None
    return os.sep.join(parts[:-len(names)]) or os.sep


def _not_imported(failed: list[tuple[str, str, str]], job: Mapping[str, Any]) -> str:
    """The error of a resumed job whose journaled ``train``/``setup`` (``failed``: ``(what, ref,
    why)``) do not import here: the entry points and why, the file that defined the job's ``train``
    (``train_file``), and how to run the job from here: the folder to put on the import path, or
    ``train=``/``setup=`` (trial 31g: "module 'strain' does not import" alone, after a resume from
    another directory)."""
    names = " and ".join(f"{what}={ref!r}" for what, ref, _ in failed)
    whys = "; ".join(dict.fromkeys(why for *_, why in failed))
    msg = f"the journal names {names}, which cannot be imported here: {whys}"
    file = job.get("train_file")
    module = str(job.get("train") or "").partition(":")[0]
    if file:
        gone = "" if os.path.exists(file) else ", which no longer exists"
        msg += f"; the job's train was defined in {file}{gone}"
    fixes = []
    root = _import_root(module, file)
    # (the journaled module itself not found: not a module it imports in turn)
    prefixes = [".".join(module.split(".")[:i + 1]) for i in range(len(module.split(".")))]
    missing = any(f"does not import (No module named {p!r})" in why for *_, why in failed for p in prefixes)
    if root is not None and missing and os.path.isdir(root):
        fixes.append(f"put {root} (where {module!r} was imported from when the job ran) on the import path "
                     f"(PYTHONPATH={root}, or sys.path.insert(0, {root!r}) before Tuner.resume; a script in that "
                     "folder, or `python -c` run there, has it)")
    passed = ", ".join(f"{what}=..." for what, _, _ in failed)
    plural = "s" if len(failed) > 1 else ""
    fixes.append(f"pass Tuner.resume(journal, {passed}) to run the job with the function{plural} you pass")
    return f"{msg}; {', or '.join(fixes)}"


class _Unresolved:
    """A resumed job's ``train`` that cannot be found where it is resumed: enough to return a finished
    job's result (trial 24d: refused from any other script, though no trial was to run); starting a
    trial raises ``ConfigError(message)`` (:meth:`Tuner._run`, before any worker starts)."""

    def __init__(self, message: str) -> None:
        self.message = message

    def __call__(self, params: dict[str, Any], trial: Any) -> Any:  # pragma: no cover - never started
        raise ConfigError(self.message)


def _opt_number(name: str, value: Any, positive: bool = True) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) \
            or (positive and value <= 0):
        raise ConfigError(f"{name}={value!r} must be a {'positive ' if positive else ''}finite number")
    return float(value)


def _opt_count(name: str, value: Any) -> int | None:
    if value is None:
        return None
    # numpy's integers are integers, kept as Python ints (trial 24f: max_jobs=np.int64(2) was refused)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ConfigError(f"{name}={value!r} must be an int >= 1")
    return int(value)


#: URL schemes of Dask scheduler addresses (distributed's comm backends): a string that starts with
#: one of them is an address, ``executor="tcp://host:8786"``.
DASK_SCHEMES = ("tcp", "tls", "inproc", "ucx", "ws", "wss")
EXECUTOR_FORMS = ("'local', 'dask', a Dask scheduler address ('tcp://host:8786'; schemes: "
                  + ", ".join(DASK_SCHEMES) + "), a distributed.Client, a Dask cluster (LocalCluster, ...), "
                  "a dict {type: local, start_method: ..., reuse_workers: ...} or {type: dask, address: ...}, "
                  "DaskExecutor(cluster), LocalExecutor(...) or another Executor instance")


def _is_dask_address(value: str) -> bool:
    scheme, sep, rest = value.partition("://")
    return bool(sep) and bool(rest) and scheme.lower() in DASK_SCHEMES


def _is_dask_client_or_cluster(value: Any) -> bool:
    """A ``distributed.Client`` or a cluster object, told apart without importing ``distributed``:
    a Client exists only once ``distributed`` is imported, and every Dask cluster (``LocalCluster``,
    ``SpecCluster``, dask-jobqueue's, dask-kubernetes'...) has a ``scheduler_address``."""
    dist = sys.modules.get("distributed")
    client = getattr(dist, "Client", None) if dist is not None else None
    if isinstance(client, type) and isinstance(value, client):
        return True
    if isinstance(value, (str, bytes, Mapping)):
        return False
    if hasattr(type(value), "scheduler_address"):  # a property: not evaluated (a closed cluster's may raise)
        return True
    try:
        return hasattr(value, "scheduler_address")
    except Exception:
        return False


class _Unrebuilt(Executor):
    """A resumed job's executor that the journal cannot rebuild (a Dask Client or cluster object):
    enough to return a finished job's result; starting a trial raises ``ConfigError(message)``."""

    def __init__(self, journaled: dict[str, Any], message: str) -> None:
        self._journaled, self._message = journaled, message

    def start(self, train: Callable[..., Any], setup: Callable[[], Any] | None, n_workers: int) -> None:
        raise ConfigError(self._message)

    def _check_start(self, train: Callable[..., Any], setup: Callable[[], Any] | None) -> None:
        raise ConfigError(self._message)

    def shutdown(self) -> None:
        pass

    def to_dict(self) -> dict[str, Any]:
        return dict(self._journaled)


def executor_from_spec(spec: Any) -> Executor:
    """The executor that ``Tuner(executor=spec)`` and a YAML job's ``executor:`` describe (one code
    path for both): ``None`` or ``"local"`` (a :class:`LocalExecutor`), ``"dask"`` (a
    ``DaskExecutor()`` on a new local cluster), a scheduler address (``"tcp://host:8786"``), a
    ``distributed.Client`` or cluster object (a ``DaskExecutor`` on it), a dict ``{"type": "local",
    "start_method": ..., "reuse_workers": ...}`` or ``{"type": "dask", "address": ...}``, or an
    :class:`Executor` instance (returned as it is). Anything else raises :class:`ConfigError` naming
    the value and every accepted form. The Dask forms need ``distributed`` (``tripwire[dask]``)."""
    if isinstance(spec, Executor):
        return spec
    if spec is None or (isinstance(spec, str) and spec == "local"):
        return LocalExecutor()
    if isinstance(spec, str) and (spec == "dask" or _is_dask_address(spec)):
        from ._dask import DaskExecutor
        return DaskExecutor(None if spec == "dask" else spec)
    if isinstance(spec, Mapping) and spec.get("type") in ("local", "dask"):
        rest = {k: v for k, v in spec.items() if k != "type"}
        if spec["type"] == "local":
            allowed = {"start_method", "reuse_workers"}
            if set(rest) - allowed:
                raise ConfigError(f"executor: unknown key(s) {sorted(set(rest) - allowed)} for type 'local'; "
                                  f"accepted: {sorted(allowed)}")
            return LocalExecutor(**rest)
        if set(rest) - {"address"}:
            raise ConfigError(f"executor: unknown key(s) {sorted(set(rest) - {'address'})} for type 'dask'; "
                              "accepted: ['address']")
        from ._dask import DaskExecutor
        return DaskExecutor(rest.get("address"))  # as the YAML always took it (None: a new local cluster)
    if _is_dask_client_or_cluster(spec):
        from ._dask import DaskExecutor
        return DaskExecutor(spec)
    hint = ""
    if isinstance(spec, str) and spec.lower().startswith(("http://", "https://")):
        hint = " (an http address is Dask's dashboard, not its scheduler: pass the scheduler's 'tcp://...')"
    elif isinstance(spec, str) and "://" not in spec and ":" in spec:
        hint = f" (a scheduler address needs its scheme: 'tcp://{spec}')"
    raise ConfigError(f"executor={spec!r} is not one of {EXECUTOR_FORMS}{hint}")


def _warm_start_paths(value: Any) -> list[str]:
    """``warm_start``: None, one journal path (str or os.PathLike) or a list/tuple of them."""
    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)):
        value = [value]
    if isinstance(value, (list, tuple)) and all(isinstance(p, (str, os.PathLike)) for p in value):
        for p in value:  # (a URL is no journal to read: trial 28f)
            problem = journal_url_problem(p, "warm_start")
            if problem is not None:
                raise ConfigError(problem)
        paths = [os.fspath(p) for p in value]
        if all(isinstance(p, str) and p for p in paths):
            return paths  # type: ignore[return-value]
    raise ConfigError(f"warm_start={value!r} is not one of: None, a journal path (str or os.PathLike), "
                      "a list of journal paths")


def _check_train_signature(train: Callable[..., Any]) -> None:
    """Refuse a ``train`` that cannot be called as ``train(params, trial)`` before any worker
    starts (every trial would fail alike, and a TypeError is no error fail_fast counts on)."""
    try:
        signature = inspect.signature(train)
    except (TypeError, ValueError):  # no signature to read (some builtins, C callables)
        return
    try:
        signature.bind(None, None)
    except TypeError as exc:
        name = getattr(train, "__qualname__", None) or repr(train)
        raise ConfigError(f"train={name}{signature} cannot be called as train(params, trial): {exc}") from None


@dataclass
class _Run:
    spec: TrialSpec
    started: float
    mono: float
    last_step: int | None = None
    last_value: float | None = None
    stop: bool = False
    reason: str | None = None
    rung: int = 0
    began: bool = True  # False while it waits for a worker (an executor that reports_start)


@checked_keywords
class Tuner:
    """Tune ``train(params, trial) -> float | dict`` over ``space``.

    ``objective``: the metric name (the key to read when ``train`` returns a dict); ``mode``:
    ``"max"`` or ``"min"``; ``strategy``: :class:`Hyperband`, :class:`RandomSearch` (default) or
    :class:`GridSearch`; ``max_parallel_jobs``: concurrent trials (default 1); ``seed``: same seed,
    same configurations (``None``: drawn and journaled); ``journal``: SQLite path (``None``: a
    temporary file); ``executor``: ``"local"`` (default, :class:`LocalExecutor`), ``"dask"`` (a new
    local Dask cluster), a Dask scheduler address (``"tcp://host:8786"``), a ``distributed.Client``,
    a Dask cluster object, a dict as in the YAML (``{"type": "dask", "address": ...}``), or an
    executor (``DaskExecutor(cluster)``, ``LocalExecutor(...)``), see :func:`executor_from_spec`;
    ``setup``: called once per worker, its return value is ``trial.context``; ``warm_start``:
    one journal path or a list of journal paths of earlier jobs (same objective, mode and parameter
    names; each job once: checked here, before anything is written) whose reported values join the
    rungs as prior results (those of trials outside this job's ranges left out, with a WARNING);
    ``fail_fast``: see the module docstring, as the completion criteria.
    """

    def __init__(self, train: Callable[..., Any], space: Mapping[str, Parameter] | Space,
                 objective: str = "objective", mode: str = "max", strategy: Strategy | None = None,
                 max_jobs: int | None = None, max_parallel_jobs: int = 1, seed: int | None = None,
                 journal: str | os.PathLike[str] | None = None, executor: Any = None,
                 setup: Callable[[], Any] | None = None, trial_timeout: float | None = None,
                 target_value: float | None = None, max_no_improvement: int | None = None,
                 max_wall_time: float | None = None, max_total_resource: int | None = None,
                 warm_start: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
                 fail_fast: bool = True) -> None:
        if not callable(train):
            raise ConfigError(f"train={train!r} must be a callable train(params, trial)")
        _check_train_signature(train)
        if setup is not None and not callable(setup):
            raise ConfigError(f"setup={setup!r} must be a callable taking no argument")
        self.train, self.setup = train, setup
        self.space = space if isinstance(space, Space) else Space.from_dict(space)
        if not isinstance(objective, str) or not objective:
            raise ConfigError(f"objective={objective!r} must be a non-empty metric name")
        if mode not in ("max", "min"):
            raise ConfigError(f"mode={mode!r} is not one of 'max', 'min'")
        self.objective, self.mode = objective, mode
        strategy = RandomSearch() if strategy is None else strategy
        if not isinstance(strategy, (RandomSearch, GridSearch, Hyperband)):
            raise ConfigError(f"strategy={strategy!r} is not one of Hyperband, RandomSearch, GridSearch"
                              + _strategy_hint(strategy))
        self.strategy = strategy
        self.max_jobs = _opt_count("max_jobs", max_jobs)
        self.max_parallel_jobs = _opt_count("max_parallel_jobs", max_parallel_jobs)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0):
            raise ConfigError(f"seed={seed!r} must be an int >= 0 or None")
        self.seed = secrets.randbits(32) if seed is None else int(seed)  # (np.int64(0) too: trial 24f)
        if journal is not None:
            if not isinstance(journal, (str, os.PathLike)) or not os.fspath(journal):
                raise ConfigError(f"journal={journal!r} is not one of: None (a temporary journal), a file path "
                                  "(str or os.PathLike)")
            problem = journal_url_problem(journal, "journal") or journal_path_problem(journal)
            if problem is not None:
                raise ConfigError(problem)
        self.journal_path = journal
        self.trial_timeout = _opt_number("trial_timeout", trial_timeout)
        self.target_value = _opt_number("target_value", target_value, positive=False)
        self.max_no_improvement = _opt_count("max_no_improvement", max_no_improvement)
        self.max_wall_time = _opt_number("max_wall_time", max_wall_time)
        self.max_total_resource = _opt_count("max_total_resource", max_total_resource)
        if not isinstance(fail_fast, bool):
            raise ConfigError(f"fail_fast={fail_fast!r} must be True or False (stop the job when its first trials "
                              "all fail with the same error)")
        self.fail_fast = fail_fast
        self._grid_size: int | None = None  # a GridSearch's number of points
        if isinstance(strategy, GridSearch):
            grid = self._grid_size = self.space.grid_size(strategy.num_points, strategy.integer_grid)
            self.max_jobs = grid if self.max_jobs is None else min(self.max_jobs, grid)
        if self.max_jobs is None and self.max_total_resource is None and self.max_wall_time is None \
                and self.target_value is None and self.max_no_improvement is None:
            raise ConfigError("max_jobs=None: set max_jobs (or another completion criterion: max_total_resource, "
                              "max_wall_time, target_value, max_no_improvement)")
        if self.max_total_resource is not None and strategy.max_resource is None and self.max_jobs is None \
                and self.max_wall_time is None and self.target_value is None and self.max_no_improvement is None:
            # trial 30e: a train that returns without reporting is charged 0 units without a max_resource,
            # so the budget was never spent, and the job ran 110,694 trials until it was killed
            raise ConfigError(
                f"max_total_resource={self.max_total_resource} is the only completion criterion, and the strategy "
                f"{strategy!r} has no max_resource: a trial is charged the last step it reports, and one that returns "
                "without reporting 0 units, so with a train that does not report the budget is never spent and the job "
                "never ends; accepted: a strategy with a max_resource (RandomSearch(max_resource=N), Hyperband(...): a "
                "trial that does not report is charged max_resource), or another completion criterion beside it "
                "(max_jobs, max_wall_time, target_value, max_no_improvement)")
        self.executor = executor_from_spec(executor)
        self.warm_start = _warm_start_paths(warm_start)
        if self.warm_start and not _has_rungs(strategy):
            # trial 41c: accepted, its priors [] and its WARNINGs about configurations proposed again and
            # "this job's rung priors" logged, where no rung reads them (trial 41k: Hyperband with
            # min_resource == max_resource, one bracket and no rung, too)
            which = (f"its one bracket (max_resource / min_resource below reduction_factor) has no rung"
                     if isinstance(strategy, Hyperband) else f"{type(strategy).__name__} has no rungs")
            raise ConfigError(
                f"warm_start={warm_start!r} with strategy={strategy!r}: an earlier journal's values are Hyperband's "
                f"rung priors (new trials must beat them to continue), and {which} and stops no trial, so they "
                "would change nothing; accepted: warm_start with strategy=Hyperband(...) of rungs (max_resource at "
                "least reduction_factor times min_resource), or no warm_start")
        for p in self.warm_start:
            if not os.path.exists(p):
                raise ConfigError(f"warm_start journal {p!r} does not exist")
        self._check_warm_start()
        self._resume = False
        #: Tuner.resume(executor=...) named the executor: fit() journals it with the limits (trial 28b)
        self._executor_given = False
        self._new_limits: dict[str, Any] | None = None  # a resumed job's job entry with resume()'s limits
        #: how the stop messages tell to continue the job (``tripwire tune`` names its own command)
        self.resume_hint = "Tuner.resume(journal)"

    # ---- job description ----------------------------------------------------------------------
    def _job(self) -> dict[str, Any]:
        return {"train": _ref_of(self.train), "train_file": _file_of(self.train), "setup": _ref_of(self.setup),
                "space": self.space.to_dict(),
                "objective": self.objective, "mode": self.mode, "strategy": self.strategy.to_dict(),
                "seed": self.seed, "max_jobs": self.max_jobs, "max_parallel_jobs": self.max_parallel_jobs,
                "trial_timeout": self.trial_timeout, "target_value": self.target_value,
                "max_no_improvement": self.max_no_improvement, "max_wall_time": self.max_wall_time,
                "max_total_resource": self.max_total_resource, "fail_fast": self.fail_fast,
                "executor": self.executor.to_dict(),
                "warm_start": self.warm_start}

    @classmethod
    def resume(cls, journal: str | os.PathLike[str], train: Callable[..., Any] | None = None,
               setup: Callable[[], Any] | None = None, executor: Any = None,
               **limits: Any) -> "Tuner":
        """A tuner that continues the job in ``journal``; call :meth:`fit` to run it::

            result = Tuner.resume("tuning.db").fit()

        After the tuning process was killed (even with SIGKILL), this continues where it stopped:
        ended trials stay, trials that were running are rerun from scratch under their own number
        (their rung values stay until the rerun's replace them, and a rerun that reports the same
        value at a step its attempt passed passes it again; a trial told to stop already is ended
        with its last reported value instead, trial 27b), the rungs are rebuilt from the journal (and
        ``max_no_improvement``'s count, in the order the trials ended). Where a completion criterion
        is met already, the interrupted trials are still rerun, each stopped at its first report, as
        a live job stops its running trials; none is left ``pending``. A job that had already finished is not rerun:
        ``fit()`` returns its result without starting a worker (unless ``limits`` raise
        ``max_jobs`` or another limit, in which case the job goes on). A warm-started job keeps the
        priors saved in its journal: its ``warm_start`` journals are not read again, so they may
        have moved since, and a relative path need not resolve from the current directory.

        ``executor`` takes the forms of ``Tuner(executor=...)``; ``None`` rebuilds the journaled
        local executor, Dask scheduler address or ``"dask"`` (a new local cluster); a job run on a
        ``distributed.Client`` or cluster object needs ``executor=``. ``train``/``setup`` default to the journaled
        ``module:function`` references (``__main__:name`` resolves against the running script when
        it defines ``name``); one that cannot be found here is needed only to run a trial: a finished
        job's result comes back without it, and otherwise :meth:`fit` raises :class:`ConfigError`
        naming it, the file that defined ``train`` and the fix, before any worker starts and before
        it writes anything to the journal (the interrupted trials stay as they were: trial 31g);
        ``limits`` may override
        ``max_jobs``, ``max_parallel_jobs``, ``trial_timeout``, ``target_value``,
        ``max_no_improvement``, ``max_wall_time``, ``max_total_resource``, ``fail_fast``; :meth:`fit`
        writes the new values, and the ``executor`` when one is given (its ``to_dict()``), to the
        journal's job, so a later plain ``resume`` keeps them (a Client or cluster object is
        journaled by its type's name: a later resume needs ``executor=`` again). Trials
        that were running when the previous tuner died are rerun from scratch under their own number.
        """
        allowed = set(LIMITS)
        bad = sorted(set(limits) - allowed)
        if bad:  # (with a "did you mean" for a misspelled limit: trial 24f)
            raise ConfigError(f"Tuner.resume: cannot override {bad}{did_you_mean(bad[0], sorted(allowed))}; "
                              f"accepted: {sorted(allowed)}")
        check_journal_arg(journal, "Tuner.resume")
        if not os.path.exists(journal):  # (trial 40a F2: "does not exist", with nothing on what to do)
            raise JournalError(f"Tuner.resume: journal {str(journal)!r} does not exist: no job to continue; accepted: "
                               f"the journal of a tuning job (Tuner(..., journal=...) writes it); to start the job, "
                               f"call Tuner(train, space, ..., journal={str(journal)!r}).fit()")
        with Journal(journal, readonly=True) as j:
            job = j.job
        if job is None:
            raise JournalError(f"journal {str(journal)!r} holds no tuning job")
        unresolved: list[str] = []  # (said when a trial is to run: a finished job's result needs neither)
        failed: list[tuple[str, str, str]] = []  # (what, ref, why) of a journaled module:function not imported
        if train is None:
            train = _main_attr(job.get("train"))
            other = None if train is None else _other_train(train, job, str(journal))
            if other is not None:
                unresolved.append(other)
        if train is None:
            if not job.get("train") or job["train"].startswith("__main__:"):
                script = f" (defined in the script {job['train_file']}: Tuner.resume(journal) in that script finds " \
                         "it, in place of its Tuner(...) call; importing a script that tunes when imported, with no " \
                         "`if __name__ == \"__main__\":` guard, would start its job again)" \
                    if job.get("train") and job.get("train_file") else ""
                unresolved.append(f"the journal names train={job.get('train')!r}, which cannot be imported here"
                                  f"{script}; pass Tuner.resume(journal, train=...)")
            else:
                try:
                    train = import_ref(job["train"])
                except ConfigError as exc:
                    failed.append(("train", job["train"], _after_ref(str(exc), "train", job["train"])))
        if setup is None and job.get("setup"):
            setup = _main_attr(job["setup"])
            if setup is None:
                if job["setup"].startswith("__main__:"):  # (was left out, silently: trial.context None)
                    unresolved.append(f"the journal names setup={job['setup']!r}, which cannot be found here; "
                                      "pass Tuner.resume(journal, setup=...)")
                else:
                    try:
                        setup = import_ref(job["setup"], "setup")
                    except ConfigError as exc:
                        failed.append(("setup", job["setup"], _after_ref(str(exc), "setup", job["setup"])))
        if failed:
            unresolved.append(_not_imported(failed, job))
        if unresolved:
            train = _Unresolved("; ".join(unresolved))
        executor_given = executor is not None
        if executor is None:
            ex = job.get("executor", {})
            if not isinstance(ex, Mapping) or ex.get("type") not in ("local", "dask"):
                raise ConfigError(f"the journaled executor {ex!r} cannot be rebuilt; pass executor=")
            if ex.get("type") == "dask" and ex.get("cluster"):
                # a Dask job on a Client or cluster object: nothing in the journal to reconnect to;
                # refused when a trial is to run (a finished job's result needs no worker)
                executor = _Unrebuilt(dict(ex), f"the journaled executor {dict(ex)!r} ran on a Dask {ex['cluster']} "
                                                f"object, which cannot be rebuilt from the journal; pass Tuner.resume("
                                                f"journal, executor=...) (the client, the cluster or its scheduler address)")
            else:  # {'type': 'dask', 'address': None} is executor="dask": a new local cluster
                executor = {k: v for k, v in ex.items() if k != "cluster"}
        kw = {k: job.get(k) for k in allowed}
        if kw["fail_fast"] is None:  # a journal written before the option
            kw["fail_fast"] = True
        kw.update(limits)
        strategy = dict(job["strategy"])
        if strategy.get("type") == "grid" and "integer_grid" not in strategy:
            strategy["integer_grid"] = "all"  # a job journaled before the option put every integer on its grid
        self = cls(train, Space.from_dict(job["space"]), objective=job["objective"], mode=job["mode"],
                   strategy=strategy_from_dict(strategy), seed=job["seed"], journal=journal,
                   executor=executor, setup=setup, **kw)
        # trial 20c: the earlier journals are not checked again: their priors are in this journal's
        # meta, so a resume works once they were moved or archived, or from another working directory
        # (the journaled paths may be relative). Only a job killed before it saved them reads them again.
        self.warm_start = _warm_start_paths(job.get("warm_start") or None)
        self._resume = True
        self._executor_given = executor_given
        return self

    # ---- helpers ------------------------------------------------------------------------------
    def _warn_partial_grid(self) -> None:
        """A WARNING when the limits run only part of a GridSearch's grid (the grid runs in lexicographic
        order of the sorted parameter names, so the first points vary the last names only): ``max_jobs``
        below the grid's size, or a ``max_total_resource`` below the grid's size times ``max_resource``
        (each point runs to ``max_resource``: a grid has no early stopping; trial 30e: 6 of 54 points ran,
        all at the first values of two parameters, without a word). Without a ``max_resource`` the
        number of points ``max_total_resource`` allows depends on the steps ``train`` reports: an INFO
        line says that it may end the grid early."""
        grid = self._grid_size
        if grid is None:
            return
        sizes = self.space.grid_sizes(getattr(self.strategy, "num_points", None),
                                      getattr(self.strategy, "integer_grid", "num_points"))
        names = list(sizes)

        def which(n: int) -> str:
            # the last name varies fastest: the first n points give a name the values that the
            # blocks of the names after it reach (trial 41c: "vary 'depth', 'lr', 'opt' only" named
            # every parameter, where 'depth' took its second value at the 7th point alone)
            every, partly, fixed = [], [], []
            block = 1
            for name in reversed(names):
                size = sizes[name]
                if size > 1:
                    reached = min(size, -(-n // block))
                    last = n - (reached - 1) * block  # (the points at its last value reached)
                    if reached == size and last >= block:
                        every.insert(0, repr(name))
                    elif reached == 1:
                        fixed.insert(0, repr(name))
                    else:  # (trial 41k: 40 of 54 points said "all their values" of one whose 3rd had 4 points)
                        values = f"all {size} values" if reached == size else f"its first {reached} of {size} values"
                        partly.insert(0, f"{name!r} {values}" + (
                            f" (the {_ordinal(reached)} at {last} point{'s' if last > 1 else ''} only)"
                            if last < block else ""))
                block *= size
            said = []
            if every:
                said.append(f"{', '.join(every)} {'takes all its' if len(every) == 1 else 'take all their'} values")
            said += [f"{p.split(' ', 1)[0]} takes {p.split(' ', 1)[1]}" for p in partly]
            if fixed:
                said.append(f"{', '.join(fixed)} {'stays at its' if len(fixed) == 1 else 'stay at their'} first value")
            return "; ".join(said) or "the points run vary no parameter"

        if self.max_jobs is not None and self.max_jobs < grid:
            logger.warning("tripwire.tune: GridSearch: max_jobs=%d runs %d of the grid's %d points, in lexicographic order of %s "
                           "(%s); raise max_jobs, or make the grid smaller (num_points, fewer values)",
                           self.max_jobs, self.max_jobs, grid, names, which(self.max_jobs))
        budget, max_r = self.max_total_resource, self.strategy.max_resource
        runs = grid if self.max_jobs is None else min(self.max_jobs, grid)
        if budget is None:
            return
        if max_r is None:
            logger.info("tripwire.tune: GridSearch: max_total_resource=%d may end the job before the grid's %d points have run (the "
                        "strategy has no max_resource: how many run depends on the steps train reports), in "
                        "lexicographic order of %s", budget, grid, names)
            return
        allowed = -(-budget // max_r)  # (the report that spends the last unit ends the job: ceil)
        if allowed < runs:
            logger.warning("tripwire.tune: GridSearch: max_total_resource=%d runs about %d of the grid's %d points (each runs to "
                           "max_resource=%d: a grid stops no trial early), in lexicographic order of %s (%s); raise "
                           "max_total_resource to %d for %s, or make the grid smaller (num_points, fewer values)",
                           budget, allowed, grid, max_r, names, which(allowed), runs * max_r,
                           "the whole grid" if runs == grid else f"the {runs} points max_jobs runs")

    def _better(self, a: float, b: float | None) -> bool:
        if math.isnan(a):
            return False
        return b is None or (a > b if self.mode == "max" else a < b)

    def _check_warm_job(self, path: str, job: Mapping[str, Any]) -> None:
        """Refuse an earlier journal (``warm_start``) whose job is not this one's problem: another
        objective or mode, or other parameters (missing, renamed or added: trial 30e, whose values were
        taken as priors without a word)."""
        if job.get("objective") != self.objective or job.get("mode") != self.mode:
            raise ConfigError(f"warm_start journal {path!r} tunes objective={job.get('objective')!r} "
                              f"mode={job.get('mode')!r}, not {self.objective!r} {self.mode!r}")
        space = job.get("space")
        if not isinstance(space, Mapping):
            return
        old, new = set(map(str, space)), set(self.space.ranges)
        if old != new:
            parts = []
            if old - new:
                parts.append(f"{sorted(old - new)} {'is' if len(old - new) == 1 else 'are'} not in this job's space")
            if new - old:
                parts.append(f"{sorted(new - old)} {'was' if len(new - old) == 1 else 'were'} not in that job's")
            raise ConfigError(f"warm_start journal {path!r} tuned the parameters {sorted(old)}, and this job tunes "
                              f"{sorted(new)} ({'; '.join(parts)}): its values were measured over another search space "
                              "and would judge this job's trials as rung priors; accepted: an earlier journal of the "
                              "same objective and mode over the same parameter names (a narrower or wider range is "
                              "fine: trials outside this job's ranges are left out)")

    def _check_warm_start(self) -> None:
        """The ``warm_start`` journals, before anything is written: each one once, by path and by job
        (trial 30e: the same journal listed twice, or a copy of it, counted its values twice in the
        rungs), each of this job's objective, mode and parameters (:meth:`_check_warm_job`)."""
        paths: dict[str, str] = {}
        jobs: dict[tuple[Any, str], str] = {}
        for path in self.warm_start:
            real = os.path.realpath(path)
            if real in paths:
                also = "" if paths[real] == path else f" (as {paths[real]!r} and {path!r})"
                raise ConfigError(f"warm_start={self.warm_start!r} lists the journal {real!r} twice{also}: its values "
                                  "would count twice in the rungs; accepted: each earlier journal once")
            paths[real] = path
            with Journal(path, readonly=True) as j:
                job = j.job or {}
                created = j.get_meta("created")
            identity = (created, json.dumps(job, sort_keys=True, default=str))
            if created is not None and identity in jobs:
                raise ConfigError(f"warm_start journals {jobs[identity]!r} and {path!r} hold the same job (created at "
                                  f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(float(created)))}: one is a "
                                  "copy of the other), whose values would count twice in the rungs; accepted: each "
                                  "earlier job once (keep the journal that holds more trials)")
            jobs[identity] = path
            self._check_warm_job(path, job)

    def _load_priors(self, scheduler: Any) -> list[list[float]]:
        """The rung priors that the ``warm_start`` journals give this job: ``[level, value]`` for each of
        their trials and each of this job's rung levels, the value of the trial's first report at a step
        ``>= level`` (as the scheduler records a report that jumps over levels; trial 30e: only a step
        equal to a level counted). Left out: broken runs (rule-stopped or failed trials, trial 25f), and
        the trials whose params lie outside this job's ranges (counted in a WARNING). A journal of
        another ``train`` is named in a WARNING."""
        levels: list[int] = []
        if isinstance(scheduler, HyperbandScheduler):
            plan = scheduler.plan
            levels = sorted({lvl for b in range(plan.n_brackets) for lvl in plan.rungs(b)})
        priors: list[list[float]] = []
        mine = _ref_of(self.train) if not isinstance(self.train, _Unresolved) else None
        for path in self.warm_start:
            if not os.path.exists(path):
                raise ConfigError(f"warm_start journal {path!r} does not exist (this job's journal holds no priors "
                                  "read from it yet: put it back at that path)")
            with Journal(path, readonly=True) as j:
                job = j.job or {}
                self._check_warm_job(path, job)
                if self.seed is not None and job.get("seed") == self.seed and job.get("space") == self.space.to_dict():
                    logger.warning(
                        "tripwire.tune: warm_start journal %r ran seed=%r over the same space: this job proposes the "
                        "same configurations again (its trial 0 is that job's trial 0, ...); give it another seed",
                        str(path), self.seed)
                theirs = job.get("train")
                if mine and theirs and theirs != mine and not _same_train(self.train, job):
                    logger.warning(
                        "tripwire.tune: warm_start journal %r ran train=%s, and this job runs train=%s: its values are "
                        "this job's rung priors, right only where both measure %r the same way (same data, same "
                        "resource unit); pass warm_start only for an earlier run of the same training",
                        str(path), theirs, mine, self.objective)
                rows = j.trials()
                broken = {r["number"] for r in rows if _broken(r["status"], r["rule"])}
                outside: dict[int, str] = {}
                for r in rows:
                    why = _outside_space(r["params"], self.space)
                    if why is not None and r["number"] not in broken:
                        outside[r["number"]] = why
                if outside:
                    first = min(outside)
                    kept = len(rows) - len(broken) - len(outside)
                    logger.warning(
                        "tripwire.tune: warm_start journal %r: %d of its %d trials have params outside this job's space "
                        "(trial %d: %s): their values are left out of the priors (%d trial(s) kept)",
                        str(path), len(outside), len(rows), first, outside[first], kept)
                reports: dict[int, list[tuple[int, float]]] = {}
                for t, step, value, *_ in j.reports():
                    if t not in broken and t not in outside:
                        reports.setdefault(t, []).append((int(step), float(value)))
                for t in sorted(reports):
                    steps = sorted(reports[t])
                    for level in levels:
                        first_at = next((v for step, v in steps if step >= level), None)
                        if first_at is not None and not math.isnan(first_at):
                            priors.append([level, first_at])
        return priors

    def _restore(self, scheduler: Any, journal: Journal, priors: list[list[float]],
                 ruled: set[int]) -> None:
        """Rebuild the scheduler from the journal's rungs; ``ruled``: the broken runs (trials a
        tripwire rule stopped, failed trials), whose values never count (a journal written before
        they were dropped may hold them: failed trials' until trial 25f)."""
        if isinstance(scheduler, HyperbandScheduler):
            by_level: dict[str, list[float]] = {}
            for lvl, v in priors:
                by_level.setdefault(str(int(lvl)), []).append(v)
            records = [r for r in journal.rung_records() if r[2] not in ruled]
            scheduler.load_state_dict({"type": "hyperband", "plan": scheduler.plan.to_dict(), "mode": self.mode,
                                       "seed": self.seed, "records": records,
                                       "priors": by_level, "progress": {}})
        else:
            scheduler.load_state_dict(scheduler.state_dict())

    # ---- the job ------------------------------------------------------------------------------
    def fit(self, progress: Progress | bool | None = None) -> TuningResult:
        """Run (or continue, after :meth:`resume`) the job; returns its :class:`TuningResult`.

        ``progress``: ``True`` draws the live view ``tripwire tune`` draws (:class:`~._view.LiveView`:
        in a terminal, or as one output of a Jupyter notebook's cell, updated in place 4 times a
        second; printed once at the end where the output is a file or a pipe); a callable is called
        with a snapshot dict (``running``, ``completed``, ``stopped``,
        ``failed``, ``best``, ``resource_used``: the trials' units, as :attr:`TuningResult.resource_used`,
        ``resource_lost``: units of attempts interrupted and rerun after a resume, which
        ``max_total_resource`` counts too, ``elapsed``, ``halt``, ``max_jobs``, ``max_total_resource``,
        ``max_wall_time`` (the limits, ``None`` where unset: a view shows progress towards them), ``phase``:
        ``"running"``, then ``"shutting down"`` once every trial has ended, before the workers stop,
        and ``"ended"`` in the last one) after events, at most 5 times a second; ``None`` or
        ``False``: no progress view. Anything else raises a :class:`ConfigError`.
        """
        view = progress is True
        if progress is False:
            progress = None  # no progress view, as None
        if not view and progress is not None and not callable(progress):
            raise ConfigError(f"progress={progress!r} is not one of: None or False (no progress view), True (the "
                              "live view `tripwire tune` draws, in a terminal or a notebook), a callable taking a "
                              "snapshot dict")
        if loading_main():
            raise MainScriptStop()  # a worker runs this script to find train: it stops here (see _load_main)
        if in_worker_startup():
            # spawn re-ran an unguarded script in a worker: leave at once, without a traceback; the
            # tuner that started this worker reports it once
            raise SystemExit(NESTED_START_EXIT)
        if getattr(mp.current_process(), "_inheriting", False):
            # another starter's process (a Dask worker's, trial 22b) re-runs the main script as
            # __mp_main__ while it starts: its fit() would take the job's journal (JournalLockedError)
            raise ConfigError(f"Tuner.fit() was called while process {os.getpid()} ({mp.current_process().name}), "
                              "started by multiprocessing, re-ran the main script as '__mp_main__': the script calls "
                              f"fit() outside `if __name__ == \"__main__\":`; {GUARD_HINT}")
        # (where this call is in the main script: a local executor's workers must stop at this very call)
        note_fit_call()
        if self.executor.needs_main_guard():
            unguarded = _unguarded_main_call()
            if unguarded is not None:  # (before the journal is touched: a rerun after the fix starts afresh)
                raise ConfigError(
                    f"executor='dask' starts a Dask LocalCluster whose worker processes re-run "
                    f"the main script ({unguarded[0]}) as '__mp_main__', and its line {unguarded[1]} "
                    f"({linecache.getline(unguarded[0], unguarded[1]).strip()!r}) runs "
                    f"Tuner.fit() outside `if __name__ == \"__main__\":`, so each worker would start the job again; "
                    f"{GUARD_HINT} (the local executor runs an unguarded script as it is)")
        state = {"fired": False}

        def on_sigterm(signum: int, frame: Any) -> None:
            if not state["fired"]:  # a second SIGTERM does not interrupt the clean-up
                state["fired"] = True
                raise _Terminated()

        previous: Any = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.getsignal(signal.SIGTERM)
            if previous is None or previous == signal.SIG_IGN:
                previous = None  # ignored, or installed outside Python: left alone
            else:
                signal.signal(signal.SIGTERM, on_sigterm)
        try:
            if view:  # (started here: a worker running the script to find train stopped above)
                with LiveView(self._view_title()) as live:
                    return self._fit(live)
            return self._fit(progress)  # type: ignore[arg-type]
        except _Terminated:
            pass
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
        logger.warning("tripwire.tune: SIGTERM: the workers were stopped and the running trials left pending; "
                       "continue the job with %s", self.resume_hint)
        signal.raise_signal(signal.SIGTERM)  # the previous handler's turn (by default: terminate)
        raise TuneError(f"the tuning job was interrupted by SIGTERM; continue it with {self.resume_hint}")

    def _view_title(self) -> str:
        """The title of ``fit(progress=True)``'s live view: the call, and the journal where one is
        named."""
        return "Tuner.fit()" + ("" if self.journal_path is None else f" {os.fspath(self.journal_path)}")

    def _fit(self, progress: Progress | None) -> TuningResult:
        tmpdir = None
        path = self.journal_path
        if path is None:
            tmpdir = tempfile.mkdtemp(prefix="tripwire-tune-")
            path = os.path.join(tmpdir, "journal.db")
        journal = Journal(path, create=True)
        try:
            # the session's start, from the lock up to its workers' start, is one transaction (committed by
            # _run): a resume refused before then (_refusal), or killed, leaves the journal as it was
            # (trial 31g: a refused resume had requeued the interrupted trials)
            journal.begin()
            journal.acquire_lock()
            if self._resume:
                job = journal.job
                if job is None:
                    raise JournalError(f"journal {str(path)!r} holds no tuning job to resume")
                mine = self._job()
                # the limits, and the executor when resume() was given one (trial 28b: it was used but
                # not journaled, so a plain resume after the next crash went back to the old one)
                kept = LIMITS + (("executor",) if self._executor_given else ())
                updated = {**job, **{k: mine[k] for k in kept}}
                if updated != job:  # limits changed by resume(): a later plain resume keeps them (written
                    self._new_limits = updated  # by _run once it can go on: not by a resume refused there)
                if self.warm_start and journal.get_meta("priors") is None:
                    # killed between writing the job and its priors: read the earlier journals now
                    journal.set_meta("priors", self._load_priors(self.strategy.scheduler(self.mode, self.seed)))
                held = len(journal.trials())
                if self.max_jobs is not None and held > self.max_jobs:
                    logger.warning("tripwire.tune: resume with max_jobs=%d, below the %d trials the journal already "
                                   "holds: no new trial starts (trials that were running are rerun); pass a "
                                   "max_jobs above %d to run more", self.max_jobs, held, held)
            else:
                journal.init_job(self._job())
                self._warn_partial_grid()
                journal.set_meta("priors", self._load_priors(self.strategy.scheduler(self.mode, self.seed)))
            return self._run(journal, progress)
        except _JournalGone as gone:
            tmpdir = None  # (a temporary journal's folder holds the rescued copy: kept)
            raise JournalError(self._journal_gone_message(journal, *gone.args)) from None
        finally:
            journal.close()
            if tmpdir is not None:
                shutil.rmtree(tmpdir, ignore_errors=True)

    def _journal_gone_message(self, journal: Journal, what: str, ended: bool) -> str:
        """The error for a journal whose file left its path while the job ran (``what``:
        :meth:`Journal.file_problem`; ``ended``: found when the job had ended, else while it ran,
        which stopped it): where the job's records went (:meth:`Journal.rescue`, from the
        connection that still holds the file), and the likely cause."""
        try:
            rescued = journal.rescue()
            counts = TuningResult.from_journal(rescued).counts()
            held = ", ".join(f"{k} {v}" for k, v in counts.items() if v) or "no trial"
            resume = ("" if ended else "; to continue the job, move it to the journal's path (without the old "
                      "file's -wal and -shm) and resume it")
            saved = (f"the job's records ({held}) are saved in {str(rescued)!r} (`tripwire tune-report {rescued}` "
                     f"reads it{resume})")
        except Exception as exc:  # (said, not raised: the error below is the one to see)
            saved = f"saving the job's records beside it failed too ({type(exc).__name__}: {exc}): they are lost"
        how = ("the job ended, but the tuner had written it to a file that no path leads to" if ended else
               "the tuner was writing the job to a file that no path leads to, so the job was stopped "
               "(its running trials are pending)")
        return (f"journal {str(journal.path)!r} {what}: {how}; {saved}. Likely cause: code at the script's module "
                "level that removes or rewrites the journal (a \"start fresh\" os.remove) ran again in a worker: the "
                "local executor's workers run the main script's module-level code, up to its Tuner.fit(), while the "
                "job runs; put that code under `if __name__ == \"__main__\":` (else: another program removed or "
                "replaced the file)")

    def _end_told_to_stop(self, journal: Journal, scheduler: Any, wall_seconds: float | None,
                          log: bool = True) -> list[int]:
        """End the trials left ``running`` whose stop decision was journaled already (a report with
        ``stop`` set: the trial was finishing its epoch when its tuner was killed or stopped), as the
        live job would have ended them, instead of rerunning them (trial 27b: such a trial was rerun
        from scratch to the same decision, and its units counted as lost). Its last reported value is
        its objective (``train`` had not returned: no ``metrics``), and its units count as used: it
        is ``completed`` at ``max_resource`` (reason ``reached max_resource=M``), else ``stopped``
        with the decision's reason; a last value of NaN fails it (``failed (objective is nan)``, as
        ``train`` returning None after a NaN report does), and its values leave the rungs. The reason
        says that ``train`` had not returned. Returns the trials' numbers; ``log``: say which at INFO
        (:meth:`_say_told_to_stop`; else the caller does, once what it wrote is committed)."""
        max_r = self.strategy.max_resource
        ended = []
        for t in journal.told_to_stop():
            n, step, value = t["number"], t["step"], t["value"]
            note = " (train had not returned when its tuner stopped: its last reported value is the objective)"
            error: str | None = None
            if math.isnan(value):
                status, reason = "failed", "failed (objective is nan)"
                error = (f"{NAN_OBJECTIVE}: its last report (step={step}) was nan, and train had not returned when "
                         "its tuner stopped")
            elif max_r is not None and step >= max_r:
                status, reason = "completed", f"reached max_resource={max_r}{note}"
            else:
                status, reason = "stopped", f"{t['reason']}{note}"
            broken = status == "failed"
            if broken:
                scheduler.forget(n)
            scheduler.end(n)
            journal.end_trial(n, status, None if broken else value, None, step, t["rung"], reason, error, t["time"],
                              wall_seconds, drop_rungs=broken)
            ended.append(n)
        if log:
            self._say_told_to_stop(ended)
        return ended

    @staticmethod
    def _say_told_to_stop(ended: list[int]) -> None:
        """The INFO line for the trials :meth:`_end_told_to_stop` ended (nothing for none)."""
        if ended:
            logger.info("tripwire.tune: trial(s) %s had been told to stop before the tuner stopped: ended with "
                        "their last reported value, not rerun", ended)

    def _refusal(self) -> str | None:
        """Why this job's trials cannot run here (checked before the session writes anything, and
        before any worker starts): a resumed job's ``train`` or ``setup`` that cannot be found here,
        an executor that cannot be rebuilt from the journal, a ``train``/``setup`` the executor cannot
        send to its workers; each problem, joined by ``"; "``, or None."""
        problems = []
        if isinstance(self.train, _Unresolved):
            problems.append(self.train.message)
        try:
            self.executor._check_start(self.train, self.setup)
        except ConfigError as exc:
            problems.append(str(exc))
        return "; ".join(problems) or None

    def _run(self, journal: Journal, progress: Progress | None) -> TuningResult:
        """Run the session. ``journal``: locked, in the transaction :meth:`_fit` opened, which is
        committed once the session may run (:meth:`_refusal`) and before any worker starts."""
        scheduler: HyperbandScheduler | FIFOScheduler = self.strategy.scheduler(self.mode, self.seed)
        told = self._end_told_to_stop(journal, scheduler, None, log=False)
        pending = journal.requeue_running()
        rows = journal.trials()
        pending = sorted(set(pending) | {r["number"] for r in rows if r["status"] == "pending"})
        self._restore(scheduler, journal, journal.get_meta("priors", []),
                      {r["number"] for r in rows if _broken(r["status"], r["rule"])})
        journal.save_scheduler_state(scheduler.state_dict())
        sampler = self.strategy.sampler(self.space, self.seed, self.mode)
        params_of = {r["number"]: r["params"] for r in rows}
        for t, step, value, *_ in sorted(journal.reports(), key=lambda r: r[3]):  # a model-based sampler learns
            if t in params_of:
                sampler.observe(t, params_of[t], step, value)
        for r in rows:  # (and from the objective of a trial that returned without reporting: trial 30e)
            if r["status"] in ENDED:
                sampler.trial_ended(r["number"], r["params"], r["status"], r["value"], int(r["resource"] or 0))
        # the reports of each rerun trial's interrupted attempt: a rerun that reports the same value at
        # a step its attempt passed passes it again (trial 27b: the resume changed the rungs, and a
        # rerun of the same value was stopped where its attempt had gone on)
        attempt_of = {r["number"]: int(r["attempt"] or 1) for r in rows}
        earlier: dict[int, tuple[int, dict[int, tuple[float, bool]]]] = {}
        for t, a, step, value, _tm, stop, _why in journal.earlier_reports():
            if t in pending and a < attempt_of.get(t, 1) and a >= earlier.get(t, (0, {}))[0]:
                if a > earlier.get(t, (0, {}))[0]:
                    earlier[t] = (a, {})
                earlier[t][1][step] = (value, stop)
        next_number = max((r["number"] for r in rows), default=-1) + 1
        done_resource = sum(r["resource"] for r in rows if r["status"] in ("completed", "stopped", "failed"))
        best: float | None = None
        best_number: int | None = None
        since_improvement = 0
        # the best as result.best ranks them: a trial a criterion cut short below min_resource only where
        # no trial reached it (trial 37e: target_value ended a job on a trial's 0.1 at step 1, below
        # min_resource 3, while the summary's best, and the live view's, said otherwise)
        floor = getattr(self.strategy, "min_resource", None) or 0
        short: float | None = None  # (the best value of those cut short)
        reached = False

        def tally(number: int, status: str, value: float | None, rule: str | None, resource: int) -> None:
            """A trial that ended: the best objective so far, and the trials since it improved. Every
            ended trial that does not improve the best counts: a failed one too (trial 26b: it ended
            without improving the best, as SageMaker AMT counts it), and one a tripwire rule stopped,
            which never improves it. A trial cut short below ``min_resource`` is the best only while no
            trial reached it, as :attr:`TuningResult.best` ranks them."""
            nonlocal best, best_number, since_improvement, short, reached
            if status not in ENDED:
                return
            counts = status != "failed" and rule is None and value is not None
            if counts and resource < floor:
                if short is None or self._better(value, short):  # type: ignore[arg-type]
                    short = value
                    if not reached:
                        best, best_number, since_improvement = value, number, 0
                        return
                since_improvement += 1
            elif counts and (not reached or self._better(value, best)):
                reached = True
                best, best_number, since_improvement = value, number, 0
            else:
                since_improvement += 1

        # in the order the trials ended, as this session would have counted them (trial 26b: in
        # number order a resume counted trials that ended before the best as after it, and halted)
        for r in _in_end_order(rows, self.mode):
            tally(r["number"], r["status"], r["value"], r["rule"], int(r["resource"] or 0))
        # fail fast: while no trial of the job has ended without failing, this session's failures by error
        any_success = any(r["status"] in ("completed", "stopped") for r in rows)
        same_errors: dict[str, int] = {}   # error line with the trial number masked -> failures
        first_error: dict[str, str] = {}   # ... -> the first such error line, as it was
        fail_fast_at = max(2, self.max_parallel_jobs or 1)
        wall_before = float(journal.get_meta("wall_seconds", 0.0))
        t0 = time.monotonic()
        running: dict[int, _Run] = {}
        halt: str | None = None           # a criterion that stops the job and its running trials
        exhausted = False
        last_progress, last_beat = -math.inf, time.monotonic()
        last_check = last_beat
        max_r = self.strategy.max_resource

        lost = int(journal.get_meta("resource_lost", 0))  # attempts interrupted and rerun (their units)

        def trained() -> int:  # the trials' units so far (max_total_resource adds the lost ones)
            return done_resource + sum(r.last_step or 0 for r in running.values())

        def wall() -> float:
            return wall_before + time.monotonic() - t0

        def check_criteria() -> None:
            nonlocal halt
            if halt is not None:
                return
            repeated = [(n, e) for e, n in same_errors.items() if n >= fail_fast_at]
            if self.fail_fast and not any_success and repeated:
                n, err = repeated[0]
                hint = f" ({NO_MAX_RESOURCE_HINT})" if _none_max_resource(first_error[err], max_r) else ""
                halt = (f"{FAIL_FAST}: {n} trials failed with the same error before any trial succeeded: "
                        f"{first_error[err]}{hint}")
            elif self.target_value is not None and best is not None and \
                    (best >= self.target_value if self.mode == "max" else best <= self.target_value):
                # the target is checked as trials end: this is the best then; trials still running go on to
                # their next report and may end better (trial 30e: "(best 0.00985)" beside the summary's final
                # "best: ... 0.00139", without saying which was which)
                halt = (f"target_value={format_value(self.target_value)} reached when trial {best_number} ended with "
                        f"{format_value(best)} (the best then; trials still running may end better)")
            elif self.max_no_improvement is not None and since_improvement >= self.max_no_improvement:
                halt = f"best not improved for max_no_improvement={self.max_no_improvement} trials"
            elif self.max_wall_time is not None and wall() >= self.max_wall_time:
                halt = f"max_wall_time={self.max_wall_time:g} s reached"
            elif self.max_total_resource is not None and trained() + lost >= self.max_total_resource:
                halt = f"max_total_resource={self.max_total_resource} reached"

        def snapshot(phase: str = "running") -> dict[str, Any]:
            counts = {"completed": 0, "stopped": 0, "failed": 0}
            for r in journal.trials():
                if r["status"] in counts:
                    counts[r["status"]] += 1
            # a trial submitted that waits for a worker (Dask: for a free thread) is pending until its
            # task begins, as the journal says (trial 25h: the snapshot counted it running)
            waiting = sum(1 for r in running.values() if not r.began)
            return {"running": len(running) - waiting, **counts, "pending": len(pending) + waiting, "best": best,
                    # (resource_used as the result's: the trials' units; the interrupted attempts' apart,
                    # trial 18c: the view said 63 and the summary under it 56)
                    "resource_used": trained(), "resource_lost": lost, "elapsed": wall(), "halt": halt,
                    "max_jobs": self.max_jobs, "max_total_resource": self.max_total_resource,
                    "max_wall_time": self.max_wall_time, "phase": phase}

        def finish(number: int, status: str, value: float | None, metrics: dict[str, Any] | None,
                   reason: str | None, error: str | None, rule: str | None = None) -> None:
            nonlocal done_resource, any_success
            run = running.pop(number)
            resource = run.last_step if run.last_step is not None else (max_r or 0 if status != "failed" else 0)
            done_resource += resource
            rung = scheduler.rung_reached(number)
            broken = _broken(status, rule)
            carried: list[tuple[int, int]] = []
            if broken:
                # a broken run is no candidate, and its values judge no later trial: they leave the
                # rungs (decisions already taken with them stay), in the journal's rungs too. A failed
                # trial is one (trial 25f: two crashed trials' values stopped the best healthy one)
                scheduler.forget(number)
            else:
                # a rerun that ended below the levels its interrupted attempt reached: that attempt's
                # values there leave the rungs (trial 27b; the trial's own reports end lower)
                carried = scheduler.trim(number)
            scheduler.end(number)
            journal.end_trial(number, status, value, metrics, resource, rung, reason, error, time.time(), wall(),
                              rule, drop_rungs=broken, drop_rung_rows=carried)
            sampler.trial_ended(number, run.spec.params, status, value, resource)
            if status == "failed":
                line = error_summary(error) or str(reason)
                if _certain_to_repeat(line, max_r):
                    key = _error_key(line)
                    same_errors[key] = same_errors.get(key, 0) + 1
                    first_error.setdefault(key, line)
            else:
                any_success = True
            tally(number, status, value, rule, int(resource or 0))

        def rerun_pending() -> bool:
            """Whether a requeued trial (``pending``: running when an earlier tuner stopped) may start.
            It was launched before any halt, and a live job lets its running trials go on to their
            next report (stopped there, reason ``tuning job complete: ...``), or to their end: so it
            is rerun after a completion criterion too, and stopped at its first report (trial 26b:
            such trials stayed pending for good, while the summary said that a resume runs them).
            Not after fail_fast: the same error would fail it; a resume, after the fix, reruns it."""
            return bool(pending) and (halt is None or not halt.startswith(FAIL_FAST))

        def sample_new() -> bool:
            """Whether a new trial may start: no halt, and the strategy and ``max_jobs`` allow one."""
            return halt is None and not exhausted and (self.max_jobs is None or next_number < self.max_jobs)

        check_criteria()
        idle = not (rerun_pending() or sample_new())
        refused = None if idle else self._refusal()
        if refused is not None:  # (trial 31g: before anything is written: the requeue above is dropped)
            journal.rollback()
            raise ConfigError(refused)
        if self._new_limits is not None:
            journal.set_meta("job", self._new_limits)
            self._new_limits = None
        journal.commit()  # the session's start (the lock, the requeue, the limits), at once
        self._say_told_to_stop(told)
        if not idle and halt is not None:
            logger.info("tripwire.tune: the job has ended (%s); the %d trial(s) that were running when it was "
                        "interrupted are rerun and stopped at their first report, as the job stops its running "
                        "trials", halt, len(pending))
        if not idle:  # a finished job (resumed) returns its result without starting a worker
            self.executor.start(self.train, self.setup, self.max_parallel_jobs or 1)
            journal.heartbeat(wall())  # (the workers' start-up counts: written before the first trial)
            last_beat = time.monotonic()
        try:
            while not idle:
                check_criteria()
                # -- launch
                while self.executor.free_slots() > 0:
                    attempt = 1
                    if rerun_pending():
                        number = pending.pop(0)
                        row = next(r for r in rows if r["number"] == number)
                        params, attempt = row["params"], int(row["attempt"] or 1)
                    else:
                        if not sample_new():
                            break
                        number = next_number
                        params = sampler(number)
                        if params is None:
                            exhausted = True
                            break
                        next_number += 1
                    bracket = scheduler.bracket(number)
                    spec = TrialSpec(number, params, bracket, self.strategy.min_resource, max_r, attempt)
                    now = time.time()
                    # (an executor that says when a trial begins: pending until then, trial 25b)
                    journal.start_trial(number, params, bracket, None if self.executor.reports_start else now)
                    running[number] = _Run(spec, now, time.monotonic(), began=not self.executor.reports_start)
                    self.executor.submit(spec)
                if not running and not (rerun_pending() or sample_new()):
                    break
                # -- wait for events
                timeout = 0.1
                began = [r.mono for r in running.values() if r.began]
                if self.trial_timeout is not None and began:
                    timeout = max(0.0, min(timeout, min(began) + self.trial_timeout - time.monotonic()))
                events = self.executor.poll(timeout)
                for ev in events:
                    if isinstance(ev, Started) and ev.number in running:
                        # its time limit counts from now: it waited for a worker until now
                        running[ev.number].began, running[ev.number].mono = True, time.monotonic()
                        journal.begin_trial(ev.number, time.time())
                if self.trial_timeout is not None:
                    now_m = time.monotonic()
                    for n, r in list(running.items()):
                        if r.began and now_m - r.mono > self.trial_timeout:
                            ev = self.executor.cancel(n, f"trial {n} ran past trial_timeout={self.trial_timeout:g} s")
                            if ev is not None:
                                events.append(ev)
                for ev in events:
                    if isinstance(ev, Started):
                        continue
                    run = running.get(ev.number)
                    if run is None:  # cancelled or ended: a waiting reporter still needs its answer
                        if isinstance(ev, Report):
                            self.executor.reply(ev.number, True, "trial is no longer running")
                        continue
                    if isinstance(ev, Report):
                        # this report's resource counts at once: the report that spends the last unit
                        # of max_total_resource stops its own trial
                        run.last_step, run.last_value = ev.step, ev.value
                        check_criteria()
                        # a report at max_resource goes to the scheduler even when it ends the job: the
                        # trial ran its full budget (reason "reached max_resource", not the criterion's),
                        # and records its value at the levels it jumped over (trial 23o)
                        at_max = max_r is not None and ev.step >= max_r and not run.stop
                        before = earlier.get(ev.number)
                        same = None if before is None else before[1].get(ev.step)
                        passed = same is not None and not same[1] and (
                            same[0] == ev.value or (math.isnan(same[0]) and math.isnan(ev.value)))
                        if before is not None and not passed:
                            del earlier[ev.number]  # the rerun differs from its attempt: decided afresh
                        if halt is not None and not at_max and run.stop:
                            dec = Decision(True, f"tuning job complete: {halt}")
                        elif run.stop:
                            dec = Decision(True, run.reason or "stopped")
                        elif passed:
                            dec = scheduler.on_report(ev.number, ev.step, ev.value, passed=True)
                            if not dec.stop and any(i >= 0 for _b, i, _v in dec.records):  # (at a rung)
                                dec = dataclasses.replace(
                                    dec, reason=f"{dec.reason} (as attempt {before[0]} did, with the same value)")
                        else:
                            dec = scheduler.on_report(ev.number, ev.step, ev.value)
                        if halt is not None and not at_max and not run.stop:
                            # trial 32h F3: the report that ends the job (or one after it) records its value
                            # at the levels it reached, as Decision rule 1 says, journaled with it, so a resume
                            # with raised limits judges its trials with it; the criterion stops the trial
                            dec = Decision(True, f"tuning job complete: {halt}", dec.rung, dec.records)
                        if dec.stop and not run.stop:
                            run.stop, run.reason = True, dec.reason
                        journal.add_report(ev.number, ev.step, ev.value, dec.stop, dec.reason, dec.records,
                                           scheduler.rung_reached(ev.number))
                        sampler.observe(ev.number, run.spec.params, ev.step, ev.value)
                        self.executor.reply(ev.number, dec.stop, dec.reason)
                    elif isinstance(ev, Finished):
                        self._finished(ev, run, finish, max_r)
                    elif isinstance(ev, Failed):
                        finish(ev.number, "failed", None, None, f"failed ({ev.kind})", ev.error)
                now_m = time.monotonic()
                if now_m - last_beat >= HEARTBEAT_S:  # (the job's time too: a killed session counts it)
                    journal.heartbeat(wall())
                    last_beat = now_m
                if now_m - last_check >= JOURNAL_CHECK_S:  # (its file still at its path: trial 29c)
                    last_check = now_m
                    gone = journal.file_problem()
                    if gone is not None:
                        raise _JournalGone(gone, False)
                if progress is not None and now_m - last_progress >= PROGRESS_INTERVAL_S:  # at most 5 a second
                    last_progress = now_m
                    progress(snapshot())
            if progress is not None and not idle:
                # every trial ended: said before the workers stop, which takes seconds (trial 27b: the view
                # showed the last trial running, its clock stopped, while torch's workers exited)
                progress(snapshot("shutting down"))
        finally:
            if not idle:
                self.executor.shutdown()
            try:
                if not idle:
                    # this session's time, also where no trial ended in it (trial 25f: a session whose
                    # max_wall_time went to the workers' start-up and setup() left wall_seconds 0.0, so a
                    # resume did not count it); a finished job resumed (idle) leaves the journal as it was
                    journal.set_meta("wall_seconds", wall())
                if running:  # interrupted (Ctrl-C, SIGTERM, an executor error): rerun by resume
                    # (but a trial told to stop already ends so: trial 27b)
                    self._end_told_to_stop(journal, scheduler, wall())
                    journal.requeue_running()
                journal.save_scheduler_state(scheduler.state_dict())
            except Exception:
                pass
        if journal.get_meta("halt") != halt:  # this session's ending (a finished job resumed: unchanged)
            journal.set_meta("halt", halt)
        gone = journal.file_problem()  # (a job shorter than JOURNAL_CHECK_S, or removed at its end)
        if gone is not None:
            raise _JournalGone(gone, True)
        if progress is not None:
            progress(snapshot("ended"))
        trials = [TrialRecord(**r) for r in journal.trials()]
        result = TuningResult(trials, self.objective, self.mode, max_r, journal.job,
                              None if self.journal_path is None else str(self.journal_path), halt,
                              int(journal.get_meta("resource_lost", 0) or 0))
        if result.best is None and not any(t.value is not None for t in trials):
            failed = [t for t in trials if t.status == "failed"]
            if failed:
                logger.warning("tripwire.tune: no trial returned an objective: %d of %d trials failed%s; the first "
                               "error (trial %d): %s", len(failed), len(trials),
                               f" and the job stopped early ({halt})" if halt else "", failed[0].number,
                               error_summary(failed[0].error) or failed[0].reason, extra={SUMMARY_RECORD: True})
            elif ended_before_any_trial(result):
                # trial 25f: the job's time went to the workers' start-up (imports, setup()): no WARNING
                # said that it ended with 0 trials
                hint = (f"; max_wall_time counts the workers' start-up and setup() too ({wall():.1f} s in all "
                        "so far): raise it" if halt is not None and halt.startswith("max_wall_time") else "")
                logger.warning("tripwire.tune: no trial returned an objective: the job ended (%s) before any trial "
                               "started%s", halt, hint, extra={SUMMARY_RECORD: True})
        elif halt is not None and halt.startswith(FAIL_FAST):
            logger.warning("tripwire.tune: the job stopped early: %s", halt, extra={SUMMARY_RECORD: True})
        return result

    def _finished(self, ev: Finished, run: _Run, finish: Callable[..., None], max_r: int | None) -> None:
        out, metrics, value, error = ev.result, None, None, None
        if isinstance(out, Mapping):
            metrics = {str(k): _metric(v) for k, v in out.items()}
            key = self.objective if self.objective in out else "objective"
            if key not in out:
                keys = repr(self.objective) + ("" if self.objective == "objective" else " or 'objective'")
                error = f"train returned a dict without the objective (key {keys}); keys: {sorted(map(str, out))}"
            else:
                out = out[key]
        rule = ev.rule_stop[0] if ev.rule_stop else None
        nan_error = None
        if error is None:
            if out is None:
                if run.last_value is None:
                    if rule is None:
                        error = "train returned None and reported no value"
                else:
                    value = run.last_value
                    if math.isnan(value):
                        nan_error = (f"{NAN_OBJECTIVE}: train returned None and its last report "
                                     f"(step={run.last_step}) was nan")
            else:
                try:
                    if isinstance(out, (bool, str, bytes)):
                        raise TypeError
                    value = float(out)
                except (TypeError, ValueError):
                    error = f"train returned {out!r} ({type(out).__name__}); expected a number or a dict of numbers"
                else:
                    if math.isnan(value):
                        where = "" if metrics is None else f" under the key {key!r}"
                        nan_error = f"{NAN_OBJECTIVE}: train returned the objective nan{where}"
        if error is not None:
            finish(ev.number, "failed", None, metrics, "failed (bad return value)", error)
            return
        if nan_error is not None and rule is None:  # a diverged configuration (as Optuna: failed)
            finish(ev.number, "failed", None, metrics, "failed (objective is nan)", nan_error)
            return
        if ev.rule_stop:  # a tripwire rule stopped the training: a broken run, never the best
            finish(ev.number, "stopped", value, metrics, f"rule {ev.rule_stop[0]}: {ev.rule_stop[1]}", None, rule)
            return
        # told to stop before max_resource; without a max_resource, only a completion criterion
        # stops a trial, always early
        early = run.stop and (max_r is None or (run.last_step or 0) < max_r)
        status = "stopped" if early else "completed"
        if early:
            # (trial 36j: XGBoost's EarlyStopping ended boosting at a round the tuner, told of it after,
            # stopped the trial at: both said)
            reason = run.reason + (f"; the training had ended on its own: {ev.early_end}" if ev.early_end else "")
        elif max_r is not None and (run.last_step or 0) >= max_r:
            # completed at max_resource: its reason says so, whatever decision the last report got
            # (a completion criterion reached by that report, a rung it jumped over; trial 23o)
            reason = f"reached max_resource={max_r}"
        else:
            # why the training ended on its own before its budget, where its callback said (trial 31g:
            # a fit EarlyStopping ended read "completed" at resource 6 of 9)
            reason = run.reason or (f"completed: {ev.early_end}" if ev.early_end else "completed")
        finish(ev.number, status, value, metrics, reason, None)

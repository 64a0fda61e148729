"""Executors run trial functions and carry reports to the scheduler in the tuning process.

:class:`LocalExecutor` (the default) keeps a pool of worker processes warm across trials: each
worker imports the training function and runs the optional ``setup()`` once, then runs trial after
trial. A report travels over the worker's pipe to the tuning process, which answers with the
stop decision, so every decision sees every trial's results. A trial that raises is reported as
failed with its traceback; a cancelled trial (over the tuner's ``trial_timeout``) has its worker
killed; a worker that dies is replaced.

A worker started with ``spawn`` or ``forkserver`` runs the tuning process's main script itself up
to the first ``Tuner.fit()`` it reaches (:func:`_load_main`), then checks that what it found is
what the tuning process runs (:func:`_check_main`): the very definitions of the script's functions
and classes that ``train`` and ``setup`` name, and, for a script without an ``if __name__ ==
"__main__":`` guard, the very ``fit()`` call that started the job. A mismatch fails the job with a
:class:`TuneError` that says what differs and the fix (trial 29c: a second job of an unguarded
script ran the first job's ``train``, without a word).

A worker started with ``fork`` runs torch and the GNU OpenMP runtimes the tuning process had loaded
on one thread (:func:`_one_openmp_thread`): their thread pool does not survive ``fork``, and once the
tuning process had used it (a notebook that trained with torch), every forked trial waited for it for
ever (trial 30f).

Workers do not outlive the tuning process: on Linux each one asks the kernel to kill it when its
parent dies (``prctl(PR_SET_PDEATHSIG, SIGKILL)``), so even a SIGKILLed tuner leaves no worker
behind; :meth:`LocalExecutor.shutdown` kills the workers still inside a trial at once.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import dataclasses
import faulthandler
import glob
import logging
import multiprocessing as mp
import os
import pickle
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.reduction import ForkingPickler
from typing import Any, Callable, Iterator

from tripwire._validate import check_bool

from ._errors import STACK_MARKER, ConfigError, TuneError, import_hint
from ._trial import Trial, number_like_result, picklable_result, take_early_end, take_rule_stop

__all__ = ["Executor", "Failed", "Finished", "LocalExecutor", "Report", "Started", "TrialSpec"]

logger = logging.getLogger("tripwire.tune")


@dataclass(frozen=True)
class TrialSpec:
    """What a worker needs to run one trial."""

    number: int
    params: dict[str, Any]
    bracket: int
    min_resource: int | None
    max_resource: int | None
    attempt: int = 1   # 2 and up: a rerun of an interrupted trial (resume)


@dataclass(frozen=True)
class Started:
    """A submitted trial began to run (from executors whose :attr:`Executor.reports_start` is True:
    a submitted trial may wait for a worker there; its time limit counts from this event)."""

    number: int


@dataclass(frozen=True)
class Report:
    number: int
    step: int
    value: float


@dataclass(frozen=True)
class Finished:
    number: int
    result: Any
    elapsed: float
    rule_stop: tuple[str, str] | None = None   # (rule, message): a tripwire rule stopped the training
    #: why the training ended on its own before its budget (Trial.note_early_end: EarlyStopping's reason)
    early_end: str | None = None


@dataclass(frozen=True)
class Failed:
    number: int
    error: str
    kind: str = "error"   # error | timeout | worker_died


Event = Started | Report | Finished | Failed


class Executor:
    """Interface the :class:`Tuner` drives (all calls from the tuning process)."""

    #: Whether :meth:`poll` says when a submitted trial begins to run (:class:`Started`); when
    #: False, a trial runs from its :meth:`submit` (a free worker takes it at once).
    reports_start = False

    def start(self, train: Callable[..., Any], setup: Callable[[], Any] | None, n_workers: int) -> None:
        raise NotImplementedError

    def _check_start(self, train: Callable[..., Any], setup: Callable[[], Any] | None) -> None:
        """Raise the :class:`ConfigError` :meth:`start` would raise for ``train``/``setup`` (say, a
        function its workers cannot load), without starting anything: the tuner asks before it
        writes its session's start to the journal, so a refused resume leaves the journal as it
        was (trial 31g). Nothing here; an executor that refuses some functions says so."""

    def needs_main_guard(self) -> bool:
        """Whether the processes this executor starts re-run the main script in their own way (a
        Dask ``LocalCluster``'s workers, ``spawn``), so that a script which calls ``Tuner.fit()``
        outside ``if __name__ == "__main__":`` would start the job again in each of them: then
        ``fit()`` refuses such a script before it touches the journal (trial 22b). The local
        executor runs an unguarded script itself (:func:`_load_main`): False."""
        return False

    def free_slots(self) -> int:
        raise NotImplementedError

    def submit(self, spec: TrialSpec) -> None:
        raise NotImplementedError

    def poll(self, timeout: float) -> list[Event]:
        raise NotImplementedError

    def reply(self, number: int, stop: bool, reason: str) -> None:
        raise NotImplementedError

    def cancel(self, number: int, reason: str) -> Failed | None:
        raise NotImplementedError

    def shutdown(self) -> None:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError


class _PipeChannel:
    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def report(self, number: int, step: int, value: float) -> tuple[bool, str]:
        self._conn.send(("report", number, step, value))
        msg = self._conn.recv()
        if msg[0] != "decision" or msg[1] != number:
            raise TuneError(f"worker protocol: expected a decision for trial {number}, got {msg!r}")
        return bool(msg[2]), str(msg[3])


WORKER_NAME = "tripwire-tune-worker"
# exit code of a worker whose start-up re-ran a script that calls Tuner.fit() outside
# `if __name__ == "__main__":` (spawn re-imports the main script); the tuner reports it once
NESTED_START_EXIT = 78


def in_worker_startup() -> bool:
    """Is this process a tuner's worker that is still starting (spawn re-running the main script)?
    multiprocessing marks a child as ``_inheriting`` until its start-up data is loaded."""
    proc = mp.current_process()
    return proc.name == WORKER_NAME and bool(getattr(proc, "_inheriting", False))


PR_SET_PDEATHSIG = 1


#: The signal on which a worker dumps every thread's stack (``faulthandler``) to
#: :func:`_stack_file`, asked by the tuning process before it kills a trial past ``trial_timeout``
#: (trial 20c: a timed-out trial's error said nothing of where it hung). Not SIGUSR1: Lightning's
#: SLURM support uses it.
_STACK_SIGNAL = getattr(signal, "SIGUSR2", None)


def _stack_file(pid: int) -> str:
    return os.path.join(tempfile.gettempdir(), f"tripwire-worker-stack-{pid}.txt")


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (a worker of a killed tuner that nobody
    reaped: ``kill(pid, 0)`` still succeeds for it)."""
    if os.path.isdir("/proc/self"):  # (Linux; elsewhere ask the kernel)
        try:
            with open(f"/proc/{pid}/stat") as fh:
                return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
        except FileNotFoundError:
            return False
        except (OSError, IndexError):
            pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def _sweep_stack_files() -> list[str]:
    """Remove the :func:`_stack_file` of workers that are gone: a tuning process killed with
    SIGKILL takes its workers with it (``PR_SET_PDEATHSIG``) before either removes its file.
    Returns the paths removed."""
    removed = []
    pattern = os.path.join(tempfile.gettempdir(), "tripwire-worker-stack-*.txt")
    for path in glob.glob(pattern):
        pid = os.path.basename(path)[len("tripwire-worker-stack-"):-len(".txt")]
        if not pid.isdigit():
            continue
        if _alive(int(pid)):  # (a worker of a tuning job running now)
            continue
        with contextlib.suppress(OSError):
            os.unlink(path)
            removed.append(path)
    return removed


def _dump_stacks_on_signal() -> Any:
    """In a worker: dump every thread's stack to :func:`_stack_file` on :data:`_STACK_SIGNAL` (where
    the platform has it); the open file, kept for the life of the worker, or None."""
    if _STACK_SIGNAL is None:
        return None
    try:
        out = open(_stack_file(os.getpid()), "w")  # noqa: SIM115 - open while the worker lives
        faulthandler.register(_STACK_SIGNAL, file=out, all_threads=True, chain=False)
    except (OSError, RuntimeError, ValueError):
        return None
    return out


#: Base names of the GNU OpenMP runtime (torch bundles ``libgomp.so.1``; scikit-learn's wheels,
#: which xgboost's use too, ``libgomp-<hash>.so.1.0.0``).
_GNU_OPENMP = "libgomp"


def _gnu_openmp_runtimes() -> list[str]:
    """The paths of the GNU OpenMP runtimes loaded in this process (Linux: ``/proc/self/maps``;
    elsewhere none are found). Their thread pool does not survive ``fork`` (no fork handler): a forked
    child's first parallel region waits for ever for pool threads that exist only in its parent
    (trial 30f: gdb showed the worker in ``gomp_team_barrier_wait_end``)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return []
    found: list[str] = []
    for line in lines:
        parts = line.split(None, 5)
        path = parts[5].strip() if len(parts) == 6 else ""
        if path.startswith("/") and os.path.basename(path).startswith(_GNU_OPENMP) and path not in found:
            found.append(path)
    return found


def _one_openmp_thread() -> list[str]:
    """In a forked worker, before ``setup()`` and the trials: torch (where the tuning process had
    imported it) and every GNU OpenMP runtime the tuning process had loaded run on one thread, as torch's
    own ``DataLoader`` workers do: the OpenMP thread pool the tuning process started does not survive
    ``fork`` (:func:`_gnu_openmp_runtimes`), and a region of one thread needs no pool. A runtime the
    worker loads itself later is fresh and keeps its threads. Returns what was limited (``"torch"``
    and the runtimes' paths)."""
    limited: list[str] = []
    torch = sys.modules.get("torch")
    set_num_threads = getattr(torch, "set_num_threads", None)
    if callable(set_num_threads):
        set_num_threads(1)  # (also MKL's threads, and torch's own count)
        limited.append("torch")
    for path in _gnu_openmp_runtimes():
        try:  # (RTLD_NOLOAD: the copy loaded already, never another)
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
            lib.omp_set_num_threads(1)
        except (OSError, AttributeError):
            continue
        limited.append(path)
    return limited


def _fork_problems() -> tuple[list[str], bool]:
    """What a forked worker of this process inherits that changes its trials: the OpenMP users it
    runs on one thread (:func:`_one_openmp_thread`: ``"torch"`` and the GNU OpenMP runtimes' file
    names), and whether this process has initialised CUDA (which a forked child cannot use: torch
    raises ``Cannot re-initialize CUDA in forked subprocess``)."""
    torch = sys.modules.get("torch")
    users = ["torch"] if callable(getattr(torch, "set_num_threads", None)) else []
    own = os.path.dirname(str(getattr(torch, "__file__", None) or "")) if users else ""
    for path in _gnu_openmp_runtimes():
        if own and path.startswith(own + os.sep):
            continue  # (torch's own runtime: said as torch)
        where = os.path.join(os.path.basename(os.path.dirname(path)), os.path.basename(path))
        users.append(f"the GNU OpenMP runtime {where}")
    cuda = False
    with contextlib.suppress(Exception):
        cuda = bool(torch is not None and torch.cuda.is_initialized())
    return users, cuda


#: Seconds the tuning process waits at most for a timed-out trial's worker to dump its threads'
#: stacks (:func:`_take_stack`; it reads them as soon as the dump stops growing). Trial 31g: 1 s was
#: too short for a niced worker on a busy host, and the stack was dropped without a word.
STACK_WAIT_S = 5.0


def _take_stack(pid: int, wait_s: float | None = None) -> tuple[str | None, str | None]:
    """Ask worker ``pid`` for its threads' stacks and read them, waiting up to ``wait_s`` seconds
    (default :data:`STACK_WAIT_S`) for the dump: ``(stacks, None)``; ``(None, why)`` where none
    came (the worker did not write them in time, the signal could not be sent), said in the trial's
    error; ``(None, None)`` where the platform has no :data:`_STACK_SIGNAL` (the message alone, as
    documented)."""
    if _STACK_SIGNAL is None:
        return None, None
    wait_s = STACK_WAIT_S if wait_s is None else wait_s
    name = signal.Signals(_STACK_SIGNAL).name
    path = _stack_file(pid)
    try:
        os.kill(pid, _STACK_SIGNAL)
    except OSError as exc:
        return None, f"its threads' stacks could not be asked for ({name}: {exc.strerror or exc})"
    deadline, size = time.monotonic() + wait_s, -1
    while time.monotonic() < deadline:  # (until the dump stops growing)
        time.sleep(0.05)
        with contextlib.suppress(OSError):
            now = os.path.getsize(path)
            if now > 0 and now == size:
                break
            size = now
    text = ""
    with contextlib.suppress(OSError):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read().strip()
    if text:
        return text, None
    return None, (f"no stack of its threads: the worker did not write them within {wait_s:g} s of {name} "
                  "(a busy host, or a worker that blocks or ignores the signal)")


def _die_with_parent(parent_pid: int, direct: bool = True) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux; skipped elsewhere).

    ``direct``: the tuning process (``parent_pid``) is this process's parent (``spawn``, ``fork``).
    With ``forkserver`` the parent is the fork server, which exits when the tuning process dies
    (its end of the server's pipe closes), so the request still ends the worker with the tuner."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if direct:
        if os.getppid() != parent_pid:  # the parent died before the request
            os._exit(1)
        return
    try:  # forkserver: the tuning process died before the request (or the fork server did)
        os.kill(parent_pid, 0)
    except ProcessLookupError:
        os._exit(1)
    except PermissionError:
        pass
    if os.getppid() == 1:
        os._exit(1)


class MainScriptStop(BaseException):
    """Raised by ``Tuner.fit()`` in a worker that runs the main script to find ``train``
    (:func:`_load_main`): the script stops there, with what it defined above that call. A
    ``BaseException``, so that the script's own ``except Exception`` does not hold it."""


_loading_main = False  # a worker is running the main script (see _load_main)


def loading_main() -> bool:
    """Is this process a worker running the tuning process's main script to find ``train`` (and
    ``setup``)? Then ``Tuner.fit()`` raises :class:`MainScriptStop`."""
    return _loading_main


@dataclass(frozen=True)
class _MainRef:
    """The tuning process's ``__main__``: a script's path, or a ``python -m`` module's name. A
    worker runs it itself, as ``__mp_main__`` (:func:`_load_main`), before it unpickles ``train``
    and ``setup`` (which may name things of it). Unlike the main-script re-run of ``spawn``, this
    stops at the script's ``Tuner.fit()``, so that a script without an ``if __name__ ==
    "__main__":`` guard works too."""

    path: str | None
    module: str | None


def _main_ref() -> _MainRef | None:
    """This process's importable ``__main__`` as a :class:`_MainRef`, else None."""
    main = sys.modules.get("__main__")
    if main is None or not main_is_importable():
        return None
    module = getattr(getattr(main, "__spec__", None), "name", None)
    return _MainRef(None if module else os.path.abspath(main.__file__), module)


def _load_main(ref: _MainRef) -> int | None:
    """Run the main script (or module) in this worker as ``__mp_main__``, also installed as
    ``__main__`` (as ``spawn`` does), up to the first ``Tuner.fit()`` it reaches. Returns the line
    of the script's module-level code that called that ``fit()`` (:class:`FitSite`), or None where
    the script ran to its end without one (its ``fit()`` under ``if __name__ == "__main__":``).
    The script is compiled as Python compiles a main script: without this module's ``from
    __future__`` imports (trial 29c: they were inherited, so the worker's script read its
    annotations as strings, and the parent's did not)."""
    global _loading_main
    import importlib.util
    import io
    import types

    module = types.ModuleType("__mp_main__")
    if ref.module is not None:
        spec = importlib.util.find_spec(ref.module)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "get_code"):
            raise ImportError(f"the tuning process's main module {ref.module!r} cannot be found in a worker")
        code = spec.loader.get_code(ref.module)
        # (as runpy.run_module sets them: a -m module's relative imports need its package)
        module.__dict__.update(__file__=spec.origin, __cached__=spec.cached, __loader__=spec.loader,
                               __package__=spec.parent, __spec__=spec)
    else:
        with io.open_code(ref.path) as fh:  # type: ignore[arg-type]
            code = compile(fh.read(), ref.path, "exec", dont_inherit=True)  # type: ignore[arg-type]
        module.__dict__.update(__file__=ref.path, __cached__=None, __loader__=None, __package__=None,
                               __spec__=None)
    sys.modules["__main__"] = sys.modules["__mp_main__"] = module
    _loading_main = True
    try:
        exec(code, module.__dict__)  # noqa: S102 - the user's own script, as spawn runs it
    except MainScriptStop as stop:
        # the script reached Tuner.fit(): what train needs is defined above it (the line that
        # called it: the frame of the script's module-level code)
        tb = stop.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code is code:
                return tb.tb_lineno
            tb = tb.tb_next
        return -1  # (not from the script's own frame: a fit() it reached some other way)
    finally:
        _loading_main = False
    return None


@dataclass(frozen=True)
class FitSite:
    """Where the tuning process called ``Tuner.fit()``: ``line`` of the main script's module-level
    code (the statement that led to the call), and ``nth``: how many ``fit()`` calls came from that
    line before this one (a loop's). A worker of an unguarded script stops at the first ``fit()`` it
    reaches (:func:`_load_main`): its module is the script as it was at this call only where that
    is this very call (line and ``nth`` 0)."""

    path: str
    line: int
    nth: int


_fit_calls: dict[tuple[str, int], int] = {}   # calls of fit() per (script, line), in this process
_current_fit: FitSite | None = None           # the latest (see note_fit_call)


def note_fit_call() -> FitSite | None:
    """Record a ``Tuner.fit()`` call of the tuning process (called by ``fit()`` itself, before it
    touches the journal) and return its :class:`FitSite`, also kept for the :class:`LocalExecutor`
    that ``fit()`` starts next; None where the call does not come from the main script's
    module-level code (a thread, a ``python -c`` or notebook ``__main__``)."""
    global _current_fit
    main = sys.modules.get("__main__")
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_code.co_name == "<module>"
                                     and frame.f_globals is getattr(main, "__dict__", None)):
        frame = frame.f_back
    if frame is None:
        _current_fit = None
        return None
    key = (frame.f_code.co_filename, frame.f_lineno)
    _current_fit = FitSite(key[0], key[1], _fit_calls.get(key, 0))
    _fit_calls[key] = _current_fit.nth + 1
    return _current_fit


def _take_fit_site() -> FitSite | None:
    """The :class:`FitSite` of the ``fit()`` that starts an executor now (:func:`note_fit_call`),
    taken once: an executor started otherwise gets None (nothing to check)."""
    global _current_fit
    site, _current_fit = _current_fit, None
    return site


@dataclass(frozen=True)
class _MainObject:
    """A function or class of the tuning process's ``__main__`` that ``train`` or ``setup`` pickles
    by name (``train`` itself, a ``functools.partial``'s function, a callable object's class): a
    worker looks ``qualname`` up in the module it ran (:func:`_load_main`), and must find this very
    definition there (``identity``, :func:`_identity`), not another of that name (trial 29c: a
    script that redefined ``train`` before a second ``fit()`` ran the first one in that job's
    workers, without a word). ``line``: where the script defines it."""

    what: str
    qualname: str
    identity: str
    line: int | None


def _code_digest(code: Any, h: Any) -> None:
    """Feed what a code object does into hash ``h``: its bytecode, names, constants (nested code
    objects the same way) and first line; nothing that differs between two processes compiling the
    same source (addresses, the order of a frozenset's strings)."""
    h.update(code.co_code)
    h.update(repr((code.co_name, code.co_firstlineno, code.co_names, code.co_varnames)).encode())

    def const(c: Any) -> None:
        if hasattr(c, "co_code"):
            _code_digest(c, h)
        elif isinstance(c, tuple):
            h.update(b"(")
            for x in c:
                const(x)
            h.update(b")")
        elif isinstance(c, frozenset):
            h.update(repr(sorted(repr(x) for x in c)).encode())
        else:
            h.update(f"{type(c).__name__}:{c!r};".encode())

    for c in code.co_consts:
        const(c)


def _functions_of(obj: Any) -> list[Any]:
    """The Python functions ``obj`` stands for: a function and those it wraps (``__wrapped__``,
    ``functools.wraps``), a class's methods (properties, static and class methods included)."""
    import types

    if isinstance(obj, type):
        out = []
        for _name, v in sorted(vars(obj).items()):
            for f in ((v.fget, v.fset, v.fdel) if isinstance(v, property)
                      else (getattr(v, "__func__", v),)):
                if isinstance(f, types.FunctionType):
                    out.extend(_functions_of(f))
        return out
    chain, seen = [], set()
    while isinstance(obj, types.FunctionType) and id(obj) not in seen:
        seen.add(id(obj))
        chain.append(obj)
        obj = getattr(obj, "__wrapped__", None)
    return chain


def _identity(obj: Any) -> str:
    """A digest of what ``obj`` (a function or class of a main script) is: the same in two processes
    that compiled the same definition, another for another definition of the name."""
    import hashlib

    h = hashlib.sha256(f"{type(obj).__name__}:{getattr(obj, '__qualname__', '')}".encode())
    for f in _functions_of(obj):
        _code_digest(f.__code__, h)
    return h.hexdigest()


def _definition_line(obj: Any) -> int | None:
    """The line where a main script defines ``obj`` (a function: the one it wraps, if any; a class:
    its first method), or None."""
    fns = _functions_of(obj)
    if not fns:
        return None
    if isinstance(obj, type):
        return min(f.__code__.co_firstlineno for f in fns)
    return int(fns[-1].__code__.co_firstlineno)


def _pickle_functions(train: Any, setup: Any) -> tuple[bytes, tuple[_MainObject, ...]]:
    """``(train, setup)`` pickled (as ``pickle.dumps``), and the functions and classes of
    ``__main__`` that the pickle names (:class:`_MainObject`; ``what``: ``"train"`` for those met
    while pickling ``train``, ``"setup"`` after): one pass."""
    import io
    import types

    found: list[_MainObject] = []
    state = {"what": "train"}

    class Recorder(pickle.Pickler):
        def reducer_override(self, obj: Any) -> Any:
            if obj is setup and setup is not None:
                state["what"] = "setup"
            if isinstance(obj, (types.FunctionType, type)) and getattr(obj, "__module__", None) == "__main__":
                qual = getattr(obj, "__qualname__", "")
                if qual and "<" not in qual and all(o.qualname != qual for o in found):
                    found.append(_MainObject(state["what"], qual, _identity(obj), _definition_line(obj)))
            return NotImplemented

    buf = io.BytesIO()
    Recorder(buf).dump((train, setup))
    return buf.getvalue(), tuple(found)


def _main_objects(what: str, fn: Any) -> list[_MainObject]:
    """The functions and classes of ``__main__`` that pickling ``fn`` names, as ``what``
    (:func:`_pickle_functions`)."""
    objects = _pickle_functions(fn, None)[1]
    return [dataclasses.replace(o, what=what) for o in objects]


def _check_main(objects: tuple[_MainObject, ...], module: Any, stop: int | None,
                site: FitSite | None) -> dict[str, Any] | None:
    """In a worker that ran the main script (``module``, stopped at line ``stop``): what it found
    that is not what the tuning process sends, else None. A function or class of ``objects``
    missing from the module, or another definition of its name (``problem`` ``"missing"`` or
    ``"other"``, ``found_line``); else a worker that stopped at another ``fit()`` than the one that
    started the job, ``site`` (``"site"``): its module is the script as it was at that other call."""
    for o in objects:
        obj: Any = module
        for part in o.qualname.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if obj is None:
            return {"problem": "missing", "qualname": o.qualname, "found_line": None, "stop": stop}
        if _identity(obj) != o.identity:
            return {"problem": "other", "qualname": o.qualname, "found_line": _definition_line(obj), "stop": stop}
    if stop is not None and site is not None and (stop != site.line or site.nth):
        return {"problem": "site", "qualname": None, "found_line": None, "stop": stop}
    return None


@contextlib.contextmanager
def _main_hidden() -> Iterator[None]:
    """``__main__`` without its file and module name while a worker starts: ``spawn`` and
    ``forkserver`` then do not re-run the main script in the worker (which would run a script's
    unguarded ``Tuner.fit()`` there); the worker runs it itself (:func:`_load_main`) where it is a
    script file or a module, and not at all where it is not one (``python -c``, standard input,
    whose ``__file__`` ``'<stdin>'`` spawn would try to run)."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if k in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__dict__["__spec__"] = None
    try:
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        main.__dict__.update(saved)


def main_is_importable() -> bool:
    """Can a ``spawn``/``forkserver`` worker import this process's ``__main__``? Not when it is
    ``python -c``, standard input, an interactive session or a notebook (no script file, no module
    name): a function defined there pickles by name and then cannot be found in the worker."""
    main = sys.modules.get("__main__")
    if main is None:
        return False
    if getattr(getattr(main, "__spec__", None), "name", None):
        return True  # python -m package.module
    path = getattr(main, "__file__", None)
    return isinstance(path, str) and os.path.isfile(path)


def _worker_main(conn: Connection, main: _MainRef | None, functions: bytes | tuple[Any, Any], reuse: bool,
                 parent_pid: int | None = None, direct_child: bool = True,
                 main_objects: tuple[_MainObject, ...] = (), site: FitSite | None = None,
                 forked: bool = False) -> None:
    """Loop of one worker process: the main script run here (``main``, see :func:`_load_main`),
    checked against what the tuning process sends (``main_objects``, ``site``: :func:`_check_main`;
    a mismatch is answered ``("main_mismatch", details)`` and the worker ends), then ``(train,
    setup)`` unpickled from ``functions`` (given as they are with ``fork``). ``forked``: started with
    ``fork``: the OpenMP code inherited from the tuning process runs on one thread
    (:func:`_one_openmp_thread`), before ``setup()``."""
    if parent_pid is not None:
        _die_with_parent(parent_pid, direct_child)
    stacks = _dump_stacks_on_signal()  # noqa: F841 - held open for the life of the worker
    try:
        if forked:
            _one_openmp_thread()
        if main is not None:
            stop = _load_main(main)
            mismatch = _check_main(main_objects, sys.modules["__mp_main__"], stop, site)
            if mismatch is not None:
                conn.send(("main_mismatch", mismatch))
                return
        train, setup = pickle.loads(functions) if isinstance(functions, bytes) else functions
    except BaseException:
        conn.send(("load_failed", traceback.format_exc()))
        return
    try:
        context = setup() if setup is not None else None
    except BaseException:
        conn.send(("setup_failed", traceback.format_exc()))
        return
    conn.send(("ready", os.getpid()))
    channel = _PipeChannel(conn)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg[0] != "trial":
            return
        spec: TrialSpec = msg[1]
        trial = Trial(spec.number, spec.params, spec.min_resource, spec.max_resource, spec.bracket,
                      channel=channel, context=context, attempt=spec.attempt)
        take_rule_stop(spec.number)
        take_early_end(spec.number)
        t0 = time.perf_counter()
        try:
            out = train(dict(spec.params), trial)
            out = number_like_result(out)  # (trial 22b: `return val_loss` works)
            rule_stop = take_rule_stop(spec.number) or trial.stopped_by_rule
            early_end = take_early_end(spec.number) or trial.early_end_reason
            reply: tuple[Any, ...] = ("done", spec.number, out, time.perf_counter() - t0, rule_stop, early_end)
        except (EOFError, BrokenPipeError, ConnectionResetError):
            return  # the tuning process is gone
        except BaseException:
            take_rule_stop(spec.number)
            take_early_end(spec.number)
            reply = ("failed", spec.number, traceback.format_exc())
        try:
            conn.send_bytes(_reply_bytes(reply))
        except (BrokenPipeError, OSError):
            return
        if not reuse:
            return


def _dumps(obj: Any) -> bytes:
    """``obj`` pickled as ``Connection.send`` pickles it (torch's reductions included: a tensor
    attached to the autograd graph raises a RuntimeError there)."""
    return bytes(ForkingPickler.dumps(obj))


def _reply_bytes(reply: tuple[Any, ...]) -> bytes:
    """A worker's reply, pickled. A return value that does not pickle, whatever the pickler raises
    (trial 22b: torch's RuntimeError for a tensor attached to the graph killed the worker), never
    kills the worker: a dict keeps the values that do not pickle as their ``str``, anything else
    fails the trial with an error that says what did not pickle and why
    (:func:`~._trial.picklable_result`)."""
    try:
        return _dumps(reply)
    except Exception:
        if reply[0] != "done":
            raise
    out, error = picklable_result(reply[2], _dumps)
    if error is None:
        try:
            return _dumps((*reply[:2], out, *reply[3:]))
        except Exception:  # (the rest of the reply: said with its traceback below)
            error = "the trial's result does not pickle:\n" + traceback.format_exc()
    return _dumps(("failed", reply[1], error))


@dataclass
class _Worker:
    process: Any
    conn: Connection
    ready: bool = False
    trial: int | None = None
    started: float = 0.0
    spawned: float = field(default_factory=time.perf_counter)


def _fork_hint() -> str:
    """The refusal's note on ``start_method='fork'`` for a ``train`` defined in an unimportable
    ``__main__`` (a notebook): the way out, and what a forked worker changes, or why it is no way
    out where this process has initialised CUDA (trial 30f: it was suggested where it hung)."""
    users, cuda = _fork_problems()
    if cuda:
        return ("; start_method='fork' is no way out here: this process has initialised CUDA, which a forked "
                "worker cannot use")
    threads = (f", and run {' and '.join(users)} on one thread, since the OpenMP thread pool this process "
               "started does not survive fork" if users else "")
    return f" (or executor={{'type': 'local', 'start_method': 'fork'}}: forked workers inherit train{threads})"


class LocalExecutor(Executor):
    """A pool of ``n_workers`` processes on this machine.

    ``start_method``: ``"spawn"`` (default; safe with threads and CUDA), ``"forkserver"`` or
    ``"fork"``. ``reuse_workers=False`` starts a fresh process for every trial (for comparison).
    :meth:`cancel` (the tuner's per-trial time limit) kills the trial's worker and starts another.
    """

    def __init__(self, start_method: str = "spawn", reuse_workers: bool = True) -> None:
        if start_method not in mp.get_all_start_methods():
            raise ConfigError(f"start_method={start_method!r} is not one of {mp.get_all_start_methods()}")
        self.start_method = start_method
        self.reuse_workers = check_bool(reuse_workers, "reuse_workers")  # ("yes", 1: no silent truthiness)
        self._ctx = mp.get_context(start_method)
        self._workers: list[_Worker] = []
        self._by_trial: dict[int, _Worker] = {}
        self._train: Callable[..., Any] | None = None
        self._setup: Callable[[], Any] | None = None
        self._main: _MainRef | None = None  # the main script a worker runs first (see _load_main)
        # what a worker must find in it (see _check_main): train's and setup's names there, the fit() call
        self._main_objects: tuple[_MainObject, ...] = ()
        self._site: FitSite | None = None
        # (train, setup), pickled: unpickled in a worker after its main script (as they are with fork)
        self._functions: bytes | tuple[Any, Any] = b""
        self._early_deaths = 0
        self.worker_starts = 0
        self.startup_seconds: list[float] = []

    def to_dict(self) -> dict[str, Any]:
        return {"type": "local", "start_method": self.start_method, "reuse_workers": self.reuse_workers}

    def _check_start(self, train: Callable[..., Any], setup: Callable[[], Any] | None) -> None:
        """With ``spawn``/``forkserver``: a ``ConfigError`` for a ``train`` or ``setup`` its workers
        cannot import (defined in a ``__main__`` they cannot import) or that does not pickle."""
        if self.start_method != "fork":
            for what, fn in (("train", train), ("setup", setup)):
                if fn is None:
                    continue
                if getattr(fn, "__module__", None) == "__main__" and not main_is_importable():
                    fork = _fork_hint() if "fork" in mp.get_all_start_methods() else ""
                    raise ConfigError(
                        f"{what}={fn!r} is defined in a __main__ that worker processes cannot import (python -c, "
                        f"standard input, an interactive session or a notebook): workers started with "
                        f"start_method={self.start_method!r} import {what} by name; define it at module level in an "
                        f"importable module and import it from there{fork}")
                try:
                    pickle.dumps(fn)
                except Exception as exc:
                    raise ConfigError(
                        f"{what}={fn!r} cannot be sent to worker processes ({exc}); define it at module level "
                        f"in an importable module (start_method={self.start_method!r})") from None

    def start(self, train: Callable[..., Any], setup: Callable[[], Any] | None, n_workers: int) -> None:
        self._check_start(train, setup)
        if self.start_method == "fork":
            self._say_fork()
        self._train, self._setup = train, setup
        # a worker runs the main script itself (up to its Tuner.fit()), then unpickles train and setup
        fork = self.start_method == "fork"  # (a forked worker has them already: nothing to pickle)
        self._main = None if fork else _main_ref()
        if fork:
            self._functions, self._main_objects = (train, setup), ()
        else:  # (and what of __main__ the pickle names: a worker checks it finds those very definitions)
            self._functions, self._main_objects = _pickle_functions(train, setup)
            if self._main is None:
                self._main_objects = ()
        self._site = _take_fit_site() if self._main is not None else None
        _sweep_stack_files()
        for _ in range(n_workers):
            self._spawn()

    def _say_fork(self) -> None:
        """With ``fork``, before the workers start: an INFO that names the OpenMP users a forked
        worker runs on one thread (:func:`_one_openmp_thread`), and a WARNING where this process has
        initialised CUDA, which a forked worker cannot use."""
        users, cuda = _fork_problems()
        if users:
            logger.info("tripwire.tune: start_method='fork': the workers run %s on one thread (the OpenMP "
                        "thread pool this process started does not survive fork: a worker would wait for it "
                        "for ever); for more threads per trial, define train in an importable module and "
                        "use the default start_method='spawn'", " and ".join(users))
        if cuda:
            logger.warning("tripwire.tune: start_method='fork' after this process initialised CUDA: a forked "
                           "worker cannot use CUDA (torch raises 'Cannot re-initialize CUDA in forked "
                           "subprocess'), so a trial that uses the GPU fails; define train in an importable "
                           "module and use the default start_method='spawn'")

    def _spawn(self) -> _Worker:
        parent, child = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(target=_worker_main,
                                 args=(child, self._main, self._functions, self.reuse_workers, os.getpid(),
                                       self.start_method != "forkserver", self._main_objects, self._site,
                                       self.start_method == "fork"),
                                 daemon=False, name=WORKER_NAME)
        # hidden also where no worker can run it (trial 26b: `python - < main.py` names its __main__
        # '<stdin>', which spawn then tried to run in each worker: FileNotFoundError, and every
        # worker died; train and setup, refused above when defined there, are imported by name)
        with _main_hidden() if self.start_method != "fork" else contextlib.nullcontext():
            proc.start()
        child.close()
        w = _Worker(proc, parent)
        self._workers.append(w)
        self.worker_starts += 1
        return w

    def free_slots(self) -> int:
        return sum(1 for w in self._workers if w.ready and w.trial is None)

    def submit(self, spec: TrialSpec) -> None:
        for w in self._workers:
            if w.ready and w.trial is None:
                w.conn.send(("trial", spec))
                w.trial, w.started = spec.number, time.monotonic()
                self._by_trial[spec.number] = w
                return
        raise TuneError("submit() called without a free worker")

    def reply(self, number: int, stop: bool, reason: str) -> None:
        w = self._by_trial.get(number)
        if w is not None:
            try:
                w.conn.send(("decision", number, stop, reason))
            except OSError:
                pass  # the worker died; its sentinel reports it

    def _retire(self, w: _Worker, replace: bool) -> None:
        if w in self._workers:
            self._workers.remove(w)
        if w.trial is not None:
            self._by_trial.pop(w.trial, None)
        try:
            w.conn.close()
        except OSError:
            pass
        if w.process.is_alive():
            w.process.kill()
        w.process.join(timeout=5)
        if w.process.pid is not None:
            with contextlib.suppress(OSError):
                os.unlink(_stack_file(w.process.pid))
        if replace:
            self._spawn()

    def cancel(self, number: int, reason: str) -> Failed | None:
        w = self._by_trial.get(number)
        if w is None:
            return None
        pid = w.process.pid
        stack, missing = (_take_stack(pid) if pid is not None and w.process.is_alive()
                          else (None, "no stack of its threads: its worker had ended"))
        self._retire(w, replace=True)
        where = f"\n{STACK_MARKER} (most recent call first):\n{stack}" if stack else ""
        said = f"; {missing}" if missing else ""  # (trial 31g: a stack missing without a word)
        return Failed(number, f"{reason}; its worker (pid {pid}) was killed{said}{import_hint(stack)}{where}",
                      "timeout")

    def poll(self, timeout: float) -> list[Event]:
        events: list[Event] = []
        handles: dict[Any, _Worker] = {}
        for w in self._workers:
            handles[w.conn] = w
            handles[w.process.sentinel] = w
        if not handles:
            raise TuneError("no worker process is left")
        ready = wait(list(handles), timeout=timeout)
        dead: list[_Worker] = []
        for h in ready:
            w = handles[h]
            if h is w.conn:
                self._drain(w, events)
            elif w not in dead:
                dead.append(w)
        for w in dead:
            if w not in self._workers:
                continue
            self._drain(w, events)
            if w not in self._workers:
                continue
            w.process.join(timeout=2)
            code = w.process.exitcode
            if w.trial is not None:
                events.append(Failed(w.trial, f"worker process (pid {w.process.pid}) died with exit code {code} "
                                              f"while running trial {w.trial}", "worker_died"))
            elif not w.ready:
                self._early_deaths += 1
                if code == NESTED_START_EXIT:
                    self.shutdown()
                    raise TuneError(
                        "the worker processes re-ran the script that started the tuner, and it calls Tuner.fit() "
                        "at module level: workers start with 'spawn' and re-import the main script, so guard "
                        "its entry point with `if __name__ == '__main__':`")
                if self._early_deaths >= 3:
                    raise TuneError(self._early_death_message(code))
            self._retire(w, replace=True)
        return events

    def _early_death_message(self, code: int | None) -> str:
        """Why workers may die before they are ready, naming what applies to this job."""
        mods = sorted({m for m in (getattr(f, "__module__", None) for f in (self._train, self._setup)
                                   if f is not None) if m})
        msg = (f"worker processes (start_method={self.start_method!r}) die before they are ready (exit code "
               f"{code}): a worker could not load train/setup or start; their own error, if any, is on this "
               "process's stderr above")
        if self.start_method == "fork":
            return msg
        others = [m for m in mods if m != "__main__"]
        if others:
            msg += f"; check that {', '.join(map(repr, others))} imports in a fresh process"
        if "__main__" in mods:
            msg += ("; the workers re-run the main script to find train: check that it runs in a fresh process "
                    "and does no work outside `if __name__ == '__main__':`")
        return msg

    def _mismatch_message(self, found: dict[str, Any]) -> str:
        """The error for a worker whose main script is not the tuning process's at this ``fit()``
        (:func:`_check_main`): what the worker found, why, and the fix."""
        script = (self._main.path or self._main.module) if self._main is not None else "the main script"
        stop, site = found["stop"], self._site
        guard = "`if __name__ == \"__main__\":`"
        if stop is not None:
            how = (f"a worker runs the main script itself, as '__mp_main__', up to the first Tuner.fit() it reaches "
                   f"(line {stop} of {script}), and takes train and setup from what it defined up to there")
        else:
            how = (f"a worker runs the main script's module-level code itself, as '__mp_main__' (not what is under "
                   f"{guard}), and takes train and setup from what it defined")
        jobs = (f"put the code that runs the jobs (every Tuner.fit()) under {guard}, or run each job from a script "
                "of its own")
        if found["problem"] == "site":
            this = (f"this Tuner.fit() (line {site.line} of {script}"
                    + (f", call {site.nth + 1} from that line" if site.nth else "") + ")") if site else "this Tuner.fit()"
            return (f"{this} is not the one where the worker processes stop: {how}, so their module would be the "
                    f"script as it was at that call (its data, settings and functions), not as it is at this one; "
                    f"{jobs}")
        obj = next(o for o in self._main_objects if o.qualname == found["qualname"])
        name = obj.qualname
        here = f"line {obj.line} of {script}" if obj.line is not None else script
        if getattr(self._train if obj.what == "train" else self._setup, "__qualname__", None) == name:
            this = f"{obj.what} {name!r} (the function this job runs as {obj.what}, defined at {here})"
        else:
            this = f"{name!r} (which this job's {obj.what} needs, defined at {here})"
        if found["problem"] == "other":
            at = f"line {found['found_line']}" if found["found_line"] is not None else "another place"
            return (f"{this} is not the {name!r} the worker processes have: {how}, and there {name!r} is the "
                    f"definition at {at}, which would run in this job's trials instead. Give each job's train and "
                    f"setup a name of its own (train_a, train_b), defined at module level outside {guard}, and "
                    f"{jobs}")
        if stop is None:
            return (f"{this} cannot be found in the worker processes: {how}, and there {name!r} is not defined "
                    f"(it is defined under {guard}, or by code that only runs there). Define {name!r} at module "
                    f"level, outside {guard}")
        later = (f": it is defined below that fit()" if obj.line is not None and obj.line > stop else "")
        return (f"{this} cannot be found in the worker processes: {how}, and there {name!r} is not defined yet"
                f"{later}. Define {name!r} at module level, outside {guard}, and {jobs}")

    def _drain(self, w: _Worker, events: list[Event]) -> None:
        while w in self._workers:
            try:
                if not w.conn.poll():
                    return
                msg = w.conn.recv()
            except (EOFError, OSError):
                return
            kind = msg[0]
            if kind == "ready":
                w.ready = True
                self.startup_seconds.append(time.perf_counter() - w.spawned)
            elif kind == "setup_failed":
                self.shutdown()
                raise TuneError(f"setup() failed in a worker process:\n{msg[1]}")
            elif kind == "main_mismatch":
                self.shutdown()
                raise TuneError(self._mismatch_message(msg[1]))
            elif kind == "load_failed":
                self.shutdown()
                where = ("running the main script (a worker runs it up to its Tuner.fit() to find train) or "
                         "loading train and setup" if self._main is not None else "loading train and setup")
                raise TuneError(f"a worker process failed {where}:\n{msg[1]}")
            elif kind == "report":
                events.append(Report(msg[1], msg[2], msg[3]))
            elif kind in ("done", "failed"):
                events.append(Finished(msg[1], msg[2], msg[3], msg[4], msg[5] if len(msg) > 5 else None)
                              if kind == "done" else Failed(msg[1], msg[2]))
                self._by_trial.pop(msg[1], None)
                w.trial = None
                if not self.reuse_workers:
                    self._retire(w, replace=True)

    def shutdown(self) -> None:
        """Stop every worker: an idle one is asked to exit, one inside a trial is killed at once."""
        for w in list(self._workers):
            if w.trial is not None and w.process.is_alive():
                w.process.kill()
                continue
            try:
                w.conn.send(("exit",))
            except OSError:
                pass
        deadline = time.monotonic() + 5
        for w in list(self._workers):
            w.process.join(timeout=max(0.0, deadline - time.monotonic()))
            if w.process.is_alive():
                w.process.kill()
                w.process.join(timeout=5)
            try:
                w.conn.close()
            except OSError:
                pass
            if w.process.pid is not None:
                with contextlib.suppress(OSError):
                    os.unlink(_stack_file(w.process.pid))
        self._workers.clear()
        self._by_trial.clear()



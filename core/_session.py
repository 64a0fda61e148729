"""The framework-free session an integration feeds.

Per step an adapter calls::

    plan = session.begin_step("train", step)      # which collections are due (cheap, pure)
    if plan.wants("gradients"):                    # no work at all on steps that are not saved
        plan.add_many(grads_by_name, kind="gradients")
    decision = session.end_step()                  # reduce (batched, on device), write, run rules
    if decision.stop: <set the framework's stop flag>

and ``session.close()`` at the end. Reductions run through the integration's
:class:`~tripwire.ReductionBackend`; records go to a background writer; rules read the
in-memory :class:`~tripwire.History`.

Every-step losses: a collection with ``every_step`` (the built-in ``losses`` by default) keeps the
training loss of every train step. On a step that saves nothing the plan is falsy, but
``plan.keeps("losses")`` is true and ``plan.add("loss", tensor, "losses")`` keeps a copy of the
tensor on its device (no host copy, no device synchronisation); the next record the session builds takes the
kept values to the host in the same batched reduction as its own values (one host copy), and
records each at its own step, in order, before its own record. ``flush()``, ``state_dict()`` and
``close()`` write what is still kept; at most :data:`BUFFER_LIMIT` values wait.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import math
import operator
import os
import re
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from tripwire.integrations._provides import OFFERED_IN  # (no import of its own: what each integration offers)

from ._actions import Action, RunContext, bind_run, raise_for, resolve_action
from ._config import (DEFAULT_RUNS_DIR, MAX_STEP, MODES, SCALAR_KINDS, Collection, Config, ModeSaveConfig,
                      ReductionConfig, SaveConfig, check_overrides, load_config)
from ._errors import ActionError, ConfigError, StepEndedError, StoreClosedError, TripwireError, rule_error
from ._finding import Decision, Finding, log_line
from ._format import FINDINGS_DIR, RUN_FILE, StepRecord, batchable
from ._history import History, _bad_mode
from ._reductions import NumpyBackend, ReductionBackend
from ._run import CHECK_SOURCE, REQUEST_STOP_SOURCE, append_finding_line, open_run, read_stop_requests
from ._validate import check_int, did_you_mean, keyword_parameters, plain_bool
from ._writer import RunWriter
from .rules._base import (FunctionRule, MisdatedFindingError, Rule, RuleReturnError, plain_state, reads_any_of,
                          restored_state, rule_failure, unjudged_reason)
from .rules._common import (BuiltinRule, names_in, optimizer_read_in_full, unfed_message, unfed_rules,
                            unmatched_inputs, value_at)
from .rules._registry import build_rules, config_path
from .rules.exploding_tensor import ExplodingTensor
from .rules.loss_scale_collapse import LOSS_SCALE

logger = logging.getLogger("tripwire")

_HOST_TYPES = (int, float, bool, np.ndarray, np.generic, list, tuple)

_OPEN: set[Session] = set()
"""Sessions whose writer is open, closed at exit if still open then. Strong references: a session
dropped without ``close()`` (a callback and model a script let go after a fit raised outside any
hook) would otherwise be collected with its last records, and its run read ``running`` for ever."""


def _close_at_exit() -> None:
    """A session still open when the interpreter exits (a training that raised where no hook of
    its callback saw it, a hand-written loop that never called ``close()``): its queued records
    are written and it ends ``failed``, with a warning; otherwise its last records were lost and
    the run read ``running`` for ever (``tripwire watch`` waited on it). A session whose training a
    stop ended (:attr:`Session.stopped_by` set) ends ``stopped`` instead, with its ``stop_reason``,
    when the exception that ends the process is the ``TrainingStopped`` of its own ``raise``
    action, or when no exception does (a loop that broke out at the stop and never closed); another
    exception after a stop is a crash: ``failed`` (trial 26c: a run its ``raise`` action ended read
    as a crash in ``tripwire inspect``). A session that never began a step (a callback made and not
    used) ends as it is, without a word, where the process exits without an exception and its
    integration said no training was running (:attr:`Session.training`); a process that ends on an
    exception ends it ``failed`` with that exception as its ``stop_reason`` and the WARNING, however
    few steps it began (trial 30b F1: a rank that crashed before its first step, in its data loader or
    its first collective, left a ``complete`` shard, and ``tripwire watch`` blamed the config).
    Registered anew at every session's start (:func:`_watch_exit`), so
    that it runs before the exit handlers of the frameworks imported before it (MXNet's engine
    shuts down in one: a flush after it hung)."""
    _TERM.exiting = True  # (a SIGTERM now is not raised: the process is ending; see _on_sigterm)
    with _EXIT_LOCK:  # (the interpreter's exit handler, or the SIGTERM watchdog's: one at a time)
        _close_open_at_exit()


_EXIT_LOCK = threading.Lock()


def _interactive() -> bool:
    """Whether this is an interactive interpreter (the REPL, ``python -i``, IPython, a Jupyter kernel),
    where ``sys.last_value`` is the last error shown at the prompt, not one that ends the process."""
    if hasattr(sys, "ps1") or sys.flags.interactive or "ipykernel" in sys.modules:
        return True
    ipython = sys.modules.get("IPython")
    return ipython is not None and getattr(ipython, "get_ipython", lambda: None)() is not None


def _close_open_at_exit() -> None:
    """:func:`_close_at_exit`'s work."""
    # the exception that ends the process (the interpreter sets it before the exit handlers run); in an
    # interactive interpreter an error at the prompt sets it too, and ends nothing (trial 38o: a session
    # left open there ended failed with the ZeroDivisionError of an earlier prompt)
    ending = None if _interactive() else (getattr(sys, "last_exc", None) or getattr(sys, "last_value", None))
    for session in list(_OPEN):
        if not _writing_here(session):
            continue  # (closed, or a forked child's copy of its parent's session: the parent writes that run)
        begun = session.global_step > 0 or session.training
        if not begun and ending is None:
            session.close()
            continue
        by = session.stopped_by
        stopped = by is not None and (ending is None or _own_stop(session, ending))
        how = f"stopped, as rule {by.rule!r} asked at step {by.step} ({by.mode})" if stopped and by else "failed"
        why = (f"on {_signal_name(_TERM.signum)} ({_TERMINATED})" if _TERM.signum is not None else
               "(close() was not called, or the training raised where no hook of its callback saw it)" if begun else
               f"(the process ends on {exception_summary(ending)}, before the session's first step)")
        logger.warning("tripwire: the process is exiting with the run %s still open %s: its records are written and "
                       "it is marked %s", session.out_dir, why, how)
        if not stopped and ending is not None:
            session._error = ending  # (the end marker's stop_reason names it: trial 27g F5)
        elif not stopped and _TERM.signum is None and session._failure is None and session.stop_reason is None:
            # (no exception reached the interpreter: sys.exit() in the loop, a thread or a multiprocessing
            # worker that raised, a loop that ended without close(); trial 37m: failed, with no reason)
            session._failure = ("the process exited with the run still open: close() was not called, or the training "
                                "ended on an exception that did not reach the interpreter (sys.exit, a thread's or a "
                                "multiprocessing worker's, which print their own traceback)")
        try:
            session.close("stopped" if stopped else "failed")
        except Exception as exc:  # (one run's trouble must not keep the others open)
            logger.warning("tripwire: closing %s at exit failed: %s: %s", session.out_dir, type(exc).__name__, exc)


def _watch_exit(session: Session) -> None:
    """Close ``session`` at exit if it is still open then (see :func:`_close_at_exit`), and end the
    process on SIGTERM through ``SystemExit`` where nothing else handles it (:func:`_install_sigterm`).
    In a ``multiprocessing`` worker the sessions are closed by its own exit too, which a forked
    worker leaves through ``os._exit``, past the interpreter's exit handlers (trial 37m: its records
    were lost and its run read ``running``)."""
    _OPEN.add(session)
    _MADE[id(session)] = (_PID[0], threading.get_ident())
    atexit.unregister(_close_at_exit)  # (exit handlers run last registered first)
    atexit.register(_close_at_exit)
    _close_at_worker_exit()
    _install_sigterm(session.framework)


_WORKER_FINALIZER: list[int] = []  # the pid of the process whose multiprocessing exit closes its sessions
_MADE: dict[int, tuple[int, int]] = {}
"""id of an open session -> the process (pid) and thread (ident) that made it: a forked child holds
copies of its parent's open sessions, which are not its own (see :func:`_made_here`), and
``Session._end_abandoned`` ends only a session of its own thread."""


_PID = [os.getpid()]
"""This process's pid, set again in a forked child (``os.getpid`` is a system call: a few
microseconds at every step that saves, cold)."""


def _note_pid() -> None:
    _PID[0] = os.getpid()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_note_pid)


def _made_here(session: Session) -> bool:
    """Whether this process made ``session`` (not a copy a forked child holds of its parent's)."""
    return _MADE.get(id(session), (None, None))[0] == _PID[0]


def _writing_here(session: Session) -> bool:
    """Whether ``session`` is this process's own and still writes its run."""
    return _made_here(session) and session.writer is not None and not session.writer.closed


def _held_on_stack(obj: Any) -> bool:
    """Whether a variable of a frame on this thread's stack (a script's globals included) holds ``obj``:
    a session its code still uses, or can close by name (see ``Session._end_abandoned``, whose own
    frame, the caller's, is left out)."""
    frame = sys._getframe(2)
    while frame is not None:
        if any(v is obj for v in frame.f_locals.values()):
            return True
        frame = frame.f_back
    return False


def _close_at_worker_exit() -> None:
    """In a ``multiprocessing`` worker, run :func:`_close_at_exit` when the worker ends (its
    ``_bootstrap`` runs the finalizers that have an exit priority, forked or spawned), once per
    process."""
    import multiprocessing
    import multiprocessing.util

    if multiprocessing.parent_process() is None or os.getpid() in _WORKER_FINALIZER:
        return
    _WORKER_FINALIZER[:] = [os.getpid()]
    multiprocessing.util.Finalize(None, _close_at_exit, exitpriority=100)


class _SigtermState:
    """What the SIGTERM handling of this process knows (see :func:`_install_sigterm`)."""

    def __init__(self) -> None:
        self.previous: Any = None  # the handler ours replaced (SIG_DFL), while ours is installed
        self.installed = False
        self.signum: int | None = None  # the signal received (SIGTERM), once one was
        self.closing = 0  # sessions closing now on the main thread (a SIGTERM then waits for them)
        self.deferred = False  # a SIGTERM came while a session closed: raised once it has closed
        self.exiting = False  # the interpreter is exiting (_close_at_exit): a SIGTERM then is not raised
        self.handled = threading.Event()  # _on_sigterm ran (in the main thread): see _sigterm_watchdog
        self.wakeup: tuple[int, int] | None = None  # the pipe the C-level handler writes the signal into


_TERM = _SigtermState()
_TERMINATED = "the process was asked to terminate: a scheduler's preemption, docker stop, kill"
#: The stop reason of a framework's fit that ``sys.exit()`` or ``sys.exit(0)`` ended from inside (a
#: callback, the model): the program's own end, not a failure (the run ends ``stopped``).
_EXITED = "SystemExit: 0: the program ended itself (sys.exit) inside the framework's loop, before its end"
_OWN_SIGTERM = frozenset({"lightning"})
"""Integrations whose framework handles SIGTERM itself (Lightning stops its loop at the batch's end
and raises its ``SIGTERMException``, which the callback's ``on_exception`` sees): no handler of ours."""


def _signal_name(signum: int | None) -> str:
    try:
        return signal.Signals(signum).name if signum is not None else "a signal"
    except ValueError:
        return f"signal {signum}"


def _on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM (a scheduler's preemption, ``docker stop``, ``kill``) while a session writes a run:
    ``SystemExit(128 + signum)`` in the main thread, so that ``with`` blocks and exit handlers run:
    the session closes, its writer writes what it holds and the end marker (``failed``, its
    ``stop_reason`` naming the signal), and the process ends with status 143. Nothing is flushed or
    joined here (a handler that waited on the writer thread could deadlock): the exception does it
    on its way out. A second SIGTERM gets the previous handler's behaviour (the default: the
    process ends at once). One that comes while a session closes waits until it has closed; one
    during the interpreter's exit is not raised (the process is ending); with no session open any
    more, the default behaviour."""
    _TERM.signum = signum
    _TERM.handled.set()
    if not _TERM.installed or not any(_made_here(s) for s in _OPEN):
        # (no session of this process open: a forked child holds copies of its parent's, which the
        # parent closes, and ends as the default handler ends it; trial 37m: it exited 143, not -15)
        _restore_sigterm(force=True)
        os.kill(os.getpid(), signum)  # (the default handler now: the process ends as it would have)
        return
    if _TERM.exiting:
        return
    if _TERM.closing:
        if _TERM.deferred:  # (a second one: the process ends at once, as documented; trial 38o)
            _restore_sigterm(force=True)
            os.kill(os.getpid(), signum)
            return
        _TERM.deferred = True
        return
    _restore_sigterm(watchdog=False)  # (the watchdog stays: it sees the process through its exit)
    raise SystemExit(128 + signum)


def _install_sigterm(framework: str) -> None:
    """Handle SIGTERM with :func:`_on_sigterm` while a session writes a run (trial 26i: a SIGTERM
    lost the last records and wrote no end marker, and the run read as a crash), where the
    process's SIGTERM handler is the default one and this is the main thread; a handler someone
    else installed (a user's, a framework's) is never replaced, and an integration whose framework
    handles SIGTERM (:data:`_OWN_SIGTERM`) gets none. :func:`_restore_sigterm` puts the previous
    one back when the last session closes."""
    if framework in _OWN_SIGTERM or threading.current_thread() is not threading.main_thread():
        return
    try:
        current = signal.getsignal(signal.SIGTERM)
        if current is _on_sigterm:  # (installed for a session still open, or inherited by a forked child)
            _TERM.installed = True
            _start_sigterm_watchdog()  # (a forked child's own: trial 38o, it had none)
            return
        if current is not signal.SIG_DFL:
            return
        _TERM.previous = signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError, AttributeError):  # (no SIGTERM here, or not allowed: nothing to do)
        return
    _TERM.installed = True
    # (installed anew after a SIGTERM whose SystemExit was caught, the training going on: the watchdog waits
    # for this handler's next run, not the last one's)
    _TERM.handled.clear()
    _start_sigterm_watchdog()


SIGTERM_GRACE = 3.0
"""Seconds a SIGTERM waits for the main thread to run :func:`_on_sigterm` before the watchdog ends the
process without it (see :func:`_sigterm_watchdog`)."""


def _start_sigterm_watchdog() -> None:
    """Have the C-level signal handler write the signals into a pipe (``signal.set_wakeup_fd``) that a
    daemon thread reads (:func:`_sigterm_watchdog`), where no one else uses the wakeup fd (asyncio's
    loop, IPython's kernel: then none, and a main thread blocked in native code waits as before)."""
    if _TERM.wakeup is not None:
        return
    try:
        r, w = os.pipe()  # (not inherited by an exec'd child)
        os.set_blocking(w, False)
    except (OSError, AttributeError):
        return
    try:
        old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except (ValueError, OSError, TypeError):
        os.close(r)
        os.close(w)
        return
    if old != -1:  # (someone else's: theirs stays)
        signal.set_wakeup_fd(old)
        os.close(r)
        os.close(w)
        return
    _TERM.wakeup = (r, w)
    threading.Thread(target=_sigterm_watchdog, args=(r,), name="tripwire-sigterm", daemon=True).start()


def _open_here() -> bool:
    """Whether a session this process made still writes its run."""
    return any(_writing_here(s) for s in list(_OPEN))


def _see_exit_through() -> None:
    """After the handler's ``SystemExit``: once the main thread has ended, a run still open means the
    interpreter waits for a thread that is not a daemon (a data loader's, a pool's), and runs the exit
    handlers that close the runs only after it ends, maybe never (trial 38o: the process outlived its
    SIGTERM, its run left ``running``; without a session the default handler ended it at once). A
    second later such runs are closed here, as at exit, and the process ends with status 143."""
    main = threading.main_thread()
    while main.is_alive():
        if not _open_here():
            return  # (closed as the exception unwound, or caught and training goes on: nothing to see)
        main.join(0.2)
    deadline = time.monotonic() + 1.0
    while _open_here() and time.monotonic() < deadline:
        time.sleep(0.05)
    if not _open_here():
        return
    _close_at_exit()
    os._exit(128 + signal.SIGTERM)


def _stop_sigterm_watchdog() -> None:
    """Undo :func:`_start_sigterm_watchdog` (the main thread, the last session closed): the wakeup fd
    back to none where it is still ours, the pipe closed (the thread then ends)."""
    wakeup, _TERM.wakeup = _TERM.wakeup, None
    if wakeup is None:
        return
    try:
        if signal.set_wakeup_fd(-1) not in (wakeup[1], -1):  # (another's set after ours: put back)
            signal.set_wakeup_fd(wakeup[1])
            _TERM.wakeup = wakeup
            return
    except (ValueError, OSError):
        _TERM.wakeup = wakeup
        return
    # (the thread closes the read end itself, once it reads the stop byte: closed here, its number could
    # be another file's by the time the thread reads it)
    with contextlib.suppress(OSError):
        os.write(wakeup[1], b"\0")
    with contextlib.suppress(OSError):
        os.close(wakeup[1])


def _forget_sigterm_watchdog_in_child() -> None:
    """A forked child shares its parent's pipe but not the thread that reads it: it writes no signal
    there (the parent's watchdog would take the child's SIGTERM for its own); a session it makes
    starts a watchdog of its own."""
    _TERM.handled = threading.Event()
    _TERM.signum = None
    if _TERM.wakeup is not None:
        with contextlib.suppress(ValueError, OSError):
            signal.set_wakeup_fd(-1)
        for fd in _TERM.wakeup:
            with contextlib.suppress(OSError):
                os.close(fd)
        _TERM.wakeup = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_sigterm_watchdog_in_child)


def _sigterm_watchdog(fd: int) -> None:
    """A SIGTERM whose Python handler the main thread does not run within :data:`SIGTERM_GRACE`
    seconds: the main thread is blocked in native code (a DDP rank in a collective whose peer stalls
    or died, a deadlocked ``recv``), where Python runs no handler until it returns, which may be never
    (trial 38n: a rank in ``all_reduce`` outlived its SIGTERM by a minute, a deadlocked job by
    torchrun's 30 s grace, then SIGKILL, and its run read ``running``, killed). Each open session of
    this process ends here: what its writer holds is written and the end marker says ``failed`` with
    the signal as its ``stop_reason`` (its rules do not run: the main thread holds the training); then
    the process ends with status 143, as the handler would have ended it."""
    while True:
        try:
            data = os.read(fd, 64)
        except OSError:
            return
        if not data or 0 in data:  # (the write end closed, or the stop byte: _stop_sigterm_watchdog)
            with contextlib.suppress(OSError):
                os.close(fd)
            return
        if signal.SIGTERM not in data:
            continue
        if _TERM.handled.wait(SIGTERM_GRACE):
            _see_exit_through()
            continue
        _TERM.exiting = True  # (the handler, should it run after all, raises nothing now)
        reason = (f"SIGTERM: {_TERMINATED}; the main thread was blocked (native code: a collective, a wait) and ran "
                  f"no handler within {SIGTERM_GRACE:g} s, so the records queued were written and the rules did not "
                  f"run")
        for session in list(_OPEN):
            if not _writing_here(session):
                continue
            writer = session.writer
            closer = threading.Thread(target=writer.close, daemon=True,
                                      args=("failed", {"findings": len(session.findings), "stop_reason": reason}))
            closer.start()
            closer.join(10.0)  # (a writer that cannot finish does not keep the process alive)
        logger.warning("tripwire: %s: the main thread did not run its handler within %g s (blocked in native code); "
                       "the open runs were ended failed, and the process exits", reason.split(";")[0], SIGTERM_GRACE)
        os._exit(128 + signal.SIGTERM)


def _restore_sigterm(force: bool = False, watchdog: bool = True) -> None:
    """Put back the SIGTERM handler ours replaced, where ours is still the one installed (one
    installed after it, which may call it, stays; ``force``: ours goes whatever replaced it), and stop
    the watchdog (``watchdog=False``: it stays, the handler's own call: see :func:`_sigterm_watchdog`)."""
    if not _TERM.installed and not force:
        return
    _TERM.installed = False
    if threading.current_thread() is not threading.main_thread():
        return
    if watchdog:
        _stop_sigterm_watchdog()
    try:
        if force or signal.getsignal(signal.SIGTERM) is _on_sigterm:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if _TERM.previous is None else _TERM.previous)
    except (ValueError, OSError):
        pass
_SELECT_CACHE = 100_000  # names remembered per set of due collections
_OFFERED_NAMES = 64
"""Names remembered per kind offered, for messages: :meth:`Session._unmatched_collections` ranks them
by their likeness to a collection's patterns (the first 4 are listed where a kind went nowhere)."""
BUFFER_LIMIT = 1024
"""Every-step values kept between save steps before the session writes them anyway (one host copy
per ``BUFFER_LIMIT`` steps when saves are rarer than that)."""
QUIET_SCAN = 1024
"""How far :meth:`Session.quiet_until` looks ahead for the next step with something to save."""


class _Kept(NamedTuple):
    """A value of an ``every_step`` collection kept at a step that saved nothing (yet)."""

    step: int
    global_step: int
    wall_time: float
    name: str
    tensor: Any
    cols: tuple[Collection, ...]


_KEPT_STEP = operator.itemgetter(0)
"""A :class:`_Kept`'s step (a sort key that costs no Python call per value)."""


class RuleReads:
    """What a rule of the user's is given as the history in a session: the session's
    :class:`History` itself (every attribute and method is its), which notes what the rule reads:
    ``reads``, the ``(tensor, reduction or array kind, mode)`` of its value reads (``series``,
    ``finite_series``, ``latest``, ``value``, ``array``, ``histogram``, ``array_steps``,
    ``array_steps_between``), and ``listed``, the collections it lists (``tensor_names(collection)``).
    A set insertion a read: the session says at :meth:`Session.close` what such a rule read that the
    run never held (trial 31f F1: a rule reading gradients it did not ask for never fired, and nothing
    said so), and ``check_rule`` what it reads that its ``requirements()`` do not ask for. Built-in
    rules read the history itself (their requirements are tested)."""

    __slots__ = ("_history", "reads", "listed")

    def __init__(self, history: History) -> None:
        object.__setattr__(self, "_history", history)
        object.__setattr__(self, "reads", set())
        object.__setattr__(self, "listed", set())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._history, name)

    def __setattr__(self, name: str, value: Any) -> None:  # (a helper's cache on the history: the history's)
        setattr(self._history, name, value)

    def __repr__(self) -> str:
        return repr(self._history)

    def _read(self, tensor: Any, what: Any, mode: Any) -> None:
        if type(tensor) is str and len(self.reads) < _READS_NOTED:
            self.reads.add((tensor, str(what), "any" if mode is None else str(mode)))  # (None: its own mode)

    def series(self, tensor: str, reduction: str = "raw", mode: str | None = None, worker: int | None = None) -> Any:
        self._read(tensor, reduction, mode)
        return self._history.series(tensor, reduction, mode, worker)

    def finite_series(self, tensor: str, reduction: str = "raw", mode: str | None = None, worker: int | None = None) -> Any:
        self._read(tensor, reduction, mode)
        return self._history.finite_series(tensor, reduction, mode, worker)

    def latest(self, tensor: str, reduction: str = "raw", mode: str | None = None, worker: int | None = None) -> Any:
        self._read(tensor, reduction, mode)
        return self._history.latest(tensor, reduction, mode, worker)

    def value(self, tensor: str, reduction: str, step: int, mode: str | None = None, worker: int | None = None) -> Any:
        self._read(tensor, reduction, mode)
        return self._history.value(tensor, reduction, step, mode, worker)

    def array(self, tensor: str, step: int, kind: str = "raw", mode: str = "train", worker: int | None = None) -> Any:
        self._read(tensor, f"array {kind}", mode)
        return self._history.array(tensor, step, kind, mode, worker)

    def histogram(self, tensor: str, step: int, mode: str = "train", worker: int | None = None) -> Any:
        self._read(tensor, "histogram", mode)
        return self._history.histogram(tensor, step, mode, worker)

    def array_steps(self, tensor: str, kind: str = "raw", mode: str = "train", worker: int | None = None) -> Any:
        self._read(tensor, f"array {kind}", mode)
        return self._history.array_steps(tensor, kind, mode, worker)

    def array_steps_between(self, tensor: str, after: int, upto: int, kind: str = "raw", mode: str = "train",
                            worker: int | None = None) -> Any:
        self._read(tensor, f"array {kind}", mode)
        return self._history.array_steps_between(tensor, after, upto, kind, mode, worker)

    def tensor_names(self, collection: str | None = None, regex: str | None = None, **kwargs: Any) -> Any:
        if type(collection) is str and len(self.listed) < _READS_NOTED:
            self.listed.add(collection)
        return self._history.tensor_names(collection, regex, **kwargs)


#: the collection a tensor's name says it is of, by the names the integrations give (docs/rules.md,
#: "Names the rules read"); a layer's ``/output`` is in ``activations`` or ``relu_outputs``: not said
_NAME_COLLECTIONS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^gradients/"), "gradients"),
    (re.compile(r"^(?:update_ratio|lr|clip)/|^loss_scale$"), "optimizer"),
    (re.compile(r"/input$"), "activation_inputs"),
    (re.compile(r"^trees/"), "trees"),
    (re.compile(r"^feature_importance/"), "feature_importance"),
    (re.compile(r"^labels$"), "labels"),
    (re.compile(r"^predictions$"), "predictions"),
)


def requirement_text(collection: str, reads: Iterable[str], yaml: bool = False) -> str:
    """The requirement that asks for what a rule read of ``collection`` (``reads``: reductions,
    ``histogram``, ``array <kind>``, as :class:`RuleReads` notes them), as Python
    (``Requirement('gradients', reductions=('l2',))``) or as YAML's mapping (``{collection: gradients,
    reductions: [l2]}``)."""
    reads = set(reads)
    reductions = sorted(r for r in reads if not r.startswith("array ") and r != "histogram")
    raw_arrays = any(r == "array raw" for r in reads)
    histogram = any(r in ("histogram", "array hist_counts", "array hist_edges", "array histogram") for r in reads)
    if yaml:
        parts = [f"collection: {collection}"] + ([f"reductions: [{', '.join(reductions)}]"] if reductions else []) + \
            (["raw_arrays: true"] if raw_arrays else []) + (["histogram: true"] if histogram else [])
        return "{" + ", ".join(parts) + "}"
    parts = [repr(collection)] + ([f"reductions={tuple(reductions)!r}"] if reductions else []) + \
        (["raw_arrays=True"] if raw_arrays else []) + (["histogram=True"] if histogram else [])
    return f"Requirement({', '.join(parts)})"


def _collection_of_name(tensor: str) -> str | None:
    """The built-in collection ``tensor``'s name says it is of (:data:`_NAME_COLLECTIONS`), or None."""
    return next((col for pattern, col in _NAME_COLLECTIONS if pattern.search(tensor)), None)


_READS_NOTED = 4096
"""The most distinct reads (and collections listed) a :class:`RuleReads` notes: a rule that reads
more names than that is said of by the first ones."""


def _is_complex(tensor: Any) -> bool:
    """Whether a value offered is complex: a Python or numpy complex number, a tensor or an array of
    a complex dtype (torch's ``is_complex``, TensorFlow's ``is_complex``, numpy's and JAX's kind
    ``'c'``), or a list or tuple holding a complex number."""
    if isinstance(tensor, complex):  # (numpy's complex128 is one too)
        return True
    dtype = getattr(tensor, "dtype", None)
    if dtype is None:
        return isinstance(tensor, (list, tuple)) and any(
            isinstance(v, complex) or (isinstance(v, np.generic) and v.dtype.kind == "c") for v in tensor)
    return getattr(dtype, "is_complex", False) is True or getattr(dtype, "kind", "") == "c"


def _magnitude(tensor: Any) -> Any:
    """A complex value's magnitude ``|z|`` (a new real tensor or array of the same framework:
    ``abs()``, which torch, numpy, JAX and TensorFlow take as the complex magnitude; a list or tuple
    of numbers through numpy), anything else as it is. Its L2 norm is the complex norm, as the
    Lightning callback and ``capture_activations`` store a complex tensor (trial 30g F4: the
    hand-written loop's ``plan.add`` refused one, and a model with an FFT filter failed at step 0)."""
    if not _is_complex(tensor):
        return tensor
    if isinstance(tensor, (list, tuple)):
        return np.abs(np.asarray(tensor)).tolist()
    return abs(tensor)


@dataclass
class StepPlan:
    """What to capture at one step. Falsy when nothing is due."""

    session: Session
    mode: str
    step: int
    due: tuple[Collection, ...]
    _kinds: frozenset[str] = field(default=frozenset())
    _pending: list[tuple[str, Any, tuple[Collection, ...]]] = field(default_factory=list)
    _index: dict[str, int] = field(default_factory=dict)
    _selected: dict[tuple[str, str], tuple[Collection, ...]] = field(default_factory=dict)
    """select() results, shared by every plan with the same due collections (the same names are
    offered at every step, so matching runs once per name and kind, not once per step)."""
    _every: tuple[Collection, ...] = ()
    """``every_step`` collections whose save range holds this (train) step."""
    _ended: bool = False
    """:meth:`Session.end_step` ran: an offer now would never be saved (:class:`StepEndedError`)."""
    _counted_from: int = 0
    """The session's step counter of this mode before :meth:`Session.begin_step` counted this step
    (what :meth:`Session.suspend_step` sets it back to)."""
    _suspended: bool = False
    """:meth:`Session.suspend_step` took this step out of its session; :meth:`Session.resume_step`
    has not put it back yet."""

    def __bool__(self) -> bool:
        return bool(self.due)

    @property
    def collections(self) -> list[str]:
        return [c.name for c in self.due]

    def wants(self, kind: str) -> bool:
        """Could a tensor of this kind be saved now? (Adapters skip extraction when False.) A kind
        that is no built-in collection name is a :class:`ConfigError`, as in :meth:`add`."""
        try:
            if kind in self._kinds:
                return True
        except TypeError:  # (unhashable: named below)
            pass
        _check_kind(kind, "wants")  # (trial 24f: wants('gradeints') was a silent False)
        return False

    def keeps(self, kind: str) -> bool:
        """Could a tensor of this kind be saved now or kept for the next save step? True for
        ``losses`` at every train step when the losses collection has ``every_step`` (the default):
        adapters offer the training loss then, as a tensor, without converting it. A kind that is no
        built-in collection name is a :class:`ConfigError`, as in :meth:`add`."""
        if self._keeps(kind):
            return True
        _check_kind(kind, "keeps")  # (trial 24f: keeps('loss') was a silent False: the kind is 'losses')
        return False

    def _keeps(self, kind: Any) -> bool:
        try:
            return kind in self._kinds or (bool(self._every) and kind in self.session._every_kinds)
        except TypeError:  # (unhashable: the caller names it)
            return False

    def select(self, name: str, kind: str) -> tuple[Collection, ...]:
        """The due collections that a tensor ``name`` offered as ``kind`` would go to (``()``: skip
        it). A question: nothing is offered, and a hand-written loop hears no "is not captured"
        WARNING for it (that is said of what :meth:`add` is given; trial 28e F3: a ``select`` of a
        weight the config does not capture warned that it was "offered as weights"). The names asked
        about count among the names offered that :meth:`Session.close`'s messages on a collection that
        matched nothing list (the integrations ask before they extract a tensor)."""
        key = (name, kind)
        hit = self._selected.get(key)
        if hit is None:
            _check_offer(name, kind)  # (once per name and kind: the cache holds only valid pairs)
            hit = tuple(c for c in self.due if c.matches(name, kind)) if kind in self._kinds else ()
            self.session._note_offer(name, kind, self.due, hit)
            if len(self._selected) < _SELECT_CACHE:
                self._selected[key] = hit
        return hit

    def add(self, name: str, tensor: Any, kind: str) -> bool:
        """Offer one tensor; returns whether it will be saved. Offering a name again at the step
        with the same tensor (e.g. a ReLU output as ``activations`` and as ``relu_outputs``), or an
        equal value, keeps one entry, in the union of the collections; another value under a name
        offered already at this step is a :class:`ConfigError` naming the tensor and the step (it
        replaced the first without a word: trial 26c). A tensor of an ``every_step`` collection that is not due now
        is kept (a copy on its device: a buffer the loop reuses keeps no later value) and saved at its
        step with the next record. ``None`` (the
        ``.grad`` of a frozen or unused parameter) is no value: skipped, ``False``. Anything else that
        is no tensor or array (with a ``shape`` and a ``dtype``), number or list of numbers (a nested
        list: all of one length; a ragged one, ``[1.0, [2.0, 3.0]]``, makes no array: trial 33f F1) is a
        :class:`ConfigError` naming the tensor, what it got and what is accepted, here, before the
        step holds it (an LSTM's ``(output, (h, c))``: offer ``output[0]``; a ``PackedSequence``: its
        ``.data``; trial 28d F2); a session given a ``backend`` of its own passes other objects to it.
        A complex value (a torch tensor or numpy array of a complex dtype, any framework's whose
        dtype says complex, a complex number, a list holding one) is taken as its magnitude ``|z|``
        (``abs()``: a new real tensor, whose L2 norm is the complex norm) under the same name, as the
        Lightning callback and ``capture_activations`` store one (trial 30g F4: it was refused, and
        the README's loop failed at step 0 for a model with an FFT filter); offer ``.real`` and
        ``.imag`` under two names to keep the parts.

        The tensor is read when the step ends (:meth:`Session.end_step`), not here: a tensor changed
        in place in between (gradients clipped, weights stepped) is recorded as it is then; offer a
        ``.clone()``, or end the step first, to record it as it is now."""
        if tensor is None:
            return False
        if self._ended:
            raise StepEndedError(
                f"add({name!r}): the {self.mode} step {self.step} has ended (end_step ran, or the next begin_step), "
                f"so this value would never be saved; offer it before end_step(), or to the next step's plan")
        if type(tensor) not in self.session._value_types:
            _check_value(name, tensor, self.session)
        cols = self.select(name, kind)
        if not cols:
            session = self.session
            if session.framework == "python" and kind not in session._unkept_kinds and (
                    (name, kind) not in session._taken_elsewhere):
                session._say_uncaptured(name, kind)  # (an offer: said here, not by select, trial 28e F3)
            return bool(self._every) and session._keep(self, name, tensor, kind)
        tensor = _magnitude(tensor)  # (a complex value: its magnitude |z|, under the same name: trial 30g F4)
        if name not in self.session._hist_of:
            self.session._histogram_of(name, kind)
        i = self._index.get(name)
        if i is None:
            self._index[name] = len(self._pending)
            self._pending.append((name, tensor, cols))
        else:
            _, first, old = self._pending[i]
            if first is not tensor and not _same_value(first, tensor):
                raise _offered_twice(name, self.mode, self.step)
            self._pending[i] = (name, tensor, old + tuple(c for c in cols if c not in old))
        return True

    def add_many(self, tensors: Mapping[str, Any] | Iterable[tuple[str, Any]], kind: str) -> int:
        if not self._keeps(kind):
            _check_kind(kind, "add_many")
            return 0
        items = tensors.items() if isinstance(tensors, Mapping) else tensors
        return sum(self.add(n, t, kind) for n, t in items)


class Session:
    """Capture, store and rule evaluation for one worker of one run.

    ``config``: a YAML path, a mapping, a :class:`Config` or None; ``overrides``: keyword overrides
    (``out_dir=``, ``rules=``, ``save_interval=`` ...). ``backend``: the framework's reduction
    backend (default: numpy, or the torch backend once a torch tensor is offered). ``rank``/``world_size``: this worker in a distributed job.
    ``provides``: the kinds the calling integration captures (``None``: anything may come), each a
    built-in collection name (a string: a list of one, as a collection's ``kinds``); a rule or
    collection that nothing would feed is then a :class:`ConfigError` (see :func:`check_config`).
    ``write``: whether this worker writes the run (``None``, the default: as ``writer.ranks`` says;
    ``True`` or ``False`` else, a bool). ``keep_arrays``: how many raw arrays and histograms per
    tensor the in-process history keeps for the rules, the last ones (an integer >= 1, default 8;
    ``None``: all); the run keeps every one it saves.
    """

    def __init__(
        self,
        config: str | os.PathLike[str] | Mapping[str, Any] | Config | None = None,
        *,
        framework: str = "python",
        rank: int = 0,
        world_size: int = 1,
        backend: ReductionBackend | None = None,
        write: bool | None = None,
        keep_arrays: int = 8,
        provides: Iterable[str] | None = None,
        **overrides: Any,
    ) -> None:
        check_overrides("Session", overrides, keyword_parameters(Session))  # (trial 24h: a TypeError naming Session)
        with unregistered_rule_notes_muted():  # (build_rules below refuses the name: said once, trial 26c)
            self.config = load_config(config, **overrides)
        self.framework = _check_framework(framework)
        # (numpy's integers are integers, stored as int: trial 24f)
        self.world_size = world_size = check_int(world_size, "world_size", minimum=1)  # (rank='0' raised a bare TypeError)
        self.rank = rank = check_int(rank, "rank", minimum=0, maximum=self.world_size - 1)
        _check_backend(backend)
        write, keep_arrays = check_write_and_keep_arrays(write, keep_arrays)
        provides = _check_provides(provides)
        if world_size > 1 and not (self.config.out_dir or self.config.name) and (write is None or write):
            # (each rank would claim a timestamped directory of its own: one run split in several)
            raise ConfigError(
                f"out_dir: none given for rank {rank} of a {world_size}-rank job: each rank would claim a new "
                f"tripwire-runs/run-<date>-<time> of its own and the run would be split, one worker per directory; "
                f"accepted: the same out_dir= (or name=) on every rank (the Lightning callback shares rank 0's for you)")
        ranks = self.config.writer.ranks
        if ranks != "all" and write is None and not any(r < world_size for r in ranks):
            raise ConfigError(f"writer.ranks: got {list(ranks)}, but this job has ranks 0 to {world_size - 1} "
                              f"(world size {world_size}): no rank would write, and the run would be lost; accepted: "
                              f"'all' or a list holding one of them (e.g. [0])")
        self.backend: ReductionBackend = backend or NumpyBackend()
        self._auto_backend = backend is None  # the first framework tensor may pick one (see _backend_for)
        self._made_without_backend = backend is None  # (numpy's or torch's then: tensors and arrays only)
        self._numpy = NumpyBackend()
        # the types StepPlan.add took as values already (see _check_value): a set lookup at every later offer
        self._value_types: set[type] = {float, int}
        # (what check_config checks besides: the actions and collections below, resolved once here)
        self.provides: list[str] | None = provides
        self.rules: list[Rule] = _feedable(self.config, build_rules(self.config.rules), framework, provides)
        if not self.rules:
            logger.info("tripwire: no rules configured: capturing %s, evaluating nothing (rules=['default'] "
                        "switches on the default set)", ", ".join(self.config.collections) or "nothing")
        self._default_actions = [resolve_action(a, f"actions[{i}]") for i, a in enumerate(self.config.actions)]
        self._rule_actions: list[list[Action]] = [
            [resolve_action(a, f"{config_path(r)}.actions[{i}]") for i, a in enumerate(r.actions)]
            if r.actions is not None
            else self._default_actions
            for r in self.rules
        ]
        self.collections = _effective_collections(self.config, self.rules, self.framework)
        #: whether the ``optimizer`` kind is captured in full (learning rates, and update ratios, which copy
        #: the parameters at each save step) or the loss scale alone (:func:`optimizer_read_in_full`): what
        #: the integrations read once, instead of working it out at each save step
        self.optimizer_in_full: bool = optimizer_read_in_full(self.config.collections.values(), self.rules)
        cut = _rules_cut_by_end_step(self.config, self.rules, self.collections)
        if cut is not None:
            logger.warning(cut)
        self._schedule = self._build_schedule()
        # every_step collections and their train save configs; values kept between save steps
        self._every_step = tuple(
            (c, self._mode_save(c, "train")) for c in self.collections.values() if c.every_step
        )
        self._every_step = tuple((c, m) for c, m in self._every_step if m.enabled)
        self._every_all = tuple(c for c, _ in self._every_step)
        self._every_kinds = frozenset(k for c in self._every_all for k in (c.kinds or ()))
        # whether an every_step collection's range starts or ends somewhere (where the kept values change)
        self._every_bounded = any(m.start_step or m.end_step is not None or m.steps for _, m in self._every_step)
        self._kept: dict[tuple[int, str], _Kept] = {}
        self._every_sets: dict[tuple[bool, ...], tuple[Collection, ...]] = {}
        # per mode: the last range of quiet steps found by quiet_until, and its every_step collections
        self._quiet: dict[str, tuple[int, int, tuple[Collection, ...]]] = {}
        self._keep_cols: dict[tuple[str, str, int], tuple[Collection, ...]] = {}  # (name, kind, id(every)) -> cols
        self._due: dict[Any, tuple[Collection, ...]] = {}  # interned due tuples (kept alive: ids are keys below)
        self._plans: dict[int, tuple[frozenset[str], dict[tuple[str, str], tuple[Collection, ...]]]] = {}
        self._merged: dict[tuple[int, ...], Any] = {}
        # per tensor, the collection whose histogram bins and range it keeps for the whole run (None: no
        # collection of it keeps a histogram): see _histogram_of
        self._hist_of: dict[str, Collection | None] = {}
        self.history = History(keep_arrays=keep_arrays)
        self.history.every_step = {c.name: m.interval for c, m in self._every_step}
        self.history.every_step_ranges = {c.name: (m.start_step, m.end_step, tuple(m.steps)) for c, m in self._every_step}
        self.history.configured_collections = set(self.collections)  # (tensor_names of one with none yet: [])
        self.findings: list[Finding] = []
        self._rule_reads: dict[int, RuleReads] = {}  # (what each rule of the user's read: _reads_for)
        self.stopped_by: Finding | None = None
        # an integration judges steps after its training ended (XGBoost's last round, at after_training):
        # a stop asked then is said as one that stopped nothing (see _say_stop)
        self._judging_after_end = False
        # the stop asked in this training (a rule's stop_training or raise, a stop requested by tripwire
        # watch): every later decision holds it until close() or new_training() (trial 26c: one asked at
        # an eval step came back from that step's decision alone, and a loop reading the train steps'
        # decisions trained on)
        self._stop_held: Finding | None = None
        self._fired: set[int] = set()
        self._disabled: set[int] = set()
        # rules the integration switched off for this training, with why (switch_off): in the worker
        # meta file's ``switched_off``, where tripwire watch reads them (trial 26h)
        self._switched_off: dict[str, str] = {}
        self._muted = False  # (inside _unjudged: steps are stored, not judged)
        self._warned_open = False  # begin_step with a step still open (a hand-written loop's end_step forgotten)
        self._warned_unopened = False  # end_step with no step open (a hand-written loop's begin_step forgotten)
        self.mode_steps: dict[str, int] = {m: 0 for m in MODES}
        # the trainings through this session (new_training): per training, the first step of each
        # mode, when it began, whether it continued the one before, its planned length; written to
        # the worker meta file as ``trainings`` once there is a later one (tripwire watch rearms its
        # rules there as the session did: trial 25e)
        self._trainings: list[dict[str, Any]] = [{"steps": {}, "began": None, "continued": False,
                                                  "planned_steps": None}]
        self._batch_saved: set[str] = set()  # modes with at least one save step (summaries aside)
        self._batch_ran: set[str] = set()  # modes with at least one batch in this session (summaries aside)
        self._summarized: set[str] = set()  # modes with a summary record in this session
        self._warned_repeat = False  # a train step that did not increase was named
        # a resumed session whose run holds a validation taken right at the checkpoint (before any later
        # train step): (the checkpoint's eval counter, the eval step after that validation's); settled
        # at the first step after the resume (see _settle_resumed_evals; trial 26h)
        self._evals_at_checkpoint: tuple[int, int, int] | None = None
        # what close() (or name_unread_inputs) said, by what each is about (_said_key): said once a run
        # in this process (state_dict carries it to the next stage's session: trial 26a)
        self._named_early: set[str] = set()
        self.stop_reason: str | None = None
        """Why training stopped when no rule stopped it (the tuner stopped a trial: the integration
        says so here); written to the end marker as ``stop_reason``."""
        self._offered: dict[str, list[str]] = {}  # kind -> the first few names offered as that kind
        self._unkept_kinds: set[str] = set()  # kinds offered that no collection takes (said once: _say_uncaptured)
        # (name, kind) offered to add() at a step where no due collection took it, that a collection takes at
        # other steps (see _say_uncaptured: checked once a name)
        self._taken_elsewhere: set[tuple[str, str]] = set()
        self._unavailable: set[str] = set()  # kinds the integration said it cannot offer (see unavailable())
        self._empty_causes: dict[str, str] = {}  # collection -> why the integration knows it is empty (empty_because())
        self._failed = False  # the training ended failed (close): so does a later evaluation's close, until new_training
        # the exception the training failed with, where close() was told it (__exit__, the exit handler);
        # else close("failed") reads the one being handled (an integration's except block, on_exception)
        self._error: BaseException | None = None
        # why the training failed (exception_summary of that exception), kept for a later close of the
        # same training (an evaluation after it: the run stays failed, with its reason); see close()
        self._failure: str | None = None
        #: The status the end marker holds after :meth:`close` (``complete``, ``stopped``, ``failed``;
        #: None before, and again once :meth:`reopen` writes on).
        self.closed_as: str | None = None
        self._matched: set[str] = set()  # collections that took at least one tensor
        self._missed: set[str] = set()  # collections due when a tensor of their kinds came, not taking it
        self.global_step = 0
        self._plan: StepPlan | None = None
        # a save step reduced in the background (backend.reduce_groups_async): its records, how to
        # complete them, its step and mode; settled (stored, rules run) before any other reduction
        self._inflight: tuple[list[StepRecord], Callable[[], None], int, str, int] | None = None
        self._inflight_names: list[list[str]] = []  # the tensor names of each group handed to the backend
        self._unacted: list[Finding] = []  # findings of a settled step, acted on at the next step's end
        # the last kept train step written with another mode's record and not judged by the train
        # rules since: close() judges it (the fit's last steps, when a validation came after them)
        self._train_unjudged: int | None = None
        self._unjudged_cols: frozenset[str] = frozenset()  # (the collections of those kept values)
        # kept every-step values that state_dict() wrote before their save step, judged where they would
        # have been had they stayed kept (see _judge_kept): their last step, their collections, whether
        # all are finite; and how many they are (they count towards BUFFER_LIMIT)
        self._written_early: tuple[int, frozenset[str], bool] | None = None
        self._early_count = 0
        self.training = False
        """Set by an integration while a training runs (a ``fit`` began and has not ended): a session
        still open at exit that never began a step ends ``failed`` then, with a warning (the training
        raised before its first batch), not ``complete`` without a word."""
        self.background_reduction = self.framework != "python"
        """Whether a save step of large CPU tensors may be reduced off the training thread
        (``reduce_groups_async``), its records written and its rules run when the next step ends, a
        stop they ask for in that step's decision: what the Lightning and Keras callbacks take (a
        rule's stop comes one step late, docs/lightning.md). False for a hand-written loop (framework
        ``"python"``): :meth:`end_step` reduces and judges the step itself, so its decision can stop
        the loop before ``optimizer.step()`` applies what the step found (trial 42d: a NaN gradient
        of a 150,000-element tensor was applied before the stop came); set it True to trade that for
        the training thread's time at save steps, with :meth:`settle` where the decision is needed."""
        self.live_tensors = False
        """Set by an integration that calls :meth:`fence` before anything may change a captured
        tensor in place (the next batch, optimizer step, ``zero_grad``): the background reduction
        then reads the tensors themselves instead of a copy made on the training thread."""
        self._declared: set[tuple[str, str]] = set()
        self._declared_sets: set[tuple[str, int]] = set()  # (name, id(collections)) of kept values declared
        self._stop_checked = 0.0
        self._stop_requests_read: set[str] = set()  # stop requests honoured or ignored (their JSON)
        # a resumed session: the findings the run holds of this worker, (rule, worker, mode, step),
        # which it does not write again when it finds them again (see _found_again; trial 26k)
        self._held_before: set[tuple[str, int, str, int]] = set()
        #: the checks' findings of the run this session continues (see _check_held), read at its first check:
        #: (rule, worker, mode, source, message) and (rule, worker, mode, source, step)
        self._checks_held: set[tuple[str, int, str, str, str | int]] | None = None
        # this session continues the training whose records the run holds (load_state_dict, continues()),
        # not a training of its own appended to the run (see _check_held; trial 28i F2)
        self._continuing = False
        do_write = self.config.writer.writes(rank) if write is None else write
        # (a session that writes nothing claims no default directory: it would stay empty)
        self.out_dir: Path = (self.config.resolved_out_dir() if do_write or self.config.out_dir or self.config.name
                              else Path(DEFAULT_RUNS_DIR) / "not-written")
        # the worker meta file of an earlier training in this out_dir, read before the writer replaces
        # it: kept as that training's facts if this one turns out to be a training of its own (trial 26i)
        prior = _worker_meta(self.out_dir, rank) if do_write else None
        self._earlier_end: str | None = None  # (the end status of the earlier training: _open_writer reads it)
        self._earlier_reason: str | None = None  # (and its stop_reason)
        self._evaluation = False  # (an evaluation appended to the run: count_on; its close keeps the run's end)
        self.writer: RunWriter | None = self._open_writer() if do_write else None
        self._prior_meta: dict[str, Any] | None = prior if self.writer is not None and self.writer.appending else None
        # a rank that writer.ranks leaves out, in a run whose directory it knows (out_dir or name: the
        # one the writing ranks share): its findings are written to the run, in a file of its own
        # (trial 21f: a rank-1 finding of a hand-written DDP loop was in rank 1's log alone)
        self._findings_file: Path | None = (
            self.out_dir / FINDINGS_DIR / f"rank-{rank:05d}.jsonl"
            if write is None and not do_write and world_size > 1 and (self.config.out_dir or self.config.name) else None)
        if self.writer is not None:
            _watch_exit(self)
        self._bind_actions()
        # a new session writing after records already in its shard: named once, at its first step,
        # unless load_state_dict says it continues that run (a resumed fit)
        self._appending = self.writer is not None and self.writer.appending

    def _bind_actions(self) -> None:
        """Tell the actions that send findings away from the run (``notify``, a custom action with a
        ``run`` parameter: :attr:`Action.wants_run`) where they are made: the run's directory and id,
        this host and process, the world size, the framework (trial 26c: an SNS message held the
        finding's line alone, and a topic shared by a team's trainings could not tell which job to
        look at; trial 29j F8: a custom action got the finding alone)."""
        actions = [*self._default_actions, *(a for acts in self._rule_actions for a in acts)]
        if not any(a.wants_run for a in actions):
            return
        known = self.writer is not None or bool(self.config.out_dir or self.config.name)
        run_id = None
        if known:
            try:
                run_id = json.loads((self.out_dir / RUN_FILE).read_text(encoding="utf-8")).get("run_id")
            except (OSError, ValueError, AttributeError):  # (not written yet by the rank that writes it)
                run_id = None
        bind_run(actions, RunContext(
            run=str(self.out_dir.resolve()) if known else "none (this session writes no run)",
            run_id=None if run_id is None else str(run_id), host=socket.gethostname(), pid=os.getpid(),
            world_size=self.world_size, framework=self.framework))

    # ----------------------------------------------------------------------------------- steps
    def _mode_save(self, c: Collection, mode: str) -> ModeSaveConfig:
        """How collection ``c`` is saved in ``mode``: its own save config, else the top-level one."""
        return (c.save or self.config.save).for_mode(mode)

    def _build_schedule(self) -> dict[str, list[tuple[Any, tuple[Collection, ...]]]]:
        """Per mode: collections grouped by their save config (each config is checked once a step)."""
        schedule: dict[str, list[tuple[Any, tuple[Collection, ...]]]] = {}
        for mode in MODES:
            groups: dict[Any, list[Collection]] = {}
            for c in self.collections.values():
                groups.setdefault(self._mode_save(c, mode), []).append(c)
            schedule[mode] = [(cfg, tuple(cols)) for cfg, cols in groups.items() if cfg.enabled]
        return schedule

    def due_collections(self, mode: str, step: int, since: int | None = None) -> tuple[Collection, ...]:
        """Pure: the collections due at ``step`` of ``mode``; with ``since`` (train steps only, where
        the steps ``since`` to ``step - 1`` were never taken: a manual-optimization fit whose global
        step advances by several optimizer steps a batch), those due at any step from ``since`` to
        ``step`` too, so that a save due at a skipped step comes at the first step after it (trial
        42a: a GAN stepping 6 optimizers a batch saved every 30 steps under ``save_interval=10``)."""
        if since is None or mode != "train" or not 0 < since < step:
            flags = tuple(cfg.should_save(step) for cfg, _ in self._schedule[mode])
        else:
            flags = tuple(_due_between(cfg, since, step) for cfg, _ in self._schedule[mode])
        return self._interned((mode, flags), lambda: tuple(
            c for (_, cols), due in zip(self._schedule[mode], flags) if due for c in cols))

    def _interned(self, key: Any, make: Callable[[], tuple[Collection, ...]]) -> tuple[Collection, ...]:
        """One tuple object per distinct set of due collections (plans with the same set share
        their select() cache)."""
        due = self._due.get(key)
        if due is None:
            due = self._due[key] = make()
        return due

    def begin_step(self, mode: str = "train", step: int | None = None, *, summary: bool = False) -> StepPlan:
        """Start a step; ``step=None`` counts steps of ``mode`` itself. ``summary=True`` (epoch-level
        values that must not be skipped): every collection whose save range in ``mode`` holds the step
        is due, whatever its interval: one enabled there, with ``start_step <= step < end_step`` or the
        step among its ``steps`` (trial 27d: the start and end step were overridden too, where the docs
        said only the interval)."""
        if mode not in MODES:
            _bad_mode(mode)
        if summary is not False and summary is not True:  # (trial 24f: summary="yes" was taken as true)
            raise ConfigError(f"begin_step: summary={summary!r}; accepted: True or False")
        if self.writer is not None and self.writer.closed:  # (its steps were taken, then lost at a save step)
            raise StoreClosedError(f"begin_step: the run {str(self.out_dir)!r} was closed (close()); call "
                                   f"session.reopen() to append to it, or make a new Session")
        self._check_forked("begin_step")
        if self._appending:  # (where it began: this step, trial 37l: a loop resumed at step 20 said "from train step 0")
            given = step if isinstance(step, (int, np.integer)) and not isinstance(step, bool) and step >= 0 else None
            self._training_appended(first=(mode, int(self.mode_steps[mode] if given is None else given)))
        open_plan = self._plan
        if open_plan is not None:  # an end_step forgotten: what is offered to that plan later is refused
            if open_plan._pending:
                self.end_step()  # (its decision goes nowhere: said below for a hand-written loop)
            open_plan._ended = True
            self._plan = None
            if self.framework == "python" and not self._warned_open:
                self._warned_open = True
                logger.warning(
                    "tripwire: begin_step(%r) while the %s step %d was still open: it was ended here, and its "
                    "decision (a stop its rules ask for) goes unreturned; call end_step() once per step (or use "
                    "session.step(...))",
                    mode, open_plan.mode, open_plan.step)
        if self._evals_at_checkpoint is not None and not summary:
            self._settle_resumed_evals(mode)
        if step is None:
            step = self.mode_steps[mode]
            if step > MAX_STEP:  # (trial 43f: counted on past the last step a run holds)
                raise ConfigError(f"begin_step: the next {mode} step counted is {step}, past the last a run holds "
                                  f"(2**63 - 1)")
        elif isinstance(step, bool) or not isinstance(step, (int, np.integer)) or not 0 <= step <= MAX_STEP:
            # (trial 43a: a step of 2**63 was taken, and its record made the whole run unreadable at close)
            raise ConfigError(f"begin_step: step={step!r}; accepted: an integer from 0 to 2**63 - 1 (or None: count "
                              f"the steps of {mode!r})")
        elif mode == "train" and not summary and step < self.mode_steps["train"]:
            if not self._warned_repeat:
                self._warned_repeat = True
                began = int(self._trainings[-1]["steps"].get("train", 0)) if len(self._trainings) > 1 else 0
                # (trial 37j: a hand loop that began a training with new_training() and counted its steps from 0
                # again had its steps below that training's start left unjudged by the rules, without a word)
                later = (f"; this training began (new_training()) at train step {began}, from which the rules judge "
                         f"it: a step below that is stored, but the rules that read a training from its start "
                         f"(loss_not_decreasing, oscillating_loss, the gradient rules) do not judge it; number its "
                         f"steps on from {began} (or give a training that counts from 0 a Session, or an out_dir, of "
                         f"its own)" if step < began else "")
                logger.warning(
                    "tripwire: train step %d came after train step %d: train steps must increase, one begin_step per "
                    "optimizer step (with gradient accumulation, offer the mean of the micro-batches' losses once, at "
                    "the step); repeated steps are stored as they come, several records each%s", step,
                    self.mode_steps["train"] - 1, later)
            self._went_back()
        step = int(step)  # (trial 40e F1: a numpy integer was kept, and state_dict() held np.int64: a checkpoint
        #                   torch.load refuses with weights_only=True, json.dumps too)
        counted_from, self.mode_steps[mode] = self.mode_steps[mode], step + 1
        self.global_step += 1
        if summary:
            self._summarized.add(mode)
            inside = tuple(self._mode_save(c, mode).in_range(step) for c in self.collections.values())
            due = self._interned((mode, "summary", inside), lambda: tuple(
                c for c, ok in zip(self.collections.values(), inside) if ok))
        else:
            due = self.due_collections(mode, step, counted_from)
            self._batch_ran.add(mode)
            if due:
                self._batch_saved.add(mode)
        every = self._every_at(step) if mode == "train" and self._every_step and not summary else ()
        if not due:
            self._plan = StepPlan(self, mode, step, due, _every=every, _counted_from=counted_from)
            return self._plan
        shared = self._plans.get(id(due))
        if shared is None:
            kinds: set[str] = set()
            for c in due:
                kinds.update(c.kinds if c.kinds is not None else _ALL_KINDS)
            shared = self._plans[id(due)] = (frozenset(kinds), {})
        self._plan = StepPlan(self, mode, step, due, shared[0], _selected=shared[1], _every=every,
                              _counted_from=counted_from)
        return self._plan

    def _training_appended(self, *, say: bool = True, first: tuple[str, int] | None = None) -> None:
        """The first step of a session that writes after records already in its shard and did not
        say it continues them (:meth:`load_state_dict`, :meth:`continues`): a training of its own
        in an ``out_dir`` an earlier one wrote (the same script run twice). Said once, and recorded
        in the worker meta file's ``trainings`` (docs/format.md) as a training that began now, not
        continuing the one before and judged alone (``fresh``: this session's rules read its records
        only), with its command line and config; the earlier trainings' entries are kept, the first's
        with its start, command line and planned length, which the meta file held until this writer
        replaced it (trial 26i: ``Run.trainings`` was ``{}``, run.json described the first training and
        the meta file the second, and nothing said where the second began). ``say`` False: recorded
        only, where the caller says it in its own words (a second fit through one Lightning callback).
        ``first``: the ``(mode, step)`` beginning now, that mode's first step of this training."""
        self._appending = False
        prior = self._prior_meta or {}
        theirs = self._earlier_framework(prior)
        whose = (f"an earlier {theirs} training's; this is a {self.framework} training"
                 if theirs is not None and theirs != self.framework else "an earlier training's")
        if say:
            logger.warning(
                "tripwire: %s already holds records of worker %d (%s); this training's are "
                "appended after them, so its steps may repeat theirs, and the run records it as a training of its "
                "own (Run.trainings). Unless it continues that run, give each training its own out_dir (or its own "
                "callback created without one).", self.out_dir, self.rank, whose)
        if self.writer is None or self.writer.closed:
            return
        steps = dict(self.mode_steps)
        if first is not None:  # (the step beginning now: its mode's first of this training)
            steps[first[0]] = first[1]
        self._trainings = self._earlier_trainings() + [self._training_entry(steps, fresh=True)]
        self._write_trainings(self.writer)

    def _earlier_trainings(self) -> list[dict[str, Any]]:
        """The trainings the run recorded before this session's writer opened (the meta file it
        replaced): its ``trainings``, or where it held one training, that training's facts."""
        prior = self._prior_meta or {}
        earlier = prior.get("trainings")
        if isinstance(earlier, list) and len(earlier) > 1 and all(isinstance(t, Mapping) for t in earlier):
            return [dict(t) for t in earlier]
        # (one training before: its facts, from the meta file this writer replaced)
        planned = prior.get("planned_steps")
        before: dict[str, Any] = {"steps": {}, "began": None, "continued": False,
                                  "planned_steps": planned if isinstance(planned, int) and not isinstance(planned, bool) else None}
        env = prior.get("environment")
        if isinstance(prior.get("started"), (int, float)):
            before["started"] = float(prior["started"])
        if isinstance(env, Mapping) and isinstance(env.get("argv"), list):
            before["argv"] = [str(a) for a in env["argv"]]
        if isinstance(env, Mapping) and isinstance(env.get("pid"), int) and isinstance(env.get("host"), str):
            before.update(pid=env["pid"], host=env["host"])  # (who wrote it: Run.training_processes)
        return [before]

    def _training_entry(self, steps: dict[str, int], *, fresh: bool) -> dict[str, Any]:
        """The ``trainings`` entry of a training this session begins at ``steps``, judged alone
        (``continued`` False); ``fresh``: its steps may repeat the earlier ones' (docs/format.md)."""
        entry: dict[str, Any] = {"steps": steps, "began": self.writer.started if self.writer is not None else None,
                                 "continued": False}
        if fresh:
            entry["fresh"] = True
        entry.update({"planned_steps": self.history.planned_steps, "argv": list(sys.argv),
                      "config": self.config.to_dict(), "pid": os.getpid(), "host": socket.gethostname()})
        return entry

    def _earlier_framework(self, prior: Mapping[str, Any]) -> str | None:
        """The integration that wrote the earlier training's records in this out_dir: its worker
        meta file's (``environment.framework``, of the last session that wrote this worker's shard),
        else the run's (``run.json``'s ``framework``, the first training's); None where neither says
        (trial 28e F4: a Keras fit appended to a Lightning run was told of "an earlier training's"
        records, and the run still read ``framework: lightning``)."""
        env = prior.get("environment")
        framework = env.get("framework") if isinstance(env, Mapping) else None
        if not isinstance(framework, str) or not framework:
            try:
                framework = json.loads((self.out_dir / RUN_FILE).read_text(encoding="utf-8")).get("framework")
            except (OSError, ValueError, AttributeError):  # (unreadable: the warning names no framework)
                return None
        return framework if isinstance(framework, str) and framework else None

    def _every_at(self, step: int) -> tuple[Collection, ...]:
        """The every_step collections whose train save range holds ``step``."""
        inside = tuple(m.in_range(step) for _, m in self._every_step)
        if all(inside):
            return self._every_all
        got = self._every_sets.get(inside)  # one tuple per combination: its id keys caches
        if got is None:
            got = self._every_sets[inside] = tuple(c for (c, _), ok in zip(self._every_step, inside) if ok)
        return got

    def quiet_until(self, mode: str, step: int) -> int:
        """The first step ``s >= step`` of ``mode`` at which :meth:`begin_step` may have anything to
        save (looking at most :data:`QUIET_SCAN` steps ahead). The steps before it are *quiet*: no
        collection is due and the every-step collections are the same at each, so an adapter may
        account for each of them with :meth:`quiet_step` instead of :meth:`begin_step` and
        :meth:`end_step` (the same outcome for a fraction of the work). A train ``step`` past a save
        due at a step the training skipped is that step itself (see :meth:`due_collections`). The
        range found is remembered: the next calls inside it are a comparison."""
        lo, hi, _ = self._quiet.get(mode, (0, 0, ()))
        if lo <= step < hi:
            return hi
        schedule = self._schedule.get(mode)
        if schedule is None:
            _bad_mode(mode)
        since = self.mode_steps[mode]
        if mode == "train" and 0 < since < step and self.due_collections(mode, step, since):
            return step  # (a save due at a step the training skipped: see due_collections)
        track = mode == "train" and bool(self._every_step)
        every = self._every_at(step) if track else ()
        # the next save step by arithmetic (a save step's start and the next one's: a scan of the
        # interval's steps cost 16 us a save step, cold), at most QUIET_SCAN steps ahead
        end = step + QUIET_SCAN
        for cfg, _ in schedule:  # type: ignore[union-attr]
            nxt = cfg.next_save(step)
            if nxt is not None and nxt < end:
                end = nxt
        s = step
        if track and self._every_bounded:
            while s < end and self._every_at(s) is every:  # (interned: one tuple per combination)
                s += 1
        else:
            s = end
        if s > step:
            self._quiet[mode] = (step, s, every)
        return s

    def quiet_keeps(self, mode: str, kind: str) -> bool:
        """Is a value of ``kind`` kept at the quiet steps of the last :meth:`quiet_until` range of
        ``mode``? (the training loss with ``every_step``: adapters extract it only then)."""
        every = self._quiet.get(mode, (0, 0, ()))[2]
        return any(c.kinds is not None and kind in c.kinds for c in every)

    def quiet_step(self, mode: str, step: int, kept: Iterable[tuple[str, Any, str]] = (), *,
                   owned: bool = False) -> Decision:
        """Account for a quiet ``step`` of ``mode`` (one before :meth:`quiet_until`): the step
        counters, the values of every-step collections offered as ``(name, tensor, kind)`` (kept
        as :meth:`StepPlan.add` does at a step that saves nothing: a copy, written with the next
        record; ``owned=True``: the tensors are new ones that nothing changes in place, such as a
        loss the training step returned, kept by reference) and a stop requested by ``tripwire
        watch``. Returns the decision."""
        lo, hi, every = self._quiet.get(mode, (0, 0, ()))
        if not lo <= step < hi:
            raise ValueError(
                f"quiet_step: step {step!r} of mode {mode!r} is not quiet; accepted: a step s with "
                f"quiet_until({mode!r}, s) > s (the last quiet range found is [{lo}, {hi}))"
            )
        if self._appending:
            self._training_appended(first=(mode, int(step)))
        if self._plan is not None:
            self.end_step()
        if self._inflight is not None:
            self._settle()
        if self._evals_at_checkpoint is not None:
            self._settle_resumed_evals(mode)
        if step < self.mode_steps[mode] and mode == "train":
            self._went_back()
        self.mode_steps[mode] = int(step) + 1  # (a numpy integer too: see begin_step)
        self.global_step += 1
        for name, tensor, kind in kept:
            if every:
                self._keep_at(step, every, name, tensor, kind, owned)
        external = self._poll_external_stop(step, mode)
        if external is None and not self._unacted:  # (every quiet step, as a rule: no new list)
            return self._held()
        found, self._unacted = self._unacted, []
        return self._act(found, external, at=(mode, step))

    def _went_back(self) -> None:
        """A train step below the last one begins (a loop that counts its steps from 0 every epoch, a
        second training in one session): the every-step values kept since the last save step are
        written and judged now, at the steps they were taken, before a repeated step could take their
        place (trial 35h: a kept loss was replaced by the repeated step's, and a NaN kept at the end of
        an epoch was never judged, since the next save step's rules read up to a lower step)."""
        if self._kept or self._written_early is not None:
            if self._inflight is not None:
                self._settle()
            self._judge_kept()

    def _keep(self, plan: StepPlan, name: str, tensor: Any, kind: str) -> bool:
        """Keep a value of an every_step collection offered at a step where it is not due (a complex
        one as its magnitude, as :meth:`StepPlan.add` takes it; converted only where it is kept)."""
        return self._keep_at(plan.step, plan._every, name, tensor, kind, magnitude=True)

    def _keep_at(self, step: int, every: tuple[Collection, ...], name: str, tensor: Any, kind: str,
                 owned: bool = False, magnitude: bool = False) -> bool:
        key = (name, kind, id(every))
        cols = self._keep_cols.get(key)
        if cols is None:
            cols = self._keep_cols[key] = tuple(c for c in every if c.matches(name, kind))
        if not cols:
            return False
        if magnitude:
            tensor = _magnitude(tensor)
        at = (step, name)
        first = self._kept.get(at)
        if first is not None and first.global_step == self.global_step - 1 and not _same_value(first.tensor, tensor):
            # (offered twice in this very step: a step number repeated by a later begin_step is stored as it comes)
            raise _offered_twice(name, "train", step)
        # (tuple.__new__: a NamedTuple's own constructor costs a Python call, at every step); a copy
        # of the value, not the caller's tensor, which a loop may reuse as a buffer (zero_() then +=)
        self._kept[at] = tuple.__new__(_Kept, (step, self.global_step - 1, time.time(), name,
                                               tensor if owned else _kept_copy(tensor), cols))
        if len(self._kept) + self._early_count >= BUFFER_LIMIT:  # (those a checkpoint wrote count: see _judge_kept)
            self._judge_kept()
        return True

    @property
    def kept(self) -> list[tuple[int, str, Any]]:
        """``(step, name, tensor)`` of the every-step values kept for the next save step (the
        framework's own tensors: nothing has been copied to the host)."""
        return [(k.step, k.name, k.tensor) for k in self._kept.values()]

    @property
    def plan(self) -> StepPlan | None:
        return self._plan

    def end_step(self) -> Decision:
        """Reduce and write what the current plan collected, run the rules, act.

        The decision's ``stop`` is True from the step at which a stop was asked (a rule's
        ``stop_training`` or ``raise`` action, a stop requested by ``tripwire watch``) at every later
        step of this training, train or eval, until :meth:`close` or :meth:`new_training`; its
        ``stopped_by`` is the finding that asked it and ``findings`` holds only the step's own. A loop
        that reads only its train steps' decisions thus stops at the next train step after a stop
        asked at an eval step (a NaN loss kept since the last save step is judged when the
        validation's record is written).

        With :attr:`background_reduction` (the framework callbacks' sessions; not a hand-written
        loop's, by default), a step whose reductions the backend takes off the training thread
        (``reduce_groups_async``: large tensors on the CPU) is written and its rules run when the
        next step ends (or at :meth:`settle`, :meth:`flush`, :meth:`close`, :meth:`state_dict`): its
        findings keep their own step, and a stop they ask for is returned by that next step's
        decision."""
        self._check_forked("end_step")
        plan, self._plan = self._plan, None
        if plan is None:
            if self.framework == "python" and not self._warned_unopened:
                # (trial 35h: a loop that forgot begin_step got an empty decision at every step, and
                # nothing was recorded, without a word)
                self._warned_unopened = True
                logger.warning("tripwire: end_step() with no step open (no begin_step() since the last end_step(), "
                               "or the session was closed): nothing to record; call begin_step(mode, step) first, "
                               "once per step (or use session.step(...))")
            return self._held()
        plan._ended = True
        if self._inflight is not None:
            self._settle()
        if plan.mode != "train" and (self._kept or self._written_early is not None):
            # kept train losses are written before another mode's record; one that is not finite is
            # judged as a train step first (a NaN loss at train step 7 is reported there, not as
            # the NaN val_loss it leads to at the validation that follows; the rule fires once)
            self._judge_kept(nonfinite_only=True)
        found: list[Finding] = []
        if plan._pending:
            kept = self._take_kept()
            if kept and plan.mode != "train":
                self._train_unjudged = kept[-1].step
                self._unjudged_cols |= _kept_collections(kept)
            records, complete = self._build_records(plan, kept, defer=self.background_reduction)
            if complete is None:
                self._store_all(records)
                found = self._evaluate(plan.step, plan.mode, self.mode_steps["train"] - 1)
            else:
                self._inflight = (records, complete, plan.step, plan.mode, self.mode_steps["train"] - 1)
        if self._unacted:
            found, self._unacted = self._unacted + found, []
        external = self._poll_external_stop(plan.step, plan.mode)
        if not found and external is None:
            return self._held()
        return self._act(found, external, at=(plan.mode, plan.step))

    def _check_forked(self, call: str) -> None:
        """A session used in a forked child of the process that made it (trial 39a: a hand loop went on
        with its session after ``os.fork()``): its run is written by that process's writer thread, and
        its steps reduced by its background thread, neither of which runs in the child, so the child's
        steps were lost without a word, and one the parent was reducing never ended (the child hung
        at its next step). Refused, naming both processes."""
        if id(self) in _MADE and not _made_here(self):
            raise StoreClosedError(
                f"{call}: this Session (run {str(self.out_dir)!r}) was opened by process {_MADE[id(self)][0]}, and "
                f"this process ({os.getpid()}) is a fork of it: the run is written by that process's writer thread, which does not "
                f"run here, so nothing of this process's steps would be recorded; make a new Session in this process "
                f"(its own out_dir, or the same one: it becomes a worker of its own) and use that")

    def suspend_step(self) -> StepPlan:
        """Take the open step (the plan of the last :meth:`begin_step`, not yet ended) out of the
        session, to run other steps before it ends: a validation inside a gradient accumulation
        window, which Lightning runs between two micro-batches of one optimizer step. The step's
        mode counter (:attr:`mode_steps`) and :attr:`global_step` are set back to what they were
        before its ``begin_step``, so that the steps run meanwhile follow the last step ended (an
        eval step's ``train_step``, ``Run.train_steps``, is the last train step ended). Nothing is
        written or judged here; the plan keeps what was offered to it (and what is offered to it
        meanwhile). Returns the plan: :meth:`resume_step` puts it back. A step still suspended when
        the session closes is not recorded.

        Raises :class:`ConfigError` when no step is open (none begun, or it was ended)."""
        plan = self._plan
        if plan is None:
            raise ConfigError("suspend_step: no step is open (begin_step() was not called, or its step was ended "
                              "by end_step() or the next begin_step()); accepted: a call between begin_step() "
                              "and end_step()")
        self._plan = None
        plan._suspended = True
        self.mode_steps[plan.mode] = plan._counted_from
        self.global_step -= 1
        return plan

    def resume_step(self, plan: StepPlan) -> None:
        """Put back the step :meth:`suspend_step` took out of this session: it is the open step again
        (:attr:`plan`; :meth:`end_step` writes and judges it), counted as :meth:`begin_step` counted
        it (its mode's counter at its step + 1, :attr:`global_step` one more).

        Raises :class:`ConfigError` when ``plan`` is no step this session suspended, when it was
        resumed already, or when another step is open (end it first); :class:`StoreClosedError` when
        the run was closed meanwhile (the step was not recorded: begin a new one after
        :meth:`reopen`)."""
        if not isinstance(plan, StepPlan) or plan.session is not self:
            got = (f"a StepPlan of another session ({plan.mode} step {plan.step})" if isinstance(plan, StepPlan)
                   else f"{type(plan).__name__} {plan!r:.60}")
            raise ConfigError(f"resume_step: got {got}; accepted: the StepPlan this session's suspend_step() returned")
        if not plan._suspended:
            why = "it was ended" if plan._ended else "it was resumed already, or never suspended"
            raise ConfigError(f"resume_step: the {plan.mode} step {plan.step} is not suspended ({why}); accepted: "
                              f"the StepPlan suspend_step() returned, once")
        if self._plan is not None:
            raise ConfigError(f"resume_step: the {self._plan.mode} step {self._plan.step} is open; end it (end_step()) "
                              f"before resuming the {plan.mode} step {plan.step}")
        if self.writer is not None and self.writer.closed:
            raise StoreClosedError(f"resume_step: the run {str(self.out_dir)!r} was closed (close()) while the "
                                   f"{plan.mode} step {plan.step} was suspended: it was not recorded")
        plan._suspended = False
        self.mode_steps[plan.mode] = plan.step + 1
        self.global_step += 1
        self._plan = plan

    def _held(self) -> Decision:
        """The decision of a step with nothing new to act on: the stop asked earlier in this training
        (``stop`` True, ``stopped_by`` the finding that asked it, no findings of its own), else go on."""
        held = self._stop_held
        return _CONTINUE if held is None else Decision(True, str(held), (), held)

    def fence(self) -> None:
        """Wait until the background reduction of the step in flight no longer reads the
        framework's tensors (with :attr:`live_tensors`; at once otherwise, or when nothing is in
        flight). Integrations call it before training may change those tensors in place."""
        if self._inflight is None:
            return
        fence = getattr(self.backend, "fence", None)
        changed = fence() if fence is not None else None
        if changed:
            names = sorted({self._inflight_names[g][row] for g, row in changed})
            _, _, step, mode, _ = self._inflight
            by = ("before session.fence() (a hand-written loop with live_tensors calls it before the optimizer "
                  "step, zero_grad or anything else that changes them in place)" if self.framework == "python" else
                  "before training was to change it (by a callback's or the model's own hook, or the training step)")
            logger.warning(
                "tripwire: %s changed in place after this step's end was captured and %s: %s step %d holds %s as "
                "changed, not as at the step's end; later steps are copied at the step's end",
                _name_list(names), by, mode, step, "it" if len(names) == 1 else "them")

    def optimizer_wanted(self, names: Iterable[str]) -> bool:
        """:attr:`optimizer_in_full` for an integration that knows the ``optimizer``-kind tensors it
        would offer (``names``: ``lr/0``, ``update_ratio/<param>``): a custom collection of any kind
        counts only where it takes one of them (:func:`~tripwire.rules._common.optimizer_read_in_full`)."""
        return self.optimizer_in_full and optimizer_read_in_full(self.config.collections.values(), self.rules, names)

    def settle(self) -> Decision:
        """Complete the step reduced in the background now (store its records, run its rules) and
        act on what they found, instead of at the next step's end: the decision, as ``end_step``
        gives it (a step not in flight: what is waiting to be acted on, else the stop held). An
        integration calls it where the next step's end comes late, after a validation's last step
        (trial 36i: Lightning's ``overfit`` finding at a validation's end was acted on a whole
        epoch later, at the next validation)."""
        self._settle()
        if not self._unacted:
            return self._held()
        found, self._unacted = self._unacted, []
        return self._act(found, None)

    def _settle(self) -> None:
        """Complete the step reduced in the background: store its records, run its rules (their
        findings are acted on at the next step's end)."""
        if self._inflight is None:
            return
        self.fence()  # (an integration that fences has done so: then at once)
        inflight, self._inflight = self._inflight, None
        records, complete, step, mode, train_step = inflight
        complete()
        self._store_all(records)
        self._unacted += self._evaluate(step, mode, train_step)

    def step(self, mode: str, step: int, tensors: Mapping[str, tuple[Any, str]], *, summary: bool = False) -> Decision:
        """Convenience for simple loops: one call with ``{name: (tensor, kind)}``. ``summary=True``
        for values that must not be skipped, such as a validation's epoch loss in a hand-written
        loop: saved whatever the save interval (see :meth:`begin_step`)."""
        if not isinstance(tensors, Mapping):  # (trial 24f: a list was an AttributeError, 'list' has no 'items')
            raise ConfigError(f"step: tensors={tensors!r:.80} ({type(tensors).__name__}); accepted: a mapping of names "
                              f"to (tensor, kind) pairs, e.g. {{'loss': (loss, 'losses')}}")
        # every entry checked before the step begins (trial 40b F1: a malformed entry raised with the step
        # begun, and the corrected call warned of an open step and of a repeated one, and stored it twice)
        for name, value in tensors.items():
            if not isinstance(value, tuple) or len(value) != 2:
                raise ConfigError(f"step: tensors[{name!r}] is {type(value).__name__} {value!r:.60}; accepted: a "
                                  f"(tensor, kind) pair, e.g. {{'loss': (loss, 'losses')}}")
            _check_offer(name, value[1], "step")
            if value[0] is not None and type(value[0]) not in self._value_types:
                _check_value(name, value[0], self)
        plan = self.begin_step(mode, step, summary=summary)
        for name, value in tensors.items():
            plan.add(name, value[0], value[1])
        return self.end_step()

    # -------------------------------------------------------------------------------- reducing
    def _store(self, record: StepRecord) -> None:
        if self.writer is not None:
            self.writer.write(record)
        self.history.add_step(
            record.mode, record.step, self.rank, record.wall_time,
            [(t, r) for t, r, _ in record.scalars],
            _values_of(record),
            record.arrays, record.declare, global_step=record.global_step,
        )

    def _store_all(self, records: list[StepRecord]) -> None:
        """:meth:`_store` each record, in order; a run of consecutive records of one mode with the
        same scalars and nothing else (the kept every-step losses of the steps since the last save)
        joins the history in one :meth:`History.add_steps` call instead of one call a step."""
        i, n = 0, len(records)
        while i < n:
            first = records[i]
            j = i + 1
            single = False
            if batchable(first):
                layout = [(t, r) for t, r, _ in first.scalars]
                mode = first.mode
                if len(layout) == 1:  # one value a step (the kept losses): compared without a generator
                    single = True
                    name, reductions = layout[0]
                    while j < n:
                        record = records[j]
                        if (record.mode != mode or not batchable(record) or len(record.scalars) != 1
                                or record.scalars[0][0] != name or record.scalars[0][1] != reductions):
                            break
                        j += 1
                else:
                    while (j < n and records[j].mode == mode and batchable(records[j])
                           and len(records[j].scalars) == len(layout)
                           and all(t == lt and r == lr for (t, r, _), (lt, lr) in zip(records[j].scalars, layout))):
                        j += 1
            if j - i == 1:
                self._store(first)
            else:
                group = records[i:j]
                if single:
                    rows = np.array([r.scalars[0][2] for r in group], dtype=np.float64).reshape(len(group), -1)
                else:
                    rows = np.stack([np.asarray(_values_of(r), dtype=np.float64).ravel() for r in group])
                if self.writer is not None:
                    self.writer.write_steps(group, rows)
                self.history.add_steps(first.mode, [r.step for r in group], self.rank, [r.wall_time for r in group],
                                       layout, rows, global_steps=[r.global_step for r in group])
            i = j

    def _take_kept(self) -> list[_Kept]:
        if not self._kept:
            return []
        kept = sorted(self._kept.values(), key=_KEPT_STEP)  # stable: offer order within a step
        self._kept = {}
        return kept

    def _build_records(self, plan: StepPlan | None, kept: list[_Kept], defer: bool = False
                       ) -> tuple[list[StepRecord], Callable[[], None] | None]:
        """The records of the kept values (one per step, in step order), then the plan's record;
        all reduced in one batched call per backend (one host copy). With ``defer``, the records
        may come back incomplete, with the callable that completes them (see :meth:`_reduce_into`)."""
        records: list[StepRecord] = []
        by_step: dict[int, StepRecord] = {}
        record = None
        if plan is not None:
            record = StepRecord(plan.mode, plan.step, self.global_step - 1, time.time(), self.rank)
            if plan.mode == "train":  # a value kept at this very step (its collection not due) joins it
                by_step[plan.step] = record
        items: list[tuple[StepRecord, str, Any, tuple[Collection, ...], bool]] = []
        for k in kept:
            rec = by_step.get(k.step)
            if rec is None:
                rec = by_step[k.step] = StepRecord("train", k.step, k.global_step, k.wall_time, self.rank)
                records.append(rec)
            items.append((rec, k.name, k.tensor, k.cols, False))
        if plan is not None and record is not None:
            records.append(record)
            items.extend((record, name, tensor, cols, True) for name, tensor, cols in plan._pending)
        return records, self._reduce_into(items, defer)

    def _reduce_into(self, items: list[tuple[StepRecord, str, Any, tuple[Collection, ...], bool]],
                     defer: bool = False) -> Callable[[], None] | None:
        """Reduce ``(record, name, tensor, collections, arrays_allowed)`` items into their records
        (kept every-step values get their scalar reductions only: no arrays, no histograms). With
        ``defer`` and a backend that takes the work off this thread (``reduce_groups_async``), the
        records get their scalars later, from the returned callable; else None (they have them)."""
        if self._inflight is not None:  # (the backend reduces one step at a time)
            self._settle()
        groups: dict[tuple[int, tuple[str, ...]], list[tuple[StepRecord, str, Any]]] = {}
        numpy_backend = self._numpy
        for record, name, tensor, cols, full in items:
            backend = numpy_backend if isinstance(tensor, _HOST_TYPES) else self._backend_for(tensor)
            red = cols[0].reduction
            if len(cols) > 1:
                key = tuple(map(id, cols))
                red = self._merged.get(key)
                if red is None:
                    red = cols[0].reduction
                    for c in cols[1:]:
                        red = red.merged(c.reduction)
                    self._merged[key] = red
            if not full and red.raw and not red.histogram and not red.reductions:  # a kept loss: raw only
                if _numel(backend, tensor) == 1:
                    groups.setdefault((id(backend), _RAW), []).append((record, name, tensor))
                dkey = (name, id(cols))
                if dkey not in self._declared_sets:
                    self._declared_sets.add(dkey)
                    self._declare(record, name, cols)
                continue
            reductions = red.reductions
            if red.raw or red.histogram:
                numel = _numel(backend, tensor)
                if red.raw and numel == 1:
                    reductions = reductions + ("raw",)
                elif red.raw and full:
                    record.arrays.append((name, "raw", _host_copy(backend, tensor)))
                if red.histogram and full:  # (a one-element or empty tensor's too: numpy.histogram's)
                    # one binning a tensor, at every step, whichever of its collections are due (trial 27d)
                    owner = self._hist_of.get(name)
                    hist = owner.reduction if owner is not None else red
                    counts, edges = backend.histogram(tensor, hist.histogram_bins, hist.histogram_range)
                    record.arrays.append((name, "hist_counts", np.asarray(counts)))
                    record.arrays.append((name, "hist_edges", np.asarray(edges)))
            if reductions:
                groups.setdefault((id(backend), reductions), []).append((record, name, tensor))
            self._declare(record, name, cols)
        # a backend with ``reduce_groups`` gets all its groups in one call (one host copy, a tensor
        # in several groups reduced once); otherwise one ``reduce`` call per group
        fused = getattr(self.backend, "reduce_groups", None)
        batched: dict[tuple[int, tuple[str, ...]], Any] = {}
        keys = [k for k in groups if k[0] != id(self._numpy)] if fused is not None else []
        later: Callable[[], list[Any]] | None = None
        if keys:
            calls = [([t for _, _, t in groups[k]], _call_reductions(k[1])) for k in keys]
            start = getattr(self.backend, "reduce_groups_async", None) if defer else None
            later = None if start is None else start(calls, live=True) if self.live_tensors else start(calls)
            self._inflight_names = [[name for _, name, _ in groups[k]] for k in keys]
            if later is None:
                batched = dict(zip(keys, fused(calls)))
        for key, members in groups.items():
            if key not in batched and not (later is not None and key in keys):
                backend_id, reductions = key
                backend = self._numpy if backend_id == id(self._numpy) else self.backend
                batched[key] = backend.reduce([t for _, _, t in members], _call_reductions(reductions))

        def fill(values: Mapping[tuple[int, tuple[str, ...]], Any]) -> None:
            for key, members in groups.items():
                rows = np.asarray(values[key], dtype=np.float64)
                for (record, name, _), row in zip(members, rows):
                    record.scalars.append((name, key[1], row))

        if later is None:
            fill(batched)
            return None
        pending = later
        return lambda: fill({**batched, **dict(zip(keys, pending()))})

    def _backend_for(self, tensor: Any) -> ReductionBackend:
        """The backend of a framework tensor. A session created without one (a hand-written loop)
        takes the torch backend at the first torch tensor offered (reductions on its device, one
        host copy a step); other array types go through numpy (``np.asarray``)."""
        if self._auto_backend:
            self._auto_backend = False
            if type(tensor).__module__.partition(".")[0] == "torch":
                from tripwire.integrations._torch import TorchBackend  # torch is there: it made the tensor

                self.backend = TorchBackend()
        return self.backend

    def _declare(self, record: StepRecord, name: str, cols: tuple[Collection, ...]) -> None:
        """Declare a tensor's collections in the first record of this shard that holds it."""
        for c in cols:
            if (name, c.name) not in self._declared:
                self._declared.add((name, c.name))
                record.declare.setdefault(name, []).append(c.name)

    # ---------------------------------------------------------------------------------- rules
    def _evaluate(self, step: int, mode: str, train_step: int = -1,
                  kept: frozenset[str] | None = None, final: Iterable[int] | None = None) -> list[Finding]:
        """The rules' findings at ``step`` of ``mode``; one outside training also holds the last
        train step before it (``details["train_step"]``, shown by ``str(finding)``): an eval step
        counts validation batches, which a user cannot map back to the training.

        ``final``: the indices of the rules judged (the others are not), at the end of a training,
        whatever their ``every`` (:func:`look_back_tails`).

        ``kept``: the step's records hold only the every-step values kept since the last save step,
        of these collections (judged by themselves: at the end of a training, before another mode's
        record, at a flush, a full buffer); only the rules that read one of them (or state no
        requirement) are judged there, as at a save step that saved only those collections
        (:func:`~tripwire.rules._base.reads_any_of`; trial 29j: a gradient rule read its last
        gradient save again at the last step, and its patience counted it twice)."""
        out: list[Finding] = []
        if mode == "train" and kept is None and final is None:
            self._train_unjudged = None
            self._unjudged_cols = frozenset()
            self._written_early, self._early_count = None, 0
        if self._muted:
            return out
        only = None if final is None else set(final)
        for i, rule in enumerate(self.rules):
            if i in self._disabled or (i in self._fired and not rule.repeat):
                continue
            if kept is not None and not reads_any_of(rule, kept):
                continue
            if only is not None:
                if i not in only:
                    continue
                rule._last_eval.pop(mode, None)  # (due whatever its every: the training's last evaluation)
            try:
                if isinstance(rule, BuiltinRule):
                    found = rule.evaluate(self.history, step, mode)
                else:  # (a rule of the user's reads through RuleReads: close() says what it read in vain)
                    found = rule.evaluate(self._reads_for(i), step, mode)
                if type(rule).evaluate is not Rule.evaluate:  # (Rule.evaluate checks the dates itself)
                    found, wrong = rule._dated(found, step, mode)
                    if wrong is not None:
                        raise MisdatedFindingError(wrong, found)
            except Exception as exc:
                if self.config.strict:
                    raise rule_error(exc, f"rule {rule.name!r} raised at step {step} ({mode}): {exc!r}") from exc
                self._disabled.add(i)
                err = Finding(
                    rule=rule.name, step=step, mode=mode, kind="error", severity="error",
                    message=f"{rule_failure(exc)}; it is disabled for the rest of the run",
                    worker=self.rank, details={"traceback": traceback.format_exc()},
                )
                logger.error("tripwire: %s", err)
                self._record(err)
                found = exc.findings if isinstance(exc, RuleReturnError) else []
            # every finding of the evaluation is kept (a rule naming two dead layers in one check: the
            # second was dropped, trial 18d), under the rule's own name (a finding built by hand with
            # another rule's name was stored under it)
            for f in found:
                changes: dict[str, Any] = {"worker": self.rank, "rule": rule.name}
                if mode != "train" and train_step >= 0 and "train_step" not in f.details:
                    changes["details"] = {**f.details, "train_step": train_step}
                if isinstance(rule, ExplodingTensor):
                    note = self._all_reduced_note(f)
                    if note:
                        changes["message"] = f"{f.message} {note}"
                out.append(Finding(**{**f.__dict__, **changes}))
                self._fired.add(i)
        return out

    def _reads_for(self, index: int) -> RuleReads:
        """The history the rule at ``index`` (one of the user's) is given: a :class:`RuleReads` of
        :attr:`history`, one per rule for the session's life (what it read, for :meth:`_read_in_vain`)."""
        reads = self._rule_reads.get(index)
        if reads is None or reads._history is not self.history:
            reads = self._rule_reads[index] = RuleReads(self.history)
        return reads

    def _read_in_vain(self) -> list[str]:
        """One message per rule of the user's that read a tensor the run never held (by the end of
        the training), in a mode this session recorded, or listed a collection with no tensor that
        this session does not capture: the rule judged without it (trial 31f F1: a rule that read
        ``gradients/...`` without a requirement was not given gradients, never fired, and nothing said
        so). Names the requirement to declare where the name tells its collection (the integrations'
        names: ``gradients/<param>``, ``update_ratio/<param>``, ``<layer>/input`` ...:
        :func:`_collection_of_name`), else a name the run holds that is close to the one read."""
        ran = {m for m in MODES if self.history.steps(m, self.rank)}
        out = []
        for index, reads in sorted(self._rule_reads.items()):
            if index >= len(self.rules) or index in self._disabled:
                continue
            rule = self.rules[index]
            missing: dict[str, set[str]] = {}
            for tensor, what, mode in sorted(reads.reads):
                if (mode in ran or (mode == "any" and ran)) and not self.history.has_tensor(tensor):
                    missing.setdefault(tensor, set()).add(what)
            unlisted = sorted(c for c in reads.listed if c not in self.collections and not self.history.collections().get(c))
            if not missing and not unlisted:
                continue
            needs: dict[str, set[str]] = {c: set() for c in unlisted}
            for tensor, whats in missing.items():
                col = _collection_of_name(tensor)
                if col is not None and col not in self.collections:
                    needs.setdefault(col, set()).update(whats)
            shown = [f"{t!r} ({', '.join(sorted(w))})" for t, w in list(missing.items())[:3]]
            more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
            what = []
            if missing:
                what.append(f"read {', '.join(shown)}{more}, which this run never captured")
            if unlisted:
                what.append(f"listed the collection{'s' if len(unlisted) > 1 else ''} {', '.join(map(repr, unlisted))}, "
                            f"which this run does not capture")
            if needs:
                reqs = ", ".join(requirement_text(c, r) for c, r in sorted(needs.items()))
                yaml = ", ".join(requirement_text(c, r, yaml=True) for c, r in sorted(needs.items()))
                asked = ", ".join(sorted({r.collection for r in rule.requirements()})) or "nothing"
                fix = (f": a session captures a collection that its config lists or a rule's requirements() ask for, "
                       f"and this rule asks for {asked}; declare {reqs} in its requirements() (FunctionRule(fn, "
                       f"requirements=[...]); in YAML, requirements: [{yaml}])")
            else:
                near = [did_you_mean(t, self.history.tensor_names()) for t in missing]
                near_text = next((n for n in near if n), "")
                fix = (f"{near_text}: a name the run does not hold (a typo, or a tensor the training does not offer), or "
                       f"one of a collection this run does not capture (declare that collection in the rule's "
                       f"requirements())")
            out.append(f"rule {rule.name!r} {' and '.join(what)}, so it never had "
                       f"{'those values' if len(missing) > 1 else 'that value' if missing else 'a tensor of it'} to judge{fix}")
        return out

    def _all_reduced_note(self, finding: Finding) -> str:
        """What to add to an ``exploding_tensor`` finding of a train step under a world size above 1
        whose tensors are all gradients or weights (its first non-finite tensors), where this rank's
        losses at that step are known and finite: its gradients are all-reduced with the other
        ranks', so the NaN or infinity may come from another rank's loss, and the rule's advice to
        check this rank's inputs and labels may send the user to the wrong rank (trial 31b F5: rank 0
        was told so of a NaN that came from rank 1's batch). Else ``""``."""
        if self.world_size < 2 or finding.mode != "train" or not finding.tensors:
            return ""
        known = [t for t in finding.tensors if self.history.has_tensor(t)]
        if not known or not all(set(self.history.tensor_collections(t)) & {"gradients", "weights", "biases"}
                                for t in known):
            return ""
        losses = []
        for name in names_in(self.history, "losses"):
            try:
                value = value_at(self.history, name, "raw", finding.step, "train", self.rank)
            except TripwireError:  # (a loss stored without its raw value: not known here)
                continue
            if value is not None:
                if not math.isfinite(value):
                    return ""
                losses.append(f"{name} {value:.6g}")
        if not losses:
            return ""
        return (f"This rank's {'loss was' if len(losses) == 1 else 'losses were'} finite at that step "
                f"({', '.join(losses[:3])}{', ...' if len(losses) > 3 else ''}), and its gradients are all-reduced "
                f"with those of the other ranks (world size {self.world_size}): a NaN or infinity from another "
                f"rank's loss or batch reaches every rank's gradients, so look first at the other ranks' findings "
                f"at this step (tripwire inspect on the run), then at this rank's inputs and labels.")

    def _record(self, finding: Finding) -> None:
        self.findings.append(finding)
        if self.writer is not None and not self.writer.closed:
            self.writer.write_finding(finding)
        elif self.writer is None and self._findings_file is not None:
            try:
                append_finding_line(self._findings_file, finding)
            except OSError as exc:  # (the run's directory is not on this node's disk: kept here, said once)
                self._findings_file = None
                logger.warning("tripwire: rank %d writes no records (writer.ranks) and could not write its findings "
                               "to %s (%s): they stay in this rank's findings", self.rank, self.out_dir, exc)

    def _act(self, found: list[Finding], external: Finding | None, ended: bool = False,
             at: tuple[str, int] | None = None) -> Decision:
        """Record the findings and fire their actions; the decision. A finding the run holds from
        the attempt that ran its step before this resume (:attr:`_held_before`) is not recorded nor
        acted on again, but for ``stop_training`` and ``raise``: said once instead (trial 26k).

        ``ended``: the training has ended (its last steps judged at :meth:`close` or
        :meth:`new_training`): a ``stop_training`` there stops nothing, so it is no stop (trial 29j
        F2: the run read ``stopped``, with that finding as its reason, after the loop had run every
        step): :attr:`stopped_by` is left as it is, and one INFO line says that the finding came
        after the training ended. A ``raise`` action still raises."""
        stop_finding: Finding | None = None
        to_raise: Finding | None = None
        index = {r.name: i for i, r in enumerate(self.rules)}
        for f in found:
            again = bool(self._held_before) and f.kind == "finding" and _found_key(f) in self._held_before
            actions = self._rule_actions[index[f.rule]] if f.rule in index else self._default_actions
            if again:
                self._found_again(f, actions)
            else:
                self._record(f)
            for action in actions:
                if action.stops and stop_finding is None:
                    stop_finding = f
                if action.raises and to_raise is None:
                    to_raise = f
                if again:  # (its other actions were taken by the attempt that found it first)
                    continue
                try:
                    action.fire(f)
                except ActionError as exc:  # says what went wrong: no traceback
                    if self.config.strict:
                        raise
                    # (the rule, step and mode name the finding: its whole message, said once by the
                    # log action, was repeated in every failing action's line)
                    _say_quietly(logger.error, "tripwire: action %r failed for %s at step %s (%s): %s", action.name,
                                 f.rule, f.step, f.mode, exc)
                except Exception:
                    if self.config.strict:
                        raise
                    _say_quietly(logger.exception, "tripwire: action %r failed for %s at step %s (%s)", action.name,
                                 f.rule, f.step, f.mode)
        if external is not None and stop_finding is None:
            stop_finding = external
        if ended and stop_finding is not None:
            if self.stopped_by is None and to_raise is None:
                logger.info("tripwire: %s asked to stop training (stop_training) after the training had ended (the "
                            "every-step values kept since the last save step, judged when it ended): nothing was "
                            "stopped; the finding is recorded, and the run's status is the training's own",
                            _finding_name(stop_finding))
            stop_finding = None
        if stop_finding is not None and self.stopped_by is None:
            self.stopped_by = stop_finding
            if to_raise is None:  # (the raise action's TrainingStopped says it itself)
                _say_quietly(self._say_stop, stop_finding, at)
        if to_raise is not None and self.stopped_by is None:  # raising stops training too (run status "stopped")
            self.stopped_by = to_raise
        if (stop_finding is not None or to_raise is not None) and self._stop_held is None:
            self._stop_held = self.stopped_by  # (held by every later decision of this training)
        if to_raise is not None:
            if self.writer is not None:
                self.writer.flush()
            raise_for(to_raise)
        if stop_finding is not None:
            return Decision(True, str(stop_finding), tuple(found), stop_finding)
        held = self._stop_held
        if held is not None:  # (findings that ask no stop, after one that did: training still stops)
            return Decision(True, str(held), tuple(found), held)
        return Decision(False, "", tuple(found), None)

    def _say_stop(self, found: Finding, at: tuple[str, int] | None = None) -> None:
        """Log "tripwire: stopping training: rule X at step N (mode)" once, where a stop takes effect
        (the first finding of this training asking ``stop_training``, or ``tripwire watch``'s stop
        request): for a hand-written loop, MXNet and XGBoost (trial 27h F9); the Lightning and Keras
        callbacks say it themselves (:data:`tripwire.integrations._hooks.SAYS_STOP`). Under a world
        size above 1 it names the rank, as the Lightning callback's does: ``tripwire: rank 1: stopping
        training: ...`` (trial 30b F3: two ranks' lines on one console were the same line)."""
        from tripwire.integrations._hooks import SAYS_STOP, say_stop

        if self._judging_after_end:
            # (trial 36e: "stopping training" was logged after XGBoost's EarlyStopping had ended boosting)
            logger.warning("tripwire: %srule %r at step %d (%s) asks to stop training, which had ended already (the "
                           "step was judged after the last one ran): nothing was stopped",
                           f"rank {self.rank}: " if self.world_size > 1 else "", found.rule, found.step, found.mode)
        elif self.framework not in SAYS_STOP:
            # (``at``: the mode and step at which training stops, named where they are not the finding's, as
            # the callbacks' lines and a distributed_stop's name them; trial 38a: a NaN loss kept at step 23
            # and judged at save step 30 said "at step 23" alone, beside the other rank's "at train step 30")
            say_stop(found, *(at or (None, None)), rank=self.rank if self.world_size > 1 else None,
                     train_step=self.mode_steps["train"] - 1)

    def _found_again(self, finding: Finding, actions: Sequence[Action]) -> None:
        """A finding this resumed session made that the run holds already (same rule, worker, mode
        and step), from the attempt that ran that step before the process died (a kill -9 after the
        checkpoint): kept in :attr:`findings` but not written to the run again, nor logged, sent
        (``notify``) or passed to a callable action again; said once here. Trial 26k: the run held
        the same finding twice, and a notify sent it again. The line names the finding's rank in a
        distributed job, rank 0 too (:meth:`_finding_line`)."""
        self._held_before.discard(_found_key(finding))
        self.findings.append(finding)
        acts = [a.name for a in actions if a.stops or a.raises]
        logger.warning("tripwire: found again after the resume: %s (the run holds this finding from the training that "
                       "ran this step before the checkpoint was resumed: it is not recorded, logged or sent again%s)",
                       self._finding_line(finding),
                       (f"; its {' and '.join(acts)} action{'s still act' if len(acts) > 1 else ' still acts'}"
                        if acts else ""))

    def _finding_line(self, finding: Finding) -> str:
        """``finding``'s line (``str(finding)``), naming its rank in a distributed job, rank 0 too
        (``(train, rank 0)``), as the ``log`` action's line and :attr:`why_stopped` do (trial 31b F2:
        rank 0's "found again after the resume" line named no rank, rank 1's did)."""
        return finding._line(rank_always=self.world_size > 1)

    def _poll_external_stop(self, step: int, mode: str) -> Finding | None:
        """Honour a stop requested by ``tripwire watch`` (checked at most once a second).

        A request applies to the trainings running when it was made (see
        :func:`tripwire.request_stop`): one made before this session's writer opened (left in the
        ``out_dir`` by an earlier training; a resumed fit, a reopened session) is ignored, said once
        in an INFO line. A request for a finding this session holds already (its own rules recorded
        it and ``watch --stop`` sent it back) stops training with that finding, not a copy of it.
        A request whose ``record_by`` names this worker (one made with :func:`tripwire.request_stop`
        by hand) has its finding written to the run here; one without it (``tripwire watch``'s) holds
        a finding the run has already."""
        if self.writer is None:
            return None
        now = time.monotonic()
        if now - self._stop_checked < 1.0:
            return None
        self._stop_checked = now
        try:
            requests = read_stop_requests(self.out_dir)
        except OSError as exc:  # (CorruptRunError too: a damaged request stops nothing, and no training)
            if str(exc) not in self._stop_requests_read:
                self._stop_requests_read.add(str(exc))
                logger.warning("tripwire: the stop request cannot be read (%s); it is ignored", exc)
            return None
        if not requests:
            return None
        request = requests[0]
        key = json.dumps(request, sort_keys=True, default=str)
        if key in self._stop_requests_read:
            return None  # (honoured or ignored already)
        self._stop_requests_read.add(key)
        try:
            finding = Finding.from_dict(request.get("finding", {}))
        except (KeyError, ValueError, TypeError, AttributeError):
            finding = Finding(rule="watch", step=step, mode=mode, message="stop requested by tripwire watch")
        # this writer's start (its worker meta file's): when the session began, or reopened
        started = getattr(self.writer, "started", None)
        sessions = request.get("sessions")
        mine = sessions.get(str(self.rank)) if isinstance(sessions, dict) else None
        if isinstance(started, (int, float)) and (
                mine != started if isinstance(mine, (int, float)) else request["requested"] < started):
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(request["requested"]))
            logger.info("tripwire: ignoring the stop request in %s (rule %r at step %s (%s), made %s): it was made "
                        "for an earlier training in this out_dir, before this one started", self.out_dir / "control"
                        / "stop.json", finding.rule, finding.step, finding.mode, when)
            return None
        for held in self.findings:
            if (held.kind, held.rule, held.step, held.mode, held.worker) == (
                    finding.kind, finding.rule, finding.step, finding.mode, finding.worker):
                return held  # (recorded by this session's rules: watch --stop sent it back)
        record_by = request.get("record_by")
        if isinstance(record_by, int) and not isinstance(record_by, bool) and record_by == self.rank:
            # trial 20a: a stop asked with tripwire.request_stop left its finding out of the run (open_run's
            # findings, tripwire inspect): written here, by one session. A request without record_by holds
            # a finding the run has already (tripwire watch wrote it to its own file): not written twice.
            if finding.source == "in-process":  # (the default: say where it came from)
                finding = replace(finding, source=REQUEST_STOP_SOURCE)
            self._record(finding)
        else:
            self.findings.append(finding)
        return finding

    def bind_inputs(self, bound: Mapping[str, Mapping[str, str]]) -> None:
        """``{rule: {parameter: name}}``: rule parameters an integration pointed at its own names
        (XGBoost's ``train-logloss`` for the loss rules' default ``loss``), noted in this worker's
        meta file so that readers of the run (``tripwire watch``) rebuild the rules alike."""
        if bound and self.writer is not None and not self.writer.closed:
            self.writer.set_meta(rule_inputs={str(r): {str(k): str(v) for k, v in p.items()} for r, p in bound.items()})

    def set_planned_steps(self, steps: int | None) -> None:
        """The planned length of training in train steps (``None``: unknown), as the framework knows
        it (Lightning's ``estimated_stepping_batches``, Keras's epochs x steps, ...). Rules with
        windows (``loss_not_decreasing``...) scale their defaults by it; see docs/rules.md."""
        if steps is not None and (isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1):
            raise ConfigError(f"planned_steps: got {steps!r}; accepted: an integer >= 1 or None (unknown)")
        self.history.planned_steps = None if steps is None else int(steps)
        self._trainings[-1]["planned_steps"] = self.history.planned_steps  # (this training's: trial 25e)
        if self.writer is not None and not self.writer.closed:
            self.writer.set_meta(planned_steps=self.history.planned_steps)  # for readers of the run (watch)
            self._write_trainings(self.writer)

    def record_finding(self, finding: Finding) -> Finding:
        """Record a finding made outside the rules (written to the run): an integration's own check
        (Keras's ``loss_output_mismatch``, XGBoost's ``eval_is_train``, Lightning's
        ``distributed_stop``) or one of your own. It is recorded with ``source`` ``check`` where it
        kept the default ``in-process`` (another source it was given is kept), which tells it from a
        rule's finding in the run: ``tripwire watch`` prints it as a check the training recorded,
        never judged again by a rule (docs/cli.md). No action is fired for it. In a session that
        continues the run's training (:meth:`load_state_dict`, :meth:`continues`), a check's finding
        the run holds already is kept in :attr:`findings` but not written again (:meth:`_check_held`).
        Returns the finding as recorded (in :attr:`findings` and the run)."""
        if finding.source == "in-process":  # (the default: mark it as no rule's; trial 27c2)
            finding = replace(finding, source=CHECK_SOURCE)
        if self._check_held(finding):
            self.findings.append(finding)
            logger.info("tripwire: found again after the resume: %s (the run holds this check's finding from the "
                        "training it continues: not recorded again)", self._finding_line(finding))
            return finding
        self._record(finding)
        return finding

    def stopped_by_rank(self, rank: int | None = None, finding: Finding | Mapping[str, Any] | None = None, *,
                        mode: str = "train", step: int | None = None) -> Finding:
        """Say that another rank's stop stops this rank: a hand-written distributed loop whose ranks
        agreed on a stop through a collective (docs/architecture.md's DDP recipe: any rank's
        ``decision.stop`` stops every rank) calls it on every rank once the agreed stop is set, before
        it breaks out of its loop. Where a rule of this rank (or a ``tripwire watch`` request) stopped
        it already (:attr:`stopped_by` set), nothing is done and that finding is returned: its own
        finding is why it stops.

        Otherwise this rank records a ``distributed_stop`` check at ``mode``'s step ``step`` (default:
        the last step of ``mode`` it began, the step the ranks agreed at), as the Lightning callback
        records one under DDP: a finding (``source`` ``check``, no rule's; ``severity`` ``info`` where
        the quoted finding is an info one, else ``warning``) whose message names the stopping rank's
        rule (``rank 1's rule 'exploding_tensor' (train step 23: the loss is nan ...) stopped training;
        every rank stops at the same step``; its message cut at 300 characters) and whose
        ``details["stopped_by"]`` lists ``{"rank", "rule", "step", "mode", "message"}``. It becomes
        :attr:`stopped_by`, so that :meth:`close` ends the run ``stopped`` with it as the end marker's
        ``stop_reason`` (``Run.stop_reasons``, ``tripwire inspect``'s ``worker 0 stopped: ...``; trial
        30b F2: such a rank's run read ``stopped`` with no reason, and with ``writer.ranks: [0]`` the
        run said nowhere why), and later decisions of this training say stop. Its line is logged,
        then the stop line naming this rank: ``tripwire: rank 0: stopping training: rank 1's rule
        'exploding_tensor' at step 23 (train)``.

        ``rank``: the rank whose stop it is (another than this session's; None: not known, or
        ``finding``'s ``worker``), which a loop gets from the collective that agreed on the stop (an
        ``all_reduce`` with ``MIN`` of ``rank if decision.stop else world_size``); ``finding``: that
        rank's stopping finding (its ``decision.stopped_by``, or its ``to_dict()``, gathered with
        ``all_gather_object``) where the loop has it, else None (the message names the rank alone).
        Returns the finding that stops this rank. ConfigError for a ``rank`` that is this session's
        own or outside the job, a session of world size 1 (no other rank), a ``finding`` that is
        neither, or a ``mode`` that is not one."""
        if self.stopped_by is not None:
            return self.stopped_by
        what = "stopped_by_rank"
        if self.world_size < 2:
            raise ConfigError(f"{what}: this session's world_size is 1, so there is no other rank whose stop could "
                              f"stop it; accepted: a session made with world_size= above 1 (its rank's own stop is "
                              f"its decision.stop, already in stopped_by)")
        if finding is not None and not isinstance(finding, Finding):
            if not isinstance(finding, Mapping) or not isinstance(finding.get("rule"), str):
                raise ConfigError(f"{what}: finding={finding!r}; accepted: None, a Finding (the stopping rank's "
                                  f"decision.stopped_by) or its to_dict() (a mapping with its 'rule')")
            finding = Finding.from_dict({"step": -1, "mode": "train", "message": "", **finding})
        if rank is None and finding is not None:
            rank = int(finding.worker)
        if rank is not None:
            rank = check_int(rank, f"{what}: rank", minimum=0, maximum=self.world_size - 1)
            if rank == self.rank:
                raise ConfigError(f"{what}: rank={rank} is this session's own rank, and no rule of it stopped "
                                  f"training (stopped_by is None); accepted: the rank whose decision.stop was True, "
                                  f"another of 0 to {self.world_size - 1}")
        if mode not in MODES:
            raise ConfigError(f"{what}: mode={mode!r}; accepted: {', '.join(map(repr, MODES))}")
        if step is None:
            step = max(self.mode_steps[mode] - 1, 0)
        step = check_int(step, f"{what}: step", minimum=0)
        from tripwire.integrations._hooks import SAYS_STOP, say_stop, stopper_entry, stopper_said

        stopper: dict[str, Any] | None = None
        if finding is not None:
            stopper = stopper_entry(finding, rank)
            said = stopper_said(stopper)
        elif rank is not None:
            stopper = {"rank": rank}
            said = f"rank {rank} stopped training (its finding is in the run)"
        else:
            said = "another rank stopped training"
        details: dict[str, Any] = {"stopped_by": [stopper]} if stopper is not None else {}
        if mode != "train" and self.mode_steps["train"] > 0:
            details["train_step"] = self.mode_steps["train"] - 1  # (str(finding): "after train step N")
        found = Finding(rule="distributed_stop", step=step, mode=mode,
                        severity="info" if finding is not None and finding.severity == "info" else "warning",
                        message=f"{said}; every rank stops at the same step", worker=self.rank, details=details)
        again = self._check_held(replace(found, source=CHECK_SOURCE))  # (a resumed step run again: said once)
        found = self.record_finding(found)
        if not again:  # (the log action's line: tripwire:, the rank named; trial 30f F8)
            logger.log(logging.INFO if found.severity == "info" else logging.WARNING, "%s",
                       log_line(found, self.world_size))
        self.stopped_by = found
        if self._stop_held is None:
            self._stop_held = found  # (held by every later decision of this training, as a rule's stop)
        if self.framework not in SAYS_STOP:
            say_stop(found, rank=self.rank)
        return found

    def _check_held(self, finding: Finding) -> bool:
        """Whether this session continues the training whose records the run holds (it was told so:
        :meth:`load_state_dict`, a resumed fit; :meth:`continues`, Keras's ``initial_epoch=``,
        XGBoost's ``xgb_model=``), writing to it (its writer appends, or a rank that
        ``writer.ranks`` leaves out has a findings file), and the run holds ``finding`` already: the
        same rule, worker, mode and source, with the same message at any step, or at the same step.
        A check runs again at the start of a resumed fit (Keras's ``BackupAndRestore`` or
        ``initial_epoch=``) and finds what the crashed fit found (its message the same, its step
        the resumed one's); a step the resumed training runs again can record the check the killed
        attempt recorded there, its message measured again (Lightning's ``distributed_stop`` quotes
        another rank's finding, whose figures a resumed training computes anew: trial 28a F6, the
        run held it twice). The run records it once (the session's :attr:`findings` keep it).

        A training of its own appended to the run (the same XGBoost callback fitted again, a script
        run twice into one ``out_dir``) continues nothing: its checks' findings are its own and are
        recorded (trial 28i F2: the second fit's ``eval_is_train`` was left out of the run)."""
        if not self._continuing or not ((self.writer is not None and self.writer.appending)
                                        or (self.writer is None and self._findings_file is not None)):
            return False
        if self._checks_held is None:  # (read once, before this session recorded a check of its own)
            held = [f for f in self._findings_held() if f.source != "in-process"]
            self._checks_held = ({(f.rule, f.worker, f.mode, f.source, f.message) for f in held}
                                 | {(f.rule, f.worker, f.mode, f.source, f.step) for f in held})
        return ((finding.rule, finding.worker, finding.mode, finding.source, finding.message) in self._checks_held
                or (finding.rule, finding.worker, finding.mode, finding.source, finding.step) in self._checks_held)

    # ------------------------------------------------------------------------------ lifecycle
    def flush(self) -> None:
        """Write the kept every-step values (one host copy) and wait for the writer. The rules judge
        what was written (their findings are acted on at the next step's end, or at :meth:`close`):
        a NaN among the kept losses is a finding however the values came to be written."""
        self._settle()
        self._judge_kept()
        if self.writer is not None and not self.writer.closed:  # (a closed writer wrote everything)
            self.writer.flush()

    def _judge_kept(self, nonfinite_only: bool = False, judge: bool = True) -> None:
        """Write the kept every-step values (their own records) and run the rules at the last step
        written (their findings wait in ``_unacted``); nothing when nothing is kept. With
        ``nonfinite_only``: the rules run only when a value written is not finite. Without
        ``judge`` (:meth:`state_dict`): the values are written and not judged; they are judged where
        they would have been had they stayed kept (:attr:`_written_early`): at the next save step of
        train, before another mode's record where one is not finite, at a flush, a full buffer, the
        training's end (trial 31f F5: a checkpoint's judgement was an evaluation more, and a
        ``patience: 2`` loss rule fired on two high losses ten steps apart, where it did not fire
        without the checkpoint, nor in ``tripwire watch``)."""
        kept = self._take_kept()
        early = self._written_early
        if not kept and early is None:
            return
        last, cols, finite = -1, frozenset(), True
        if kept:
            records = self._build_records(None, kept)[0]
            self._store_all(records)
            last, cols = kept[-1].step, _kept_collections(kept)
            if nonfinite_only or not judge:
                finite = all(np.isfinite(np.asarray(row, dtype=np.float64)).all()
                             for record in records for _, _, row in record.scalars)
        if early is not None:
            last, cols, finite = max(last, early[0]), cols | early[1], finite and early[2]
        if not judge:
            self._written_early = (last, cols, finite)
            self._early_count += len(kept)
            return
        self._written_early, self._early_count = None, 0
        if nonfinite_only and finite:
            self._train_unjudged = last
            self._unjudged_cols |= cols
            return
        cols |= self._unjudged_cols  # (kept values written before, with a validation: judged with these; else empty)
        self._train_unjudged, self._unjudged_cols = None, frozenset()
        self._unacted += self._evaluate(last, "train", self.mode_steps["train"] - 1, kept=cols)

    def _end_abandoned(self) -> None:
        """A hand-written loop's session (``framework`` ``python``) left open in this ``out_dir`` by
        this process, made in this very thread, whose loop cannot be running while this thread makes
        another: interrupted (Ctrl-C) or raised, the notebook cell run again, and the session object
        out of reach (no variable of a frame on this thread's stack holds it). It ends ``failed`` here,
        its records written, with a WARNING naming it, and this session writes after it (trial 38k: the
        new session was refused, "end that one first with Session.close()", for the rest of the
        kernel's life, with no handle left to close). A session made in another thread, by an
        integration, or held by a running frame's variable (two sessions of one script on one
        ``out_dir``) is left as it is: the writer refuses the directory then."""
        if self.framework != "python":
            return
        made = (os.getpid(), threading.get_ident())
        try:
            here = Path(self.out_dir).resolve()
        except OSError:
            return
        for other in list(_OPEN):
            if (other is self or other.framework != "python" or other.rank != self.rank
                    or _MADE.get(id(other)) != made or not _writing_here(other)):
                continue
            try:
                if Path(other.out_dir).resolve() != here:
                    continue
            except OSError:
                continue
            if _held_on_stack(other):
                continue  # (a variable of a running frame holds it: in use, or closable by name; the writer refuses)
            logger.warning("tripwire: the run %s was left open by an earlier Session of this process, made in this "
                           "thread (its loop interrupted or raised, the cell run again): it ends as failed now, its "
                           "records written, and this session writes after it", other.out_dir)
            if other.stop_reason is None:
                other._failure = ("the session was left open (its loop interrupted or raised) and a new Session of "
                                  "the same process for this out_dir ended it")
            other.close("failed")

    def _open_writer(self) -> RunWriter:
        self._end_abandoned()
        # how the earlier training of this worker ended, read before the writer removes its end marker
        # (the resume warning names a step a crash may have cut only where it ended so: trial 32d)
        self._earlier_end, self._earlier_reason = _end_status(self.out_dir, self.rank, reason=True)
        writer = RunWriter(
            self.out_dir,
            rank=self.rank,
            world_size=self.world_size,
            config=self.config.to_dict(),
            framework=self.framework,
            provides=self.provides,
            queue_size=self.config.writer.queue_size,
            fsync=self.config.writer.fsync,
        )
        # (switched_off always, {} when none: a run without the key was written before trial 26h)
        meta: dict[str, Any] = {"switched_off": dict(self._switched_off)}
        if self.history.every_step:  # readers of the run (tripwire watch) read the loss in save intervals
            meta["every_step"] = dict(self.history.every_step)
            # (and their train save ranges: where a train step has a record, for train_steps)
            meta["every_step_ranges"] = {name: {"start_step": s, "end_step": e, "steps": list(listed)}
                                         for name, (s, e, listed) in self.history.every_step_ranges.items()}
        if self.history.planned_steps is not None:
            meta["planned_steps"] = self.history.planned_steps
        writer.set_meta(**meta)
        self._write_trainings(writer)
        return writer

    def _trainings_meta(self) -> list[dict[str, Any]]:
        """The worker meta file's ``trainings`` (docs/format.md): a copy of :attr:`_trainings`."""
        return [{**t, "steps": dict(t["steps"])} for t in self._trainings]

    def _write_trainings(self, writer: RunWriter | None) -> None:
        """Where the later trainings through this session began, to ``writer``'s meta file when it is
        open and there is a later training (tripwire watch rearms its rules there; trial 25e)."""
        if writer is not None and not writer.closed and len(self._trainings) > 1:
            writer.set_meta(trainings=self._trainings_meta())

    def new_training(self, continued: bool | None = None) -> None:
        """A later training through this session (a second ``fit`` of a Keras callback or an MXNet
        estimator handler): a stop asked before, or a failure, is not its own (``stopped_by``,
        ``stop_reason`` and the failure are cleared, so it ends ``complete`` unless stopped again),
        and every rule is armed again (one that fired before fires again if the fault is still
        there); the findings stay. A rule of your own keeps its state.

        ``continued``: whether this fit continues training the same model, its weights as the last
        fit left them (the integration tells: the same model object with the same weights; the
        notebook habit of running ``model.fit`` again). Then each built-in rule keeps its view of
        the earlier fits, its state and the series it reads from the training's start (trial 25e:
        judged alone, a converged model's "train some more" fit was stopped by
        ``loss_not_decreasing``); only its look-back starts at this fit (trial 23v). False (a new
        model, or weights initialized again): each built-in rule judges only this training's steps,
        its running state restarted, as a fresh session's rule would (:meth:`BuiltinRule.rearm`;
        trials 25a, 25c: the earlier fit's losses stopped a healthy new model). ``None`` (not
        known): False, except right after another call with no step since (the same training,
        already armed as that call said: an integration's own path that calls this again).

        Where each training began, and whether it continued, is written to the run (the worker
        meta file's ``trainings``, docs/format.md): ``tripwire watch`` arms its rules again at
        those steps, as the session did. Called on an open session (no :meth:`close` since the
        earlier training), it first ends that training's judging as :meth:`close` would: the
        every-step values kept since its last save step are written and judged (a NaN loss in its last
        steps is a finding, as ``tripwire watch`` finds it) and the findings are acted on (a ``raise``
        action raises here, before the new training is armed)."""
        if continued is not None and not isinstance(continued, (bool, np.bool_)):
            raise ConfigError(f"new_training: continued={continued!r}; accepted: True (the same model continues "
                              f"training), False (a new training) or None (not known: a new training)")
        # the earlier training's end judged first, as close() does (trial 25h: called on an open
        # session, a NaN loss kept after its last save step was written but never judged, where
        # tripwire watch finds it; after close()/reopen() nothing is kept: nothing to do)
        self._judge_training_end()
        self.stopped_by = None
        self._stop_held = None
        self.stop_reason = None
        self._failed = False
        self._failure = None
        self._fired = set()
        last = self._trainings[-1]
        if continued is None and len(self._trainings) > 1 and last["steps"] == dict(self.mode_steps):
            return  # (armed by the call just before, which knew whether the fit continues)
        continued = bool(continued)
        self._trainings.append({"steps": dict(self.mode_steps), "began": time.time(), "continued": continued,
                                "planned_steps": self.history.planned_steps, "pid": os.getpid(),
                                "host": socket.gethostname()})
        self._write_trainings(self.writer)
        for rule in self.rules:  # (their look-back starts at this fit: trial 23v; a new training's rules
            # read and keep only its steps, trials 25a, 25c; a continued one's keep the earlier fits', 25e)
            if isinstance(rule, BuiltinRule):
                rule.rearm(self.mode_steps, continued=continued)

    def _judge_training_end(self) -> None:
        """The end of a training (:meth:`close`, and :meth:`new_training` on an open session): the
        step reduced in the background completed, the every-step values kept since the last save step
        written and judged (a NaN loss in the last steps is a finding), the rules that look back over
        the steps since their last evaluation judged at each mode's last step where their ``every``
        left steps after it (:func:`look_back_tails`), and the findings not yet acted on acted on.
        Training is over: a ``stop_training`` they ask for stops nothing, so the run is not marked
        ``stopped`` for it (an INFO line says the finding came after the training ended;
        trial 29j F2); a ``raise`` action raises here."""
        self._settle()
        if self.writer is None or not self.writer.closed:
            self._judge_kept()  # the last steps' losses since the last save step, judged too
            if self._train_unjudged is not None:  # (written with a validation that came after them)
                step, cols = self._train_unjudged, self._unjudged_cols
                self._train_unjudged, self._unjudged_cols = None, frozenset()
                self._unacted += self._evaluate(step, "train", self.mode_steps["train"] - 1, kept=cols)
            # the steps that a look-back rule's every left after its last evaluation (trial 32e F2: a
            # NaN loss after exploding_tensor's last evaluation with every: 20 was never judged)
            if not self._muted:
                for mode, step, indices in look_back_tails(self.rules, self.history, self.rank):
                    train_step = self.mode_steps["train"] - 1 if mode != "train" else -1
                    self._unacted += self._evaluate(step, mode, train_step, final=indices)
        if self._unacted:
            found, self._unacted = self._unacted, []
            self._act(found, None, ended=True)

    def reopen(self) -> None:
        """Continue the same run after :meth:`close` (a second ``fit`` or ``evaluate`` through one
        callback): a new writer appends to this worker's shard (its end marker is rewritten at the
        next close). Does nothing while the writer is open or when the session does not write. A stop
        asked before stays (an evaluation after a stopped fit ends ``stopped`` for it); a second
        training calls :meth:`new_training` too, which clears it (trial 42l: a hand loop's second fit
        after ``reopen()`` alone ended ``stopped`` for the first fit's finding)."""
        if self.writer is not None and self.writer.closed:
            self.writer = self._open_writer()
            self.closed_as = None
            _watch_exit(self)

    def close(self, status: str | None = None) -> None:
        """End the run for this worker: write the end marker (``status`` defaults to ``failed`` where
        it is called while an exception is handled or propagates, in an ``except`` or ``finally``
        block: a ``KeyboardInterrupt``, an error, not the ``raise`` action's ``TrainingStopped``, a
        ``StopIteration`` or ``sys.exit(0)``; to ``stopped`` when a rule stopped training, else
        ``failed`` when the training ended failed before a :meth:`reopen` (an evaluation after it),
        else ``complete``; an exception of your own control flow handled there:
        ``close("complete")``). The losses kept since the last save step are judged here, by the
        rules that read them, and a rule that looks back over every step since its last evaluation
        (``exploding_tensor``, ``similar_across_runs``) with ``every`` above 1 is evaluated once more
        at each mode's last step, whatever its ``every``, where steps came after its last evaluation
        (:func:`look_back_tails`; trial 32e F2); a ``stop_training``
        asked by what they find comes after the training ended and stops nothing: the finding is
        recorded, one INFO line says so, and the run is not ``stopped`` for it (a ``raise`` action raises here, and the
        run ends ``stopped``). What the rules and collections never read is said then, in a WARNING
        each (once a run), naming this rank under a world size above 1 (``tripwire: rank 1: rule
        'overfit': validation= ...``; trial 31b F6).

        A run that ends ``failed`` because the training raised holds why in its end marker's
        ``stop_reason`` (``Run.stop_reasons``, ``tripwire inspect``): the exception's type and the
        first line of its message (``IndexError: Target 10 is out of bounds.``), of the exception
        that left a ``with session:`` block, else of the one being handled where ``close("failed")``
        is called in an ``except`` block or an exception hook (the integrations' ``on_exception``),
        else of the one that ends the process for a run closed at exit. A SIGTERM names the signal
        instead, and a reason set before (:attr:`stop_reason`: the tuner's) is kept; a ``failed``
        with no exception at hand writes none (trial 27g F5: a crash left a ``failed`` run with no
        reason). :attr:`stop_reason` itself stays what the integration or the tuner set."""
        if status not in (None, "complete", "stopped", "failed"):  # ('fail' was written, and read as complete)
            raise ConfigError(f"close: status={status!r}; accepted: None, 'complete', 'stopped', 'failed'")
        if status is None and self.writer is not None and not self.writer.closed and _failing(sys.exc_info()[1]):
            # (trial 38k: a hand loop interrupted by Ctrl-C, closed in its finally block, ended complete)
            status = "failed"
        main = threading.current_thread() is threading.main_thread()
        if main:  # (a SIGTERM now waits until the run is closed: see _on_sigterm)
            _TERM.closing += 1
        try:
            self._close(status)
        finally:
            if main:
                _TERM.closing -= 1
                if _TERM.deferred and not _TERM.closing and not _TERM.exiting and _TERM.signum is not None:
                    _TERM.deferred = False
                    _restore_sigterm()
                    raise SystemExit(128 + _TERM.signum)  # (the SIGTERM that came while it closed)

    def _close(self, status: str | None) -> None:
        """:meth:`close`'s work."""
        try:
            if self._plan is not None and self._plan._pending:
                self.end_step()
            self._judge_training_end()
            # (each said once per session: a Keras evaluate() after fit closes the run again)
            # (trained: steps ran, whether or not a train record was written; trial 18a)
            trained = self.mode_steps["train"] > 0
            # what the rules and collections never read is said of a training that ended, not of one
            # that failed (trial 21a: a KeyError in the first training_step came after 8 WARNINGs of
            # a misconfiguration that did not exist)
            unsaid = [] if status == "failed" else (
                unmatched_inputs(self._judging(), self.history, trained) + self._unfed() + self._unjudged_rules()
                + self._read_in_vain() + self._never_saved() + self._rules_unjudged()
                + self._unmatched_collections() + self._uncollected_kinds() + self._unoffered_collections())
            for message in unsaid:
                key = _said_key(message)
                if key not in self._named_early:
                    self._named_early.add(key)
                    logger.warning("tripwire: %s%s", self._rank_prefix, self._of_this_rank(message))
        except BaseException as exc:  # (what was written stays readable: the shard is still closed)
            status = status or ("stopped" if _is_stop(exc) else "failed")
            raise
        finally:
            closer = getattr(self.backend, "close", None)
            if closer is not None:
                closer()
            _OPEN.discard(self)
            _MADE.pop(id(self), None)
            if not _OPEN:  # (the last run written here is closed: the SIGTERM handler before ours is back)
                _restore_sigterm()
            self._stop_held = None  # (the training is over: an evaluation after it, reopen(), is no training to stop)
            if self.writer is not None:
                # (a training that failed stays failed when an evaluation after it closes the run
                # again: trial 19g, a Keras evaluate() turned a failed fit's run "complete")
                status = status or ("stopped" if self.stopped_by is not None else "failed" if self._failed else "complete")
                kept_end = None
                if (self._evaluation and status == "complete" and self.stopped_by is None and self.stop_reason is None
                        and self._earlier_end in ("stopped", "failed")):
                    # (an evaluation appended to a run a training ended stopped or failed (count_on): the run keeps
                    # that end and its reason; trial 38p, a new callback's validate() made a stopped run complete)
                    status, kept_end = self._earlier_end, self._earlier_reason
                self._failed = self._failed or status == "failed"
                # (the signal, where it is why: not a SIGTERM that came while an exception ended the process, its
                # exit handler closing the run; trial 38n, the gloo error that ended it was lost)
                caused = _TERM.signum is not None and (
                    self._error is None or (isinstance(self._error, SystemExit) and self._error.code == 128 + _TERM.signum))
                if status == "failed" and caused and self.stop_reason is None:
                    # (trial 26i: a SIGTERM'd run read as a crash; the end marker says why it failed)
                    self.stop_reason = (f"{_signal_name(_TERM.signum)}: {_TERMINATED}; the session wrote its records "
                                        f"and ended the run failed")
                elif status == "failed" and self.stop_reason is None and self._failure is None:
                    # (trial 27g F5: a training that raised left a failed run with no reason)
                    error = self._error if self._error is not None else sys.exc_info()[1]
                    if error is not None and not _is_stop(error):
                        self._failure = exception_summary(error)
                summary: dict[str, Any] = {"findings": len(self.findings)}
                if self.stop_reason is not None or status == "stopped":  # (tripwire inspect says why)
                    if self.why_stopped is not None:
                        summary["stop_reason"] = self.why_stopped
                elif status == "failed" and self._failure is not None:
                    summary["stop_reason"] = self._failure
                if kept_end is not None:
                    summary["stop_reason"] = kept_end
                self.writer.close(status, summary)
                self.closed_as = status
            self._error = None

    @property
    def _rank_prefix(self) -> str:
        """``rank 1: `` in a distributed job (world size above 1), else nothing: what goes after
        ``tripwire: `` in a line every rank says of its own session (:meth:`close`'s and
        :meth:`name_unread_inputs`' warnings), as the ranks' stop lines name theirs (trial 31b F6: each
        rank said the same line with no rank, twice on one console for two ranks)."""
        return f"rank {self.rank}: " if self.world_size > 1 else ""

    def _of_this_rank(self, message: str) -> str:
        """``message`` (one :meth:`close` says), said of this rank where the job has several: a rule
        input read in a mode this rank recorded nothing in (``overfit``'s ``validation`` on a rank
        that does not evaluate) is said to be missing from this rank's records, not from the run,
        which may hold another rank's (trial 30b F5: a loop that validates on rank 0 alone heard on
        rank 1 that "no evaluation (mode eval) was recorded in this run"), with what to do about it."""
        if self.world_size < 2 or _UNRECORDED_IN_RUN not in message:
            return message
        head, tail = message.split(_UNRECORDED_IN_RUN, 1)
        mode = self._unrecorded_mode(head)
        return (f"{head}) was recorded by this rank (one of {self.world_size}; it recorded {tail} "
                f"on this rank; where another rank {mode} alone (a distributed loop that validates on rank 0), "
                f"that rank's rule judges its records and this rank's reads none: leave the rule out of this "
                f"rank's rules (docs/architecture.md, the DDP recipe)")

    @staticmethod
    def _unrecorded_mode(head: str) -> str:
        """What the rank that records a mode does, from the start of the message about it
        (``... no evaluation (mode eval``): ``evaluates``, ``tests``, ``predicts``."""
        mode = head.rsplit("(mode ", 1)[-1]
        return {"eval": "evaluates", "test": "tests", "predict": "predicts"}.get(mode, f"records mode {mode}")

    def __getstate__(self) -> dict[str, Any]:
        """A session that writes a run cannot be copied: ``pickle``, ``copy.copy`` and ``copy.deepcopy``
        raise a TypeError that names it (trial 37m: internal TypeErrors named an open file or a weak
        reference, and ``copy.copy`` shared its open writer, so two objects wrote one run). One made
        with ``write=False`` copies as any object."""
        if self.writer is not None:
            state = "while it writes its run" if not self.writer.closed else "(its run is closed)"
            raise TypeError(
                f"cannot copy or pickle {type(self).__name__}(out_dir={str(self.out_dir)!r}) {state}: its writer, "
                f"its file and its thread belong to this process. To write from another process, make a Session "
                f"there (a worker of a distributed job: rank= and world_size=); to read the run, "
                f"tripwire.open_run({str(self.out_dir)!r})")
        return dict(self.__dict__)

    def __repr__(self) -> str:
        """``Session('runs/exp1', rank=1 of 2, rules=['exploding_tensor', ...], steps={'train': 120}, open)``:
        where it writes (``write=False``: ``not written``), its rank in a distributed job, its rules,
        the steps of each mode it counted, and whether its run is ``open``, ``closed`` or ``stopped``
        (a rule or ``tripwire watch`` asked the stop; trial 31h F6: the default repr said nothing)."""
        where = repr(str(self.out_dir)) if self.writer is not None else "not written"
        rank = f", rank={self.rank} of {self.world_size}" if self.world_size > 1 else ""
        steps = {m: n for m, n in self.mode_steps.items() if n}
        state = "stopped" if self.stopped_by is not None else (
            "closed" if self.writer is not None and self.writer.closed else "open")
        return (f"{type(self).__name__}({where}{rank}, rules={[r.name for r in self.rules]}, steps={steps}, "
                f"{state})")

    @property
    def why_stopped(self) -> str | None:
        """Why training stopped, as the run's end marker says it: ``stop_reason`` (the tuner's, an
        integration's), else the finding that stopped it, its line naming the rank in a distributed
        job, rank 0 too (as the log line does: trial 30g F7, rank 0's stored reason named no rank and
        rank 1's did); None when nothing stopped it."""
        if self.stop_reason is not None:
            return self.stop_reason
        return None if self.stopped_by is None else self._finding_line(self.stopped_by)

    def set_meta(self, **values: Any) -> None:
        """Facts about this worker's training for readers of the run (its worker meta file, e.g.
        ``trial``: what :func:`tripwire.tune._trial.trial_facts` gives); nothing without a writer."""
        if self.writer is not None and not self.writer.closed:
            self.writer.set_meta(**values)

    def name_unread_inputs(self, rules: Sequence[Rule] | None = None,
                           why: str = "named after the first epoch: the training has offered no such value so far",
                           skip: Callable[[str], bool] | None = None) -> list[str]:
        """Name now, in a warning each, the rules' inputs that match nothing captured so far (a loss
        rule's ``loss`` in a fit whose training step returns no loss): integrations call this at the
        end of the first epoch, so that a long fit need not end before it is said. ``rules``: default
        the train-mode rules (inputs of other modes may come later, a validation every few epochs);
        an integration that knows every name its training logs passes the rules that read them.
        ``why``: said in brackets after each message; ``skip``: messages said another way already.
        An input read in a mode that has no record yet (``overfit``'s ``validation`` before the first
        evaluation) is not said now: :meth:`close` says it, unless ``skip`` took it. :meth:`close`
        does not repeat what was named or skipped here. Under a world size above 1 each line names
        this rank (``tripwire: rank 1: rule ...``), as :meth:`close`'s do. Returns the messages (without
        the rank)."""
        if rules is None:
            rules = [r for r in self.rules if tuple(getattr(r, "modes", ())) == ("train",)]
        rules, trained = list(rules), self.mode_steps["train"] > 0
        unread = [m for m in unmatched_inputs(rules, self.history, trained) if _said_key(m) not in self._named_early]
        # (an input read in a mode not recorded yet, overfit's validation before the first evaluation,
        # is said when the training ends, unless said another way: trials 27g, 27h)
        now = set(unmatched_inputs(rules, self.history, trained, unrecorded=False))
        said = [m for m in unread if skip is not None and skip(m)]
        out = [m for m in unread if m in now and m not in said]
        # (what was said another way is not said again at close either: trial 25i, an XGBoost fit with
        # a validation set alone heard its loss rules named at the first round, then twice more at close)
        self._named_early.update(map(_said_key, said + out))
        for message in out:
            logger.warning("tripwire: %s%s (%s)", self._rank_prefix, message, why)
        return out

    @contextlib.contextmanager
    def _judged_after_end(self) -> Iterator[None]:
        """Steps ended in the block are judged after the training ended (XGBoost's last round, at
        ``after_training``): a stop they ask for is said as one that stopped nothing (:meth:`_say_stop`)."""
        self._judging_after_end = True
        try:
            yield
        finally:
            self._judging_after_end = False

    @contextlib.contextmanager
    def _unjudged(self) -> Iterator[None]:
        """Steps ended in the block are stored but not judged by the rules (their state, the rules
        disabled and the findings so far unchanged): an integration recording what the rules judged
        already, such as the round at which XGBoost's boosting stopped (trial 22d). A step still
        reduced in the background when the block ends is settled, unjudged, first."""
        held, self._muted = self._muted, True
        try:
            yield
        finally:
            try:
                self._settle()
            finally:
                self._muted = held

    def _judging(self) -> list[Rule]:
        """The rules still judging: neither switched off nor disabled after raising."""
        return [r for i, r in enumerate(self.rules) if i not in self._disabled]

    def _unfed(self) -> list[str]:
        """One message per rule that needs a collection of which the run holds no tensor although
        a train step was saved in this session: the integration offered none (a Keras activation
        given as a lambda, an MXNet block hybridized before it was registered ...), so the rule
        never judged. A rule that made a finding read something, whatever collection it asked for
        (``exploding_tensor`` reads every collection the run holds; trial 32a F2: it was said to
        have had nothing to read right after its finding on a custom collection's tensor), as
        ``tripwire watch`` reads it too."""
        if "train" not in self._batch_saved:
            return []
        have = list(self.history.collections())
        hint = "" if self.framework == "python" else f" (see what the {self.framework} integration captures, and when)"
        found = {f.rule for f in self.findings if f.kind == "finding"}
        by_missing: dict[tuple[str, ...], list[str]] = {}  # rules missing the same collections: one message
        for rule, missing in unfed_rules(self._judging(), have).items():
            if rule not in found:
                by_missing.setdefault(tuple(missing), []).append(rule)
        out = []
        for missing, rules in by_missing.items():
            known = "; ".join(dict.fromkeys(self._empty_causes[c] for c in missing if c in self._empty_causes))
            if not known and missing == ("gradients",):  # (a hand loop's fp16 scaler skipping: trial 30g F2)
                known = scaler_skipped_note(self.history, self.rank, self.framework) or ""
            why = known or _NONE_IN_MODEL.get(missing)
            why = f"; {why}" if why else ""
            # (trial 28e F10: said as "this run has no 'gradients' collection" where the config has it: the
            # config's collection is there, and what the training offered is said as it was)
            left_out = [c for c in missing if c in self._missed and c not in self._matched]
            # (trial 31h F6: "the config has the collection" where the rules added it, the config naming none)
            own = sum(c in self.config.collections for c in missing)
            what = "the collection" if len(missing) == 1 else "these collections"
            config = (f"the config has {what}" if own == len(missing) else
                      f"the rules asked for {what}" if not own else f"the config and the rules ask for {what}")
            offered = (f"{config}, and the training offered tensors of "
                       f"{'its kind' if len(missing) == 1 else 'their kinds'} that the include/exclude patterns of "
                       f"{', '.join(map(repr, left_out))} leave out (named below)" if left_out else
                       f"{config}, but the training offered no such tensor")
            # (the integration's own cause, empty_because: no pointer at what it captures; 30a fixer's note)
            out.append(f"{unfed_message(rules, missing, have)}: {offered}{why}{'' if known else hint}, so "
                       f"{'the rule' if len(rules) == 1 else 'these rules'} never judged")
        return out

    def _histogram_of(self, name: str, kind: str) -> Collection | None:
        """The collection whose histogram (bins and range) tensor ``name``, offered as ``kind``, keeps
        at every step a histogram of it is saved: the first of the session's collections (in the
        config's order) that takes it and keeps a histogram, whichever of them are due at the step
        (trial 27d: the series switched between two collections' bins from step to step, as one or the
        other was due). Where they ask for different ones, a WARNING names them, once a tensor."""
        takes = tuple(c for c in self.collections.values() if c.reduction.histogram and c.matches(name, kind))
        self._hist_of[name] = takes[0] if takes else None
        if len(takes) > 1:
            _say_histograms_differ(name, takes)
        return self._hist_of[name]

    def _note_offer(self, name: str, kind: str, due: tuple[Collection, ...], took: tuple[Collection, ...]) -> None:
        """A tensor offered or asked about (first time per name, kind and set of due collections: see
        :meth:`StepPlan.select`): which due collections of its kind took it or not, and the first
        names per kind (:data:`_OFFERED_NAMES`) for the messages of :meth:`close`. Says nothing itself:
        what a hand-written loop offers that no collection takes is said by :meth:`_say_uncaptured`,
        from :meth:`StepPlan.add`."""
        names = self._offered.setdefault(kind, [])
        if len(names) < _OFFERED_NAMES and name not in names:
            names.append(name)
        for c in due:
            if c in took:
                self._matched.add(c.name)
            elif c.accepts_kind(kind):
                self._missed.add(c.name)

    def _say_uncaptured(self, name: str, kind: str) -> None:
        """A hand-written loop's offer (:meth:`StepPlan.add`) that no due collection took: where no
        collection of the config takes it at any step, said once per kind (trial 20d: collections=
        replaced the defaults, and the loss the loop offered every step was dropped without a
        word). Not for :meth:`StepPlan.select`, a question (trial 28e F3)."""
        if any(c.matches(name, kind) for c in self.collections.values()):
            if len(self._taken_elsewhere) < _SELECT_CACHE:
                self._taken_elsewhere.add((name, kind))  # (taken at another step: not due now)
            return
        self._unkept_kinds.add(kind)
        if narrowing := [c for c in self.collections.values() if c.kinds is not None and kind in c.kinds]:
            # trial 22a: said "no collection takes gradients; name 'gradients'" of a tensor that the
            # user's own include left out of the gradients collection: said as what it is, once
            logger.info("tripwire: %r, offered as %s, is not captured: the include/exclude patterns of %s leave "
                        "it out (%s); the rules reading %s judge the tensors captured", name, kind,
                        ", ".join(f"collections.{c.name}" for c in narrowing),
                        "; ".join(f"include {list(c.include)}" + (f", exclude {list(c.exclude)}" if c.exclude else "")
                                  for c in narrowing), kind)
            return
        # trial 23l: "no collection takes gradients" where a custom collection of any kind took
        # another gradients tensor: its patterns are what leave this one out
        anykind = [c for c in self.collections.values() if c.kinds is None]
        patterns = "; ".join(f"collections.{c.name}: include {list(c.include)}"
                             + (f", exclude {list(c.exclude)}" if c.exclude else "") for c in anykind)
        logger.warning("tripwire: %r, offered as %s, is not captured: %s (collections: %s); to keep it, name "
                       "%r among the collections (collections= replaces the default set; include_collections= "
                       "adds to it)", name, kind,
                       f"the patterns of the collections for any kind leave it out ({patterns}), and no "
                       f"collection of this config is for {kind}" if anykind else
                       f"no collection of this config takes {kind}",
                       ", ".join(sorted(self.collections)) or "none", kind)

    def switch_off(self, names: Iterable[str], why: str | None = None) -> list[str]:
        """Switch off the rules named for the rest of the run: the integration knows they cannot
        judge this training and has said so in a WARNING of its own (an XGBoost regression objective
        and the class rules), so :meth:`close` does not name them again as having read nothing.

        Every name given, configured here or not, is recorded in the run with ``why`` (the worker
        meta file's ``switched_off``, ``{rule: why}``; docs/format.md): ``tripwire watch`` does not
        judge those rules on this run, says "not judged: the training switched them off: <why>", and
        does not count them as unjudged (exit 3). ``why`` defaults to "the <framework> integration
        switched it off". Kept in :meth:`state_dict` (a resumed run keeps them off). Returns the
        configured rules' names switched off."""
        if why is not None and (not isinstance(why, str) or not why.strip()):
            raise ConfigError(f"switch_off: why={why!r}; accepted: None or a non-empty string saying why the rules "
                              f"cannot judge this training")
        wanted = [str(n) for n in dict.fromkeys(names)]
        reason = " ".join(why.split()) if why is not None else f"the {self.framework} integration switched it off"
        off = [i for i, r in enumerate(self.rules) if r.name in wanted]
        self._disabled.update(off)
        new = {n: reason for n in wanted if self._switched_off.get(n) != reason}
        if new:
            self._switched_off.update(new)
            self.set_meta(switched_off=dict(self._switched_off))
        return [self.rules[i].name for i in off]

    @property
    def switched_off(self) -> dict[str, str]:
        """``{rule: why}``: the rules the integration switched off (:meth:`switch_off`), as the run records them."""
        return dict(self._switched_off)

    def unavailable(self, kinds: Iterable[str]) -> None:
        """Kinds the integration cannot offer in this training and has said so itself (one WARNING
        of its own: an XGBoost gblinear booster has no trees): :meth:`close` does not name their
        collections again as having captured nothing."""
        self._unavailable.update(kinds)

    def empty_because(self, collections: Iterable[str], why: str) -> None:
        """Why the integration knows these collections stay empty in this training (an MXNet block
        hybridized: no forward hook runs inside it): :meth:`close`'s "had nothing to read" gives
        this reason instead of the plain one (trial 19d: "a model with no ReLU layer" of a
        hybridized ReLU net)."""
        for c in collections:
            self._empty_causes[c] = why

    def _rules_unjudged(self) -> list[str]:
        """One message per rule that says it could not judge what it was given (:meth:`Rule.unjudged`:
        ``class_imbalance``'s minority class of too few samples; trial 41g) and made no finding."""
        out = []
        found = {f.rule for f in self.findings}
        for rule in self._judging():
            why = None if rule.name in found else unjudged_reason(rule)
            if why:
                out.append(f"rule {rule.name!r} judged nothing: {why}")
        return out

    def _unjudged_rules(self) -> list[str]:
        """One message per rule that asked for data in modes this session ran, but judges none of
        the modes it ran (trial 22m: a FunctionRule whose requirements name train and eval, left at
        the default modes=train, over an XGBoost training whose evaluation sets hold validation data
        only: every step was an eval step, and the rule, with stop_training, guarded nothing)."""
        ran = {m for m in MODES if self.mode_steps[m] > 0 and self.history.steps(m, self.rank)}  # (with records)
        out = []
        for rule in self._judging():
            if set(rule.modes) & ran:
                continue
            try:
                wanted = sorted({m for req in rule.requirements() for m in req.modes} & ran, key=MODES.index)
            except Exception:  # noqa: BLE001 - (a rule whose requirements() raises is refused when built)
                continue
            if wanted:
                out.append(f"rule {rule.name!r} never judged: it judges {', '.join(rule.modes)} steps (its modes), and "
                           f"this session recorded {', '.join(sorted(ran, key=MODES.index))} steps only, where it asked for "
                           f"data in {', '.join(wanted)}; give it modes={list(wanted)!r} to judge them")
        return out

    def _unoffered_collections(self) -> list[str]:
        """One message per tensor collection the config names whose kinds the training never
        offered in this session, although it saved steps (activations of a hybridized MXNet net:
        the collection was asked for by name and captured nothing, without a word)."""
        if not self._batch_saved:
            return []
        out = []
        # (a session that saved no train step, an evaluate/test/predict alone, offers no weights or
        # gradients: nothing to say about collections of those)
        not_here = set(SCALAR_KINDS) if "train" in self._batch_saved else set(SCALAR_KINDS) | _TRAIN_ONLY_KINDS
        if set(self._batch_saved) <= {"predict"}:  # (prediction has no labels: trial 24c, a predict after a fit)
            not_here.add("labels")
        offered_in = OFFERED_IN.get(self.framework, {})
        for name, c in self.config.collections.items():
            kinds = c.kinds if c.kinds is not None else (name,) if name in _ALL_KINDS else None
            if kinds is None or set(kinds) <= not_here | self._unavailable or any(k in self._offered for k in kinds):
                continue
            # only where it was asked for: in a mode that saved steps, that its save enables, and where the
            # integration offers one of its kinds (trial 27d: a Lightning fit said that 'predictions', saved
            # in predict, captured nothing, where a fit offers no predictions at its train steps)
            # (of the modes with a batch step saved: a mode with summary records alone, Lightning's
            # validation whose steps fell on no save step, was said to have been offered nothing; trial 35c)
            due = {m for m in self._batch_saved if self._mode_save(self.collections.get(name, c), m).enabled}
            if not any(due & offered_in.get(k, due) for k in kinds):
                continue
            hint = "" if self.framework == "python" else f" (see docs/{self.framework}.md for what it captures, and when)"
            # (who offered nothing: a predict or evaluate alone is no training; trial 42a)
            who = "the training" if "train" in self._batch_saved else " and ".join(
                f"the {m} steps" for m in sorted(due))
            out.append(f"collection {name!r} captured nothing: {who} offered no tensor of its kinds "
                       f"({', '.join(kinds)}) in this session{hint}")
        return out

    def _uncollected_kinds(self) -> list[str]:
        """One message for the kinds offered that no collection of the config takes (a collections
        mapping that sets up gradients only: the loss and metrics handed to the session went
        nowhere, without a word). Of an integration's offers: a hand-written loop's were said as they
        were offered (:meth:`_say_uncaptured`, trial 21f), and a kind it only asked about with
        :meth:`StepPlan.select` was offered nowhere (trial 28e F3)."""
        if self.framework == "python":
            return []
        lost = [k for k in self._offered if k not in self._unkept_kinds
                and not any(c.accepts_kind(k) for c in self.collections.values())]
        if not lost:
            return []
        what = "; ".join(f"{k!r} ({', '.join(self._offered[k][:4])})" for k in lost)
        return [f"tensors offered as {what} went to no collection: the config's collections "
                f"({', '.join(self.collections) or 'none'}) take none of those kinds, so they were not captured; "
                f"add {', '.join(map(repr, lost))} to collections to capture them"]

    def _unmatched_collections(self) -> list[str]:
        """One message per collection that was due when tensors of its kinds came and took none of
        them (its include/exclude patterns match nothing: it captures nothing)."""
        out = []
        for c in self.collections.values():
            if c.name in self._matched or c.name not in self._missed:
                continue
            kinds = c.kinds if c.kinds is not None else tuple(self._offered)
            seen = list(dict.fromkeys(n for k in kinds for n in self._offered.get(k, [])))  # (a name of two kinds: once)
            if seen:
                # the near misses first (trial 28e F11: an include of '^fc1\\.' over a Keras fit listed
                # fc1/output, fc/output ... and not fc1/kernel, the name the user had to see)
                seen, swapped = _nearest_names(seen, c.include)
                match = "matches" if len(swapped) == 1 else "match"
                near = (f" ({_name_list(swapped, 3)} {match} the include patterns where '/' and '.' are taken as the "
                        f"same separator: the names here use {_separator_of(swapped)})") if swapped else ""
                # (trial 25g: a trainer.test() after the fit, a session of its own, said that a collection of
                # fc1's weights and gradients "captured nothing", which the fit had captured: outside
                # training no parameter is offered, so the message says where it matched nothing)
                modes = sorted(self._batch_saved | self._summarized, key=MODES.index)
                where = f" in {', '.join(modes)}" if modes else ""
                untrained = ("" if "train" in self._batch_saved or c.kinds is not None else
                             " (this session ran no training step: weights, biases and gradients are offered in "
                             "training only, so a collection of those matches nothing here)")
                out.append(
                    f"collection {c.name!r} matched no tensor{where} (include {list(c.include)}, exclude "
                    f"{list(c.exclude)}), so it captured nothing{where}; names offered look like: "
                    f"{', '.join(seen[:6])}{near}{untrained}")
        return out

    def _captured_in(self, mode: str, collection: str) -> bool:
        """Does the run hold a value of a tensor of ``collection`` in ``mode`` from this worker (a
        summary step's activations, say)?"""
        h = self.history
        for tensor in h.collections().get(collection, []):
            if h.array_steps(tensor, "raw", mode, self.rank) or any(
                    len(h.series(tensor, r, mode, self.rank)[0]) for r in h.reductions(tensor)):
                return True
        return False

    def _wanted_in(self, mode: str) -> set[str]:
        """The collections something wants captured in ``mode``: those the config names (the
        user's, or the default set where it names none), and those the requirements of a rule
        judging ``mode`` (its ``modes``) ask for, or a requirement asks for in ``mode``
        (:attr:`Requirement.modes <tripwire.Requirement.modes>`: ``overfit`` reads eval losses). A
        collection that only rules of other modes added (``dead_relu``'s ``relu_outputs``, a train
        rule) is not: nothing reads it in ``mode`` (trial 32d F8)."""
        wanted = set(self.config.collections)
        for rule in self._judging():
            judges = mode in rule.modes
            try:
                wanted.update(req.collection for req in rule.requirements() if judges or mode in req.modes)
            except Exception:  # noqa: BLE001 - (a rule whose requirements() raises is refused when built)
                continue
        return wanted

    def _never_saved(self) -> list[str]:
        """One message per eval/test/predict mode that ran batches in this session none of which
        was a save step, naming the collections wanted in it (:meth:`_wanted_in`: the config's, or a
        rule's that reads that mode) that hold something captured outside training (not weights,
        gradients and the like, which only training steps offer; nor losses and metrics where the
        mode had a summary record, which keeps them, as the callbacks' validation ends do) and so
        captured nothing. A collection that only rules of other modes asked for is not named (trial
        32d F8: "nothing of relu_outputs was captured in eval", which ``dead_relu``, a train rule,
        alone had asked for)."""
        out = []
        for mode in ("eval", "test", "predict"):
            ran = self.mode_steps[mode]
            if mode not in self._batch_ran or mode in self._batch_saved:
                continue
            kept = {"losses", "metrics"} if mode in self._summarized else set()
            if mode in _NO_SCALARS_IN.get(self.framework, ()):
                # (trial 25g: after a Lightning predict the advice to save every predict batch stored
                # nothing: a prediction offers no loss or metric there)
                kept = {"losses", "metrics"}
            wanted = self._wanted_in(mode)
            missed = [c.name for c in self.collections.values()
                      if c.name in wanted and self._mode_save(c, mode).enabled
                      and (c.kinds is None or set(c.kinds) - kept - _TRAIN_ONLY_KINDS)
                      and not (mode in self._summarized and self._captured_in(mode, c.name))
                      and not (c.name in self._missed and c.name not in self._matched)]  # (named as matching nothing)
            if missed:
                spec = self._mode_save(self.collections[missed[0]], mode)
                # (trial 19d: with eval's interval 1 already set, the advice was that interval; the
                # start_step that eval inherits was what kept every step of it out)
                if spec.start_step >= ran:
                    cause = (f" (every {mode} step so far came before start_step {spec.start_step}: save.start_step "
                             f"holds in every mode unless save.modes.{mode} sets its own)")
                    fix = {"start_step": 0} if spec.interval <= 1 else {"interval": 1, "start_step": 0}
                else:
                    cause, fix = "", {"interval": 1}
                setting = ", ".join(f"{k}: {v}" for k, v in fix.items())
                summary = _SUMMARY_CALL.get(self.framework, "Session.step('{mode}', ..., summary=True)").format(mode=mode)
                out.append(
                    f"no {mode} step up to {mode} step {ran - 1} was a save step (interval "
                    f"{spec.interval}, start_step {spec.start_step}){cause}: nothing of "
                    f"{', '.join(missed)} was captured in {mode}. To save every {mode} batch: "
                    f"save: {{modes: {{{mode}: {{{setting}}}}}}}"
                    + ("" if kept else f"; or, for one value per evaluation in a hand-written loop, {summary}"))
        return out

    def __enter__(self) -> Session:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # (as close() in a finally block: sys.exit(0) and StopIteration end no run failed; trial 42h)
        failed = exc_type is not None and _failing(exc)
        if failed:
            self._error = exc  # (the end marker's stop_reason names it: trial 27g F5)
        self.close("failed" if failed else None)

    def state_dict(self) -> dict[str, Any]:
        """Steps, rule state and what rules fired. Kept every-step values are written to the run
        first, and the writer is waited for, so a checkpoint never holds a value the run lacks, even
        when the process dies right after it. A checkpoint changes nothing the rules judge: the
        values it writes are not judged then (as :meth:`flush` judges them) but where they would
        have been without it, at the next save step (trial 31f F5); a checkpoint taken before that
        holds them as such (``written_early``), and a session resumed from it judges them there."""
        self._settle()
        self._judge_kept(judge=False)
        if self.writer is not None and not self.writer.closed:  # (a closed writer wrote everything)
            self.writer.flush()
        early = self._written_early
        return {
            "mode_steps": dict(self.mode_steps),
            "global_step": self.global_step,
            "rules": [plain_state(r.state_dict()) for r in self.rules],
            "rule_names": [r.name for r in self.rules],
            "rule_classes": [_rule_class(r) for r in self.rules],
            "fired": sorted(self._fired),
            "disabled": sorted(self._disabled),
            **({"switched_off": dict(self._switched_off)} if self._switched_off else {}),
            "planned_steps": self.history.planned_steps,
            "rank": self.rank,
            **({"trainings": self._trainings_meta()} if len(self._trainings) > 1 else {}),
            # what close() said, for the next stage's session in this process (a Lightning validate,
            # test or predict after a fit: trial 26a); a checkpoint loaded in another process says it again
            "said": {"pid": os.getpid(), "keys": sorted(self._named_early)},
            **({"written_early": {"step": early[0], "collections": sorted(early[1]), "finite": early[2],
                                  "count": self._early_count}} if early is not None else {}),
        }

    def continues(self, judged_from: Mapping[str, int] | None = None) -> None:
        """This training continues the run's earlier records (its steps count on from theirs, e.g.
        XGBoost's ``xgb_model=``): no WARNING about appending to a run that holds records, and a
        check's finding the run holds already is not recorded again (:meth:`record_finding`).

        ``judged_from``: the steps (per mode) from which the rules judge this training alone (the
        XGBoost callback arms them again at a continued model's first new round): recorded as where
        a training of its own began, not continuing the earlier one's judging, so that ``tripwire
        watch`` arms its rules there as the session did (trial 37f: ``Run.trainings`` held nothing, and
        the replay judged the continued rounds with the first training's, missing what the training
        found)."""
        self._appending = False
        self._continuing = True
        # the earlier trainings the run records, kept: this one continues the last of them (trial 36q: a
        # continued XGBoost training's writer replaced the meta file, and Run.trainings was lost)
        earlier = (self._prior_meta or {}).get("trainings")
        if (len(self._trainings) <= 1 and isinstance(earlier, list) and len(earlier) > 1
                and all(isinstance(t, Mapping) for t in earlier)):
            self._trainings = [dict(t) for t in earlier]
            self._write_trainings(self.writer)
        if judged_from is not None and self.writer is not None and not self.writer.closed:
            self._trainings = self._earlier_trainings() + [
                self._training_entry({str(m): int(s) for m, s in judged_from.items()}, fresh=False)]
            self._write_trainings(self.writer)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from what :meth:`state_dict` returned (a checkpoint's): the step counters, and each
        rule's state, whether it fired and whether it was disabled. The rules are matched by
        identity, their name and their place among the rules of that name (a changed parameter keeps
        the state): a rule the checkpoint does not hold starts fresh, the state of a rule no longer
        configured is dropped, and a rule whose class changed under its name starts fresh (it gets no
        state of another class); one INFO line names them (a WARNING for a changed class). A state of
        another rank (a DDP checkpoint holds rank 0's) is not loaded: this rank rebuilds its own."""
        if not isinstance(state, Mapping) or not {"mode_steps", "rules"} <= set(state):
            got = f"a mapping with the keys {sorted(map(str, state))[:8]}" if isinstance(state, Mapping) else \
                f"a {type(state).__name__}"
            raise ConfigError(f"load_state_dict: got {got}; accepted: what Session.state_dict() returned (keys "
                              f"mode_steps, global_step, rules, rule_names, fired, disabled, planned_steps); a "
                              f"model's state_dict, say, would silently restart the rules")
        # (trial 41d, 41k: a checkpoint loaded after this session's first steps, into the run's own out_dir
        # too, where the documented resume creates the session: said, its steps go on from the checkpoint's)
        early = (self.writer is not None and not self.writer.closed and not state.get("carried")
                 and (self.writer.records_written > 0 or bool(self.history.workers)))
        counted = ", ".join(f"{int(v)} {m}" for m, v in state["mode_steps"].items() if int(v) > 0)
        if early:
            logger.warning(
                "tripwire: load_state_dict: this session has run steps already (%s holds its records): a "
                "checkpoint is loaded right after the session is created, before its first step, and continues "
                "the run the checkpoint's training wrote in that out_dir; the step counters now follow the "
                "checkpoint's (%s step(s))", self.out_dir, counted or "no")
        self._appending = False  # a resumed run: appending is the point
        self._continuing = True
        self.mode_steps.update({k: int(v) for k, v in state.get("mode_steps", {}).items()})
        self.global_step = int(state.get("global_step", 0))
        if "global_step" not in state and self.writer is not None and self.writer.appending:
            # (trial 43d: Keras's fresh callback resuming at an epoch began its global steps at 0 again, and
            # Run.dataframe read every record of the crashed training as gone back over)
            self.global_step = self._global_step_at(int(self.mode_steps.get("train", 0)))
        saved_rank = state.get("rank", self.rank)  # (a state saved before the key: this rank's)
        if "global_step" in state and isinstance(saved_rank, int):
            self._evals_at_checkpoint = self._validation_at_checkpoint(saved_rank)
        if self.writer is not None and self.writer.appending:
            if not state.get("carried"):  # (an integration's state handed to its next stage: no checkpoint)
                self._name_steps_past_the_checkpoint()
            if not self.history.workers:
                self._replay_checkpointed()
        elif self.writer is not None and saved_rank == self.rank and any(int(v) > 0 for v in state["mode_steps"].values()):
            # (trial 35h: a checkpoint loaded into a session of another out_dir said nothing, and the rules'
            # history, read back from the run, started empty)
            if not early and not self.history.workers:
                logger.warning(
                    "tripwire: load_state_dict: the checkpoint counts %s step(s), but %s holds no run of this worker: "
                    "the rules keep their state, and their history (the values they read back) starts empty; to "
                    "continue the run, create the session (or callback) with the run's out_dir", counted,
                    self.out_dir)
        if (self.writer is not None and self.writer.appending) or (self.writer is None and self._findings_file is not None):
            self._held_before = {_found_key(f) for f in self._findings_held() if f.kind == "finding" and f.worker == self.rank}
        if saved_rank == self.rank:
            saved_states = list(state.get("rules", []))
            # (trial 26a: a rule added to or removed from the callback's list was a ConfigError, even with a
            # new out_dir: the state of each rule still configured is loaded into it, the others start fresh)
            to_saved = self._match_saved_rules(state, len(saved_states))
            for i, j in to_saved.items():
                rule = self.rules[i]
                try:
                    rule.load_state_dict(restored_state(saved_states[j]))
                except Exception as exc:
                    raise ConfigError(f"load_state_dict: rule {rule.name!r} ({type(rule).__qualname__}) could not load "
                                      f"its saved state: {type(exc).__name__}: {exc}") from exc
            from_saved = {j: i for i, j in to_saved.items()}
            self._fired = {from_saved[j] for j in map(int, state.get("fired", [])) if j in from_saved}
            self._disabled = {from_saved[j] for j in map(int, state.get("disabled", [])) if j in from_saved}
        else:
            self._own_rule_state(int(saved_rank), {str(m): int(v) for m, v in state.get("mode_steps", {}).items()})
        trainings = state.get("trainings")
        if isinstance(trainings, list) and len(trainings) > 1 and all(
                isinstance(t, Mapping) and isinstance(t.get("steps"), Mapping) for t in trainings):
            # (a resumed later training: the run says where its trainings began, for watch; trial 25e)
            # (the facts of a training of its own, trial 26i: fresh, its start, command line and config, kept)
            self._trainings = [{**{k: t[k] for k in _TRAINING_FACTS if k in t},
                                "steps": {str(m): int(v) for m, v in t["steps"].items()}, "began": t.get("began"),
                                "continued": bool(t.get("continued")), "planned_steps": t.get("planned_steps")}
                               for t in trainings]
            self._write_trainings(self.writer)
        if state.get("planned_steps") is not None:
            self.set_planned_steps(int(state["planned_steps"]))
        off = state.get("switched_off")
        if isinstance(off, Mapping) and off:  # (the run records them for this session's writer too)
            self._switched_off.update({str(k): str(v) for k, v in off.items()})
            self.set_meta(switched_off=dict(self._switched_off))
        said = state.get("said")
        if isinstance(said, Mapping) and said.get("pid") == os.getpid() and isinstance(said.get("keys"), list):
            self._named_early.update(str(k) for k in said["keys"])
        early = state.get("written_early")
        if saved_rank == self.rank and isinstance(early, Mapping) and isinstance(early.get("collections"), list):
            # (losses the checkpoint wrote before their save step: judged at this session's next one)
            self._written_early = (int(early.get("step", -1)), frozenset(map(str, early["collections"])),
                                   bool(early.get("finite", True)))
            self._early_count = int(early.get("count", 0))

    def _match_saved_rules(self, state: Mapping[str, Any], count: int) -> dict[int, int]:
        """``{session rule index: saved rule index}`` for the rules whose state a checkpoint holds,
        matched by name and place among the rules of that name, not by position; what differs is
        said in one line. A state saved without ``rule_names`` (older): by position."""
        names = [str(n) for n in state.get("rule_names", [])]
        if not names:
            return {i: i for i in range(min(len(self.rules), count))}
        classes = state.get("rule_classes")
        classes = [str(c) for c in classes] if isinstance(classes, list) and len(classes) == len(names) else None
        saved: dict[tuple[str, int], int] = {}
        for j, name in enumerate(names[:count]):
            saved[(name, sum(1 for (n, _) in saved if n == name))] = j
        matched: dict[int, int] = {}
        fresh: list[str] = []
        foreign: list[str] = []
        seen: dict[str, int] = {}
        for i, rule in enumerate(self.rules):
            place = seen[rule.name] = seen.get(rule.name, -1) + 1
            j = saved.pop((rule.name, place), None)
            if j is None:
                fresh.append(rule.name)
            elif classes is not None and classes[j] != _rule_class(rule):
                foreign.append(f"{rule.name!r} (now {_rule_class(rule)}, the checkpoint's {classes[j]})")
            else:
                matched[i] = j
        dropped = [name for (name, _) in saved]
        if fresh or dropped or foreign:
            parts = []
            if fresh:
                parts.append(f"{_name_list(fresh)} {'starts' if len(fresh) == 1 else 'start'} fresh (not in the "
                             f"checkpoint)")
            if dropped:
                parts.append(f"the saved state of {_name_list(dropped)} is dropped (no longer configured)")
            if foreign:
                parts.append(f"{', '.join(foreign)} {'starts' if len(foreign) == 1 else 'start'} fresh: its class "
                             f"changed under its name, and a state of another class is not loaded")
            logger.log(logging.WARNING if foreign else logging.INFO,
                       "tripwire: this session's rules differ from the checkpoint's: %s; the other rules resume with "
                       "their saved state", "; ".join(parts))
        return matched

    def _own_rule_state(self, saved_rank: int, until: Mapping[str, int]) -> None:
        """A checkpoint holds another rank's rule state (Lightning writes rank 0's alone, and every
        rank of a DDP fit loads it): this rank keeps its own instead. Its rules start afresh over
        its own records (read back from its shard), and those that fired on this rank before the
        checkpoint do not fire again: its findings in the run at a step the checkpoint had done
        (``until``: the checkpoint's step counters, a finding of mode ``m`` at a step below
        ``until[m]``). A finding after the checkpoint (the attempt that crashed after it found a
        fault there) does not count: the resumed rule finds it again, and its ``stop_training`` or
        ``raise`` acts (:meth:`_found_again`), as on the rank whose state the checkpoint holds
        (trial 28a F1: rank 1's finding at step 50, after the step-40 checkpoint, silenced its rule,
        and the resumed fit ran to its end ``complete``). Rank 0's state would have silenced a rule
        here because it had fired there, and fired here again one that had.

        A rank that writes no records (``writer.ranks`` leaves it out) has no records of its own to
        read back: its rules judge from the checkpoint's step on, said in a WARNING (trial 28a F2)."""
        self._fired, self._disabled = set(), set()
        index = {r.name: i for i, r in enumerate(self.rules)}
        for f in self._own_findings_in_run():
            if (f.worker == self.rank and f.kind != "error" and f.rule in index
                    and 0 <= f.step < until.get(f.mode, 0)):
                self._fired.add(index[f.rule])
        logger.debug("tripwire: worker %d resumed from rank %d's checkpoint state: its own rule state rebuilt "
                     "(fired before: %s)", self.rank, saved_rank, sorted(self.rules[i].name for i in self._fired))
        if self.writer is None and self.rules:
            left_out = not self.config.writer.writes(self.rank)
            logger.warning(
                "tripwire: rank %d resumed from rank %d's checkpoint state at train step %d, and its rules start "
                "afresh there: the checkpoint holds rank %d's rule state only, and this rank writes no records "
                "(%s), so it has none of its own to read back; they judge its steps from %d on (a window such as "
                "loss_not_decreasing's fills again before it judges), while those that fired on it before the "
                "checkpoint (its findings in the run) stay quiet. To judge the whole training after a resume, "
                "let every rank write its records (writer: {ranks: all}, the default)",
                self.rank, saved_rank, until.get("train", 0), saved_rank,
                f"writer.ranks {list(self.config.writer.ranks)} leaves it out" if left_out else "write=False",
                until.get("train", 0))

    def _findings_held(self) -> list[Finding]:
        """The findings in the run's findings files (``findings/*.jsonl``; a damaged line, or one
        still being written, skipped: ``open_run`` names it), read without reading the shards: what a
        resumed session does not write again (see :meth:`_found_again`)."""
        out: list[Finding] = []
        for path in sorted((Path(self.out_dir) / FINDINGS_DIR).glob("*.jsonl")):
            try:
                lines = path.read_text(encoding="utf-8").split("\n")[:-1]  # (a last line without its newline: not yet)
            except (OSError, UnicodeDecodeError):
                continue
            for line in lines:
                try:
                    out.append(Finding.from_dict(json.loads(line)))
                except (ValueError, KeyError, TypeError, AttributeError):
                    continue
        return out

    def _own_findings_in_run(self) -> list[Finding]:
        """The findings the run holds, for a session that writes to it: its writer's, or the findings
        file of a rank that ``writer.ranks`` leaves out (trial 26h: such a rank read none, and a rule
        that had fired on it before the checkpoint fired again after a resume). Where the run cannot
        be read on this node, that rank's own findings file alone; ``[]`` when nothing is there."""
        if self.writer is None and self._findings_file is None:
            return []  # (a session that writes nothing to a run: no findings of its own in one)
        try:
            return open_run(self.out_dir).findings
        except TripwireError:  # (no run readable here: rank 0's files elsewhere, or none yet)
            pass
        if self._findings_file is None:
            return []
        out = []
        try:
            lines = self._findings_file.read_text(encoding="utf-8").splitlines()
        except OSError:
            return []
        for line in lines:
            try:
                out.append(Finding.from_dict(json.loads(line)))
            except (ValueError, KeyError, TypeError, AttributeError):  # (a damaged line: open_run names it)
                continue
        return out

    def _replay_checkpointed(self) -> None:
        """This worker's records of the steps the checkpoint says were done, read back from its
        shard into the rules' history: a resumed session's rules judge the whole training, not
        only what came after the checkpoint (``loss_not_decreasing`` measured its fall from the
        resumed step on, ``exploding_gradient`` its growth from the first norm after it).

        Of a step written by several attempts (a training that crashed after an earlier checkpoint,
        resumed, and crashed again) the history holds the records of the attempt that wrote it last,
        the one whose training led to this checkpoint (:func:`~tripwire._history.live_records`; an
        attempt begins where the records' global steps go back): the history ascends, each step
        judged once (trial 26i: it held steps 0..2340 then 2000..2999, and ``loss_not_decreasing``
        bisected unsorted steps). The records of a second training appended into the same
        ``out_dir`` before (its steps started again) are left out the same way: the steps it ran
        again are its own."""
        from ._format import WORKERS_DIR, decoded_steps, iter_records, shard_name
        from ._history import live_records

        shard = Path(self.out_dir) / WORKERS_DIR / shard_name(self.rank)
        self.writer.flush()  # type: ignore[union-attr]
        try:
            size = shard.stat().st_size
        except OSError:
            return
        until, spath = dict(self.mode_steps), str(shard)
        # every step record in write order: (mode, step, wall, layout, values, arrays, declare), and per
        # mode the places, steps and attempts of its records
        records: list[tuple[Any, ...]] = []
        by_mode: dict[str, tuple[list[int], list[int], list[int]]] = {}
        attempt, last_global = 0, -1
        try:
            with open(shard, "rb") as f:
                for rec in iter_records(f, spath, 0, size):
                    h = rec.header
                    at_steps = h["global_steps"] if h.get("type") == "steps" else [h.get("global_step", -1)]
                    for args, at in zip(decoded_steps(rec, spath), at_steps):
                        if isinstance(at, int) and at >= 0:  # (a writing session's global steps only increase)
                            if at <= last_global:
                                attempt += 1
                            last_global = at
                        places, steps, attempts = by_mode.setdefault(args[0], ([], [], []))
                        places.append(len(records))
                        steps.append(int(args[1]))
                        attempts.append(attempt)
                        records.append((*args, at if isinstance(at, int) and at >= 0 else -1))
        except TripwireError as exc:  # a damaged shard: the rules start from the checkpoint, as they did
            logger.warning("tripwire: %s: the records before the checkpoint could not be read back for the rules "
                           "(%s); they judge from the resumed step on", shard, exc)
            return
        keep = np.zeros(len(records), dtype=bool)
        for mode, (places, steps, attempts) in by_mode.items():
            at = np.asarray(places, dtype=np.int64)
            keep[at] = live_records(np.asarray(steps, dtype=np.int64), np.asarray(attempts, dtype=np.int64)) & (
                np.asarray(steps, dtype=np.int64) < until.get(mode, 0))
        for (mode, step, wall, layout, values, arrays, declare, at), ok in zip(records, keep.tolist()):
            if ok:
                self.history.add_step(mode, step, self.rank, wall, layout, values, arrays, declare, global_step=at)
            else:  # (its tensors' collections are still known: it may be the first record to declare them)
                self.history._declare_collections(declare)

    def _validation_at_checkpoint(self, saved_rank: int) -> tuple[int, int] | None:
        """``(the checkpoint's eval counter, the eval step after them)`` where the run holds eval
        steps written after the checkpoint before any later train step (a validation right at the
        checkpoint: Lightning's ``ModelCheckpoint(every_n_train_steps=...)`` at an epoch's last batch,
        before its validation), else None. Read from the shard of the worker whose state the
        checkpoint holds (its steps and ``global_step``), else this worker's: the records from that
        ``global_step`` on, in write order, up to the first train step the checkpoint had not done."""
        from ._format import WORKERS_DIR, iter_records, shard_name

        first_eval, next_train, since = self.mode_steps["eval"], self.mode_steps["train"], self.global_step
        workers = Path(self.out_dir) / WORKERS_DIR
        shard = next((p for p in (workers / shard_name(saved_rank), workers / shard_name(self.rank)) if p.is_file()),
                     None)
        if shard is None:
            return None
        if self.writer is not None and not self.writer.closed:
            self.writer.flush()
        held: list[int] = []
        last_at = -1
        try:
            size = shard.stat().st_size
            with open(shard, "rb") as f:
                for mode, step, at in _step_headers(iter_records(f, str(shard), 0, size)):
                    if at < since:
                        continue
                    if mode == "train" and step >= next_train:
                        break  # (training went on: a validation after it is run again)
                    if mode == "eval" and step >= first_eval:
                        held.append(step)
                        last_at = max(last_at, at)
        except (OSError, TripwireError, KeyError, TypeError, ValueError):  # (unreadable: the counter as saved)
            return None
        return (first_eval, max(held) + 1, last_at) if held else None

    def _settle_resumed_evals(self, mode: str) -> None:
        """The first step after a resume whose run holds a validation taken right at the checkpoint
        (:meth:`_validation_at_checkpoint`): a train step (the resumed training does not run that
        validation again: Lightning fast-forwards past it) numbers the next validations after it, as
        the uninterrupted training did (trial 26h: eval steps [1, 2, 2] instead of [1, 2, 3], and
        value('val_loss', 2) was the next epoch's); an eval step (that validation run again) keeps the
        checkpoint's counter, its records appended after the earlier ones."""
        first_eval, after, last_at = self._evals_at_checkpoint  # type: ignore[misc]
        self._evals_at_checkpoint = None
        if mode == "train" and self.mode_steps["eval"] == first_eval:
            self.mode_steps["eval"] = after
            # (and its global steps after that validation's records, which it keeps: trial 43m, Run.dataframe
            # read them superseded, gone back over by the resumed session, which began before them)
            self.global_step = max(self.global_step, last_at + 1)

    def _name_steps_past_the_checkpoint(self) -> None:
        """A resume from a checkpoint older than the run's last records (a crash after it): the
        records of the steps the resumed training does again stay, and the new ones are appended
        after them. Said once, with the steps (read from this worker's shard). Where the earlier
        training failed or ended without closing the run (no end marker when this session's writer
        opened: killed, out of memory), the last step it wrote may hold only part of its tensors (a
        crash inside the step: Lightning's gradients and learning rates are written before its loss
        and weights), so the message names it, as a possibility tied to that end: a tensor of that
        step may be there once, the resumed record alone (trial 31b F3: the WARNING said that a
        reader sees two records of every step run again, and a script dropping the first of each
        dropped a good loss). After a training that ended ``complete`` or ``stopped`` (its end
        marker says so) no step was cut short, and nothing is said of one (trial 32d: "may hold
        only some of its tensors (a crash inside that step)" at every resume). The training that wrote
        them is named by how it ended, "went on after it and ended 'complete'" ('stopped', 'failed'), or
        "and ended" where no end marker tells (trial 33h F2: "stopped" was said whatever its end)."""
        self.writer.flush()  # type: ignore[union-attr]
        try:
            run = open_run(self.out_dir)
            past = []
            # the modes a resumed fit does again (its training and its validations: each counts its
            # own steps); test and predict records after the checkpoint are not repeated by it
            for mode in ("train", "eval"):
                again = [s for s in run.steps(mode, worker=self.rank) if s >= self.mode_steps[mode]]
                if again:
                    past.append(f"{mode} step {again[0]}" if len(again) == 1 else
                                f"{mode} steps {again[0]} to {again[-1]}")
        except TripwireError:  # nothing readable yet
            return
        if past:
            last = self._last_step_written()
            cut = ""
            # (the shard's last step is the earlier training's where this writer wrote none yet)
            earlier = self.writer is not None and self.writer.records_written == 0
            ended = {None: "ended without closing the run (killed, out of memory, a crash)",
                     "failed": "failed"}.get(self._earlier_end)
            if (ended is not None and earlier and last is not None and last[0] in ("train", "eval")
                    and last[1] >= self.mode_steps[last[0]]):
                cut = (f"; {last[0]} step {last[1]} is the last that training wrote before it {ended}: if it "
                       f"ended inside that step, that step holds only some of its tensors, and one it lacks holds "
                       f"that step once, the resumed record")
            held = self._evals_at_checkpoint
            if held is not None:
                at = (f"eval step {held[0]}" if held[1] - held[0] == 1 else f"eval steps {held[0]} to {held[1] - 1}")
                once = (f"; {at}, a validation right at the checkpoint (before any later train step), is not run "
                        f"again by a resumed training that starts by training (Lightning's does): it is there once, "
                        f"and the resumed validations count on from eval step {held[1]}")
            else:
                once = "; a validation after the checkpoint that the resumed training does not run again is there once"
            # how that training ended, by its end marker's status (trial 33h F2: "the training that stopped after
            # it" was said after one that ran to its end, 'complete', and after one killed; "stopped" is a status)
            status = self._earlier_end if self._earlier_end in ("complete", "stopped", "failed") else None
            how = "ended" if status is None else f"ended {status!r}"
            logger.warning(
                "tripwire: %s holds %s of worker %d, written after this checkpoint (by the training that went on "
                "after it and %s); the resumed training's records of those it runs again are appended after them, "
                "so a reader sees both of each (series() returns such a step twice, the resumed one second)%s%s",
                self.out_dir, " and ".join(past), self.rank, how, cut, once)

    def count_on(self, mode: str) -> int:
        """Number this session's next steps of ``mode`` after the last one its run holds of this
        worker, where they would repeat them, and return the next one: for a stage that trains
        nothing appended to a run (Lightning's ``trainer.validate()``, ``test()``, ``predict()`` with
        a new callback, or with a checkpoint older than the run's last validation). Its steps are no
        training's run again: repeated, they superseded the run's own (trial 38d: a validation of an
        earlier checkpoint replaced the fit's later ``val_loss`` at its eval step, and
        ``Run.train_steps`` placed both before training). A session that writes nothing, or a new
        run, keeps its count."""
        if mode not in MODES:
            raise ConfigError(f"count_on: mode={mode!r}; accepted: {', '.join(map(repr, MODES))}")
        self._evaluation = True
        step, global_step = self._stored_next(mode)
        self.mode_steps[mode] = max(self.mode_steps[mode], step)
        # (its global steps after the run's too: Run.train_steps places its records after the run's last train
        # step, as those of a callback that held the run; trial 38j: at -1, "before training")
        self.global_step = max(self.global_step, global_step)
        return self.mode_steps[mode]

    def _global_step_at(self, train_from: int) -> int:
        """The global step a training that resumes this worker's run at train step ``train_from``,
        with no global step of its own (a state without one), begins at: that of the first record of
        the run's last writing session at a train step ``>= train_from`` (a resume from an older
        checkpoint goes back over it and every record after it, ``Run.dataframe``'s ``superseded``),
        else one past the run's last (a resume where the crashed training stopped goes back over
        none). 0 where the run holds nothing of this worker that can be read."""
        self.writer.flush()  # type: ignore[union-attr]
        try:
            run = open_run(self.out_dir)
            steps = run.wall_times("train", self.rank)[0]
            at = run.global_steps("train", self.rank)
            last = max((int(g.max()) for m in MODES for g in (run.global_steps(m, self.rank),) if len(g)), default=-1)
        except TripwireError:
            return 0
        if len(at) == len(steps) and len(at):
            began = np.flatnonzero(np.r_[True, at[1:] <= at[:-1]])[-1]  # (the last session's first record)
            later = np.flatnonzero(steps[began:] >= train_from)
            if len(later):
                return int(at[began + later[0]])
        return last + 1

    def _stored_next(self, mode: str) -> tuple[int, int]:
        """One past this worker's last step of ``mode`` in the run it appends to, and one past its last
        global step: ``(0, 0)`` where it appends to nothing, or holds none that can be read."""
        if self.writer is None or not self.writer.appending:
            return 0, 0
        self.writer.flush()
        try:
            run = open_run(self.out_dir)
            steps = run.steps(mode, worker=self.rank)
            last = max((int(g.max()) for m in MODES for g in (run.global_steps(m, self.rank),) if len(g)), default=-1)
        except TripwireError:  # (nothing of this worker readable: nothing to repeat)
            return 0, 0
        return (int(steps[-1]) + 1 if steps else 0), last + 1

    def _last_step_written(self) -> tuple[str, int] | None:
        """``(mode, step)`` of the last step record in this worker's shard, in write order (None where
        it has none or cannot be read): the step a training that crashed was in, or had ended."""
        from ._format import WORKERS_DIR, iter_records, shard_name

        shard = Path(self.out_dir) / WORKERS_DIR / shard_name(self.rank)
        last: tuple[str, int] | None = None
        try:
            size = shard.stat().st_size
            with open(shard, "rb") as f:
                for mode, step, _ in _step_headers(iter_records(f, str(shard), 0, size)):
                    last = (mode, step)
        except (OSError, TripwireError, KeyError, TypeError, ValueError):  # (unreadable: nothing said of it)
            return None
        return last


_CONTINUE = Decision()
_RAW = ("raw",)
_TRAINING_FACTS = ("fresh", "started", "argv", "config", "pid", "host")
"""Keys of a ``trainings`` entry besides steps, began, continued and planned_steps (docs/format.md)."""


def look_back_tails(rules: Sequence[Rule], history: History, worker: int | None
                    ) -> list[tuple[str, int, list[int]]]:
    """``[(mode, step, [rule index, ...])]``: where a training ends (a session's close or
    ``new_training``, a worker's end in ``tripwire watch``), the rules that look back over every step
    since their last evaluation (:attr:`Rule.looks_back <tripwire.Rule.looks_back>`:
    ``exploding_tensor``, ``similar_across_runs``) with ``every`` above 1 whose last evaluation of a mode came before the
    last step ``history`` holds of it (by ``worker``, its record written last): each is evaluated once
    more there, whatever its ``every``, so that the steps after its last evaluation are judged, its
    findings dated at their own steps (trial 32e F2: a NaN loss after ``exploding_tensor``'s last
    evaluation with ``every: 20`` was never judged, in the session or by ``tripwire watch``). A rule
    never evaluated in a mode, one whose ``every`` is 1 (evaluated at every record), and a last step
    before its ``start_step`` are left as they are. Modes in :data:`MODES` order."""
    due: dict[tuple[str, int], list[int]] = {}
    for i, rule in enumerate(rules):
        if not rule.looks_back or getattr(rule, "every", 1) <= 1:
            continue
        evaluated = getattr(rule, "_last_eval", {})
        for mode in rule.modes:
            done = evaluated.get(mode)
            if done is None:
                continue
            steps = history.wall_times(mode, worker)[0]
            if not len(steps):
                continue
            last = int(steps[-1])
            if done < last and last >= rule.start_step:
                due.setdefault((mode, last), []).append(i)
    order = sorted(due.items(), key=lambda kv: MODES.index(kv[0][0]))
    return [(mode, step, indices) for (mode, step), indices in order]


def _finding_name(finding: Finding) -> str:
    """``rule 'spike' at step 24 (train)``: a finding in a few words, for a log line."""
    return f"rule {finding.rule!r} at step {finding.step} ({finding.mode})"


def _kept_collections(kept: Iterable[_Kept]) -> frozenset[str]:
    """The names of the collections the kept every-step values went to."""
    return frozenset(c.name for k in kept for c in k.cols)


def _found_key(finding: Finding) -> tuple[str, int, str, int]:
    """What makes a finding the same one again: its rule, worker, mode and step."""
    return (finding.rule, finding.worker, finding.mode, finding.step)


def _end_status(out_dir: Path, rank: int, reason: bool = False) -> Any:
    """The ``status`` of this worker's end marker in ``out_dir`` (``complete``, ``stopped``,
    ``failed``: how the earlier training that wrote its shard ended), or None where there is none (no
    earlier training, or one that ended without closing the run: killed, out of memory) or it cannot
    be read (a damaged marker: read as absent, as :class:`~tripwire.Run` reads it). ``reason=True``:
    ``(status, stop_reason)``."""
    from ._format import WORKERS_DIR, end_marker_name

    try:
        marker = json.loads((Path(out_dir) / WORKERS_DIR / end_marker_name(rank)).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        marker = None
    status = marker.get("status") if isinstance(marker, dict) else None
    status = status if isinstance(status, str) else None
    if not reason:
        return status
    why = marker.get("stop_reason") if isinstance(marker, dict) and status is not None else None
    return status, (why if isinstance(why, str) else None)


def _worker_meta(out_dir: Path, rank: int) -> dict[str, Any] | None:
    """This worker's meta file in ``out_dir`` (an earlier training's), or None (none, unreadable)."""
    from ._format import WORKERS_DIR, worker_meta_name

    try:
        meta = json.loads((Path(out_dir) / WORKERS_DIR / worker_meta_name(rank)).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None

_ALL_KINDS = frozenset(
    ("weights", "biases", "gradients", "losses", "metrics", "activations", "activation_inputs", "relu_outputs",
     "inputs", "labels", "predictions", "optimizer", "hyperparameters", "feature_importance", "trees")
)
_TRAIN_ONLY_KINDS = frozenset(("weights", "biases", "gradients", "optimizer", "hyperparameters", "feature_importance", "trees"))
"""Kinds that integrations offer at training steps only."""


_NOT_VALUES = (str, bytes, dict, set, frozenset)
_NUMBERS = (bool, int, float, complex)  # (complex: saved as its magnitude |z|, by StepPlan.add: see _magnitude)
_NO_ITEM = object()


def _check_value(name: str, value: Any, session: Session) -> None:
    """Refuse what :meth:`StepPlan.add` cannot reduce, where it is offered, with a
    :class:`ConfigError` naming the tensor, its type and what is accepted: a tensor or an array
    (anything with a ``shape`` and a ``dtype``: torch, numpy, JAX, TensorFlow, MXNet) of a numeric
    dtype, a number, or a list or tuple of numbers; where the session was given a backend of its
    own (an integration's, yours), any other object is that backend's to reduce. The type of a
    tensor taken is remembered (``session._value_types``). Trial 28d F2: an LSTM's forward output
    ``(output, (h, c))`` or a ``PackedSequence`` (an RNN given packed input: a named tuple of
    tensors) was taken, then every later ``end_step`` raised a numpy ``ValueError`` naming no
    tensor, the step's loss was lost, and ``close()`` said that no loss was offered. Refused here,
    before the step holds it: the values offered at the step before and after it are kept, and
    the session goes on."""
    kind = type(value)
    if isinstance(value, _NUMBERS):
        return
    if isinstance(value, (np.ndarray, np.generic)):
        if value.dtype.kind not in "biufc":
            raise ConfigError(f"add({name!r}): got a numpy {'array' if isinstance(value, np.ndarray) else 'scalar'} "
                              f"of dtype {value.dtype} ({value!r:.60}); accepted: a tensor, an array or a number, of a "
                              f"numeric dtype")
        if isinstance(value, np.generic):
            session._value_types.add(kind)  # (a numpy scalar type has one dtype)
        return
    if isinstance(value, _NOT_VALUES):
        raise ConfigError(f"add({name!r}): got a {kind.__name__} ({value!r:.60}); accepted: a tensor, an array or "
                          f"a number")
    if isinstance(value, (list, tuple)):
        if kind.__name__ == "PackedSequence":
            raise ConfigError(
                f"add({name!r}): got a PackedSequence (the output of an RNN given packed input); accepted: a tensor, "
                f"an array or a number: offer its .data (the packed values of every sequence), or the padded output, "
                f"torch.nn.utils.rnn.pad_packed_sequence(output)[0]")
        bad = _first_non_number(value)
        if bad is not _NO_ITEM:
            what = "a tensor" if hasattr(bad, "shape") and hasattr(bad, "dtype") else \
                "None" if bad is None else f"a {type(bad).__name__}"
            raise ConfigError(
                f"add({name!r}): got a {kind.__name__} of {len(value)} holding {what} ({type(bad).__name__}); "
                f"accepted: a tensor, an array or a number, or a list of numbers. A module's forward output is a "
                f"tuple for an LSTM or GRU ((output, (h, c)), (output, h)) and for nn.MultiheadAttention ((output, "
                f"weights)): offer its first element, output[0], or each tensor under a name of its own")
        if any(isinstance(v, (list, tuple)) for v in value):
            shape = _nested_shape(value)
            if isinstance(shape, str):  # (trial 33f F1: numpy's bare ValueError at end_step, the step's loss lost)
                raise ConfigError(
                    f"add({name!r}): got a ragged {kind.__name__} of {len(value)} ({shape}): its nested lists are not "
                    f"all of one shape, so it makes no array; accepted: a tensor, an array or a number, or a list of "
                    f"numbers (nested lists each of the same length: a rectangular list); offer each part under a "
                    f"name of its own")
        return
    if (hasattr(value, "shape") and hasattr(value, "dtype")) or not session._made_without_backend:
        session._value_types.add(kind)  # (a framework's tensor class, or one a backend of the session's own takes)
        return
    raise ConfigError(f"add({name!r}): got a {kind.__module__}.{kind.__qualname__} ({value!r:.60}), which is no "
                      f"tensor, array or number; accepted: a tensor, an array or a number (anything with a shape "
                      f"and a dtype), or a list of numbers")


def _nested_shape(values: Sequence[Any], where: str = "") -> tuple[int, ...] | str:
    """The shape of a (nested) list or tuple of numbers (``[[1, 2], [3, 4]]``: ``(2, 2)``), or where it
    is ragged, which items differ (``item [1] is a list of 2, item [0] a number``)."""
    shapes: list[tuple[int, ...]] = []
    for i, v in enumerate(values):
        if isinstance(v, (list, tuple)):
            inner = _nested_shape(v, f"{where}[{i}]")
            if isinstance(inner, str):
                return inner
            shapes.append((len(v), *inner))
        else:
            shapes.append(())
    for i, shape in enumerate(shapes):
        if shape != shapes[0]:
            return f"item {where}[{i}] is {_shape_words(shape)}, item {where}[0] {_shape_words(shapes[0])}"
    return shapes[0] if shapes else ()


def _shape_words(shape: tuple[int, ...]) -> str:
    """``()``: a number; ``(2,)``: a list of 2; ``(2, 3)``: a 2x3 nested list."""
    if not shape:
        return "a number"
    return f"a list of {shape[0]}" if len(shape) == 1 else f"a {'x'.join(map(str, shape))} nested list"


def _first_non_number(values: Sequence[Any]) -> Any:
    """The first item of a (nested) list or tuple that is no number, else ``_NO_ITEM``."""
    for v in values:
        if isinstance(v, (list, tuple)):
            inner = _first_non_number(v)
            if inner is not _NO_ITEM:
                return inner
        elif not isinstance(v, _NUMBERS) and not (isinstance(v, np.generic) and v.dtype.kind in "biufc"):
            return v
    return _NO_ITEM


#: How an integration's hand-written loop writes one record per evaluation (the default: the Session's).
_SUMMARY_CALL = {"mxnet": "hook.begin_step('{mode}', summary=True)"}
#: Per framework, the modes whose steps offer no loss or metric (Lightning's predict_step cannot log;
#: Keras's predict computes no loss): a collection of those captures nothing there at any interval.
_NO_SCALARS_IN: dict[str, frozenset[str]] = {"lightning": frozenset({"predict"}), "keras": frozenset({"predict"})}

_NONE_IN_MODEL = {
    ("relu_outputs",): ("a model with no ReLU layer (a GRU, an LSTM, sigmoid or tanh layers only) has none, and a ReLU "
                        "called as a function in a forward pass is no layer and is not captured (F.relu, torch.relu, "
                        "the default activation of nn.TransformerEncoderLayer and nn.TransformerDecoderLayer; "
                        "keras.ops.relu in a layer's call): give it as a layer (nn.ReLU(); activation=nn.ReLU() in "
                        "nn.TransformerEncoderLayer; keras.layers.ReLU() or activation='relu')"),
    ("activation_inputs",): ("a model with no ReLU, tanh or sigmoid layer has none (an activation called as a "
                             "function in a forward pass, F.relu or torch.tanh, is no layer and is not captured)"),
}
"""The plain reason a collection can be empty whatever the integration does."""


def _step_headers(records: Iterable[Any]) -> Iterator[tuple[str, int, int]]:
    """``(mode, step, global_step)`` of each step of a shard's records, in write order (a ``steps``
    record's each; -1 for a record without its global step)."""
    for rec in records:
        h = rec.header
        if h.get("type") == "steps":
            for step, at in zip(h["steps"], h["global_steps"]):
                yield h["mode"], int(step), int(at)
        else:
            yield h["mode"], int(h["step"]), int(h.get("global_step", -1))


_INPUT_MESSAGE = re.compile(r"^rule ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"): ([A-Za-z_]\w*)=")
"""The start of :func:`~tripwire.rules._common.unmatched_inputs`'s messages: ``rule 'overfit': validation=``."""


_UNRECORDED_IN_RUN = ") was recorded in this run (it recorded "
"""Where :func:`~tripwire.rules._common.unmatched_inputs` says that a rule input's mode has no
record in the run (``no evaluation (mode eval) was recorded in this run (it recorded mode train
only), ...``): said of one rank under a world size above 1 (:meth:`Session._of_this_rank`)."""


def _said_key(message: str) -> str:
    """What a message :meth:`Session.close` says is about, so that it is said once however its text
    changes: a rule input that matches nothing by its rule and parameter (its text lists what was
    captured, which grows: trial 26a, the WARNING was said again after each of validate, test and
    predict), any other message by its text."""
    m = _INPUT_MESSAGE.match(message)
    return f"rule {m.group(1)}: {m.group(2)}" if m else message


def _name_list(names: list[str], most: int = 5) -> str:
    """``'a', 'b' and 3 more`` for a message."""
    shown = ", ".join(map(repr, names[:most]))
    return shown if len(names) <= most else f"{shown} and {len(names) - most} more"


_REGEX_SYNTAX = re.compile(r"\\(.)|[\^$*+?()\[\]{}|]")
"""A pattern's regular-expression syntax: an escape (its character kept) or an operator (dropped)."""


def _pattern_text(pattern: str) -> str:
    """The literal text of a regular expression, for a likeness to names: ``'^fc1\\.'`` -> ``'fc1.'``."""
    return _REGEX_SYNTAX.sub(lambda m: m.group(1) or "", pattern)


def _either_separator(pattern: str) -> re.Pattern[str] | None:
    """``pattern`` with each ``'.'`` it matches literally (``\\.``) and each ``'/'`` matching either
    separator (``'^fc1\\.'`` matches ``fc1/kernel``); None where the pattern has neither, or the
    rewritten one does not compile (a ``/`` inside a class)."""
    if "\\." not in pattern and "/" not in pattern:
        return None
    # (one pass over the escapes: '\\\\.' is an escaped backslash, then any character)
    either = re.sub(r"\\.|/", lambda m: "[./]" if m.group() in ("\\.", "/") else m.group(), pattern)
    try:
        return re.compile(either)
    except re.error:
        return None


def _nearest_names(names: list[str], include: Sequence[str]) -> tuple[list[str], list[str]]:
    """``names`` ranked by their likeness to the ``include`` patterns: first those a pattern matches
    once ``'.'`` and ``'/'`` are the same separator (Keras's ``fc1/kernel`` for ``'^fc1\\.'``, written
    with Lightning's names), then by :class:`difflib.SequenceMatcher`'s ratio against the pattern's
    text, best first, the order given breaking ties. Returns the ranked names and those matched by
    the separator."""
    import difflib

    texts = [t for t in map(_pattern_text, include) if t]
    swaps = [p for p in map(_either_separator, include) if p is not None]
    swapped = {n for n in names if any(p.search(n) for p in swaps)}

    def likeness(name: str) -> float:
        return max((difflib.SequenceMatcher(None, t, name, autojunk=False).ratio() for t in texts), default=0.0)

    ranked = sorted(names, key=lambda n: (n not in swapped, -likeness(n)))  # (stable: the order given breaks ties)
    return ranked, [n for n in ranked if n in swapped]


def _separator_of(names: list[str]) -> str:
    """How ``names`` separate their parts, for a message: ``'/'``, ``'.'`` or both."""
    slash, dot = any("/" in n for n in names), any("." in n for n in names)
    return "'/' and '.'" if slash and dot else "'/'" if slash else "'.'"


def _check_offer(name: Any, kind: Any, where: str = "add") -> None:
    """A tensor's name is a string and its kind a built-in collection name (a misspelled kind
    matched no collection and the tensor was dropped without a word). ``where``: the call named."""
    if not isinstance(name, str):
        raise ConfigError(f"{where}: name={name!r} ({type(name).__name__}); accepted: a string")
    if not name:  # (trial 24f: a tensor named "" was taken)
        raise ConfigError(f"{where}: name=''; accepted: a non-empty tensor name (e.g. 'loss', 'fc1.weight')")
    _check_kind(kind, f"{where}({name!r})")


def _check_kind(kind: Any, where: str) -> None:
    """``kind`` is a built-in collection name, else a ConfigError from ``where`` (``add('loss')``,
    ``wants``, ``keeps``) with a "did you mean" and the accepted kinds."""
    try:
        known = kind in _ALL_KINDS
    except TypeError:  # (unhashable)
        known = False
    if not known:
        raise ConfigError(f"{where}: kind={kind!r}{did_you_mean(str(kind), sorted(_ALL_KINDS))}; accepted: "
                          f"{', '.join(sorted(_ALL_KINDS))}")


_FRAMEWORK_LIBRARIES = ("torch", "pytorch", "tensorflow", "tf", "jax", "numpy", "flax", "sklearn")


def _check_framework(framework: Any) -> str:
    """``Session(framework=...)``: the name of the integration that feeds the session (``python`` for a
    hand-written loop; ``lightning``, ``keras``, ``xgboost``, ``mxnet`` for tripwire's callbacks, or a
    third party's own name), a non-empty string (trial 24f: framework=5 and framework="pytorch" were
    taken; a hand-written torch loop's is ``python``, which keeps the warnings meant for such loops)."""
    accepted = ("accepted: 'python' (the default: a hand-written loop, whatever library computes it), or the "
                "name of the integration that feeds the session ('lightning', 'keras', 'xgboost', 'mxnet', or "
                "your own)")
    if not isinstance(framework, str) or not framework.strip():
        raise ConfigError(f"framework: got {framework!r} ({type(framework).__name__}); {accepted}")
    if framework.lower() in _FRAMEWORK_LIBRARIES:
        raise ConfigError(f"framework: got {framework!r}, a library, not an integration; {accepted}. The backend "
                          f"that reduces the tensors is backend= (None: numpy, or torch's at the first torch tensor)")
    return framework


def _check_backend(backend: Any) -> None:
    """``Session(backend=...)``: None or a :class:`~tripwire.ReductionBackend` object, checked here (trial
    24f: backend="torhc" was taken and the first save step failed with an AttributeError)."""
    if backend is None:
        return
    missing = [m for m in ("reduce", "histogram", "to_numpy") if not callable(getattr(backend, m, None))]
    if missing:
        hint = (" (a name: leave backend=None, and torch tensors get the torch backend at the first one offered)"
                if isinstance(backend, str) else f" (it has no {', '.join(missing)} method)")
        raise ConfigError(f"backend: got {backend!r:.60} ({type(backend).__name__}){hint}; accepted: None (numpy, or "
                          f"torch's at the first torch tensor), or a tripwire.ReductionBackend object with reduce, "
                          f"histogram and to_numpy methods, e.g. tripwire.NumpyBackend()")


def _rule_class(rule: Rule) -> str:
    """A rule's class as a checkpoint names it (a function rule's: with its function), to tell a
    rule whose class changed under its name (its state is another class's)."""
    name = type(rule).__qualname__
    fn = getattr(rule, "fn", None)
    if fn is not None and isinstance(rule, FunctionRule):
        name += f"({getattr(fn, '__qualname__', type(fn).__qualname__)})"
    return name


def _same_value(a: Any, b: Any) -> bool:
    """Do two values offered under one name at one step hold the same numbers? (the same object
    at once; else both read to the host: a repeated offer is rare, and a tensor's copy or an
    equal number is no conflict)."""
    if a is b:
        return True
    try:
        x, y = _host_value(a), _host_value(b)
    except Exception:  # noqa: BLE001 - (a value that cannot be read is not the same)
        return False
    return x.shape == y.shape and bool(np.array_equal(x, y, equal_nan=True))


def _host_value(value: Any) -> np.ndarray:
    """``value`` as a float64 numpy array (a torch tensor, an MXNet NDArray, a number, an array). A
    sparse torch tensor (a layout other than ``torch.strided``: COO, CSR ...) is read as its dense
    tensor (``to_dense()``), its implicit zeros included: two offers of one sparse gradient as
    different objects hold the same numbers (numpy cannot read a sparse tensor: it was told apart from
    its copy, "offered twice")."""
    detach = getattr(value, "detach", None)
    if callable(detach):  # torch (bf16 has no numpy type: through float64)
        value = detach()
        layout = getattr(value, "layout", None)
        if layout is not None and str(layout) != "torch.strided":  # (no torch import here: its name)
            value = value.to_dense()
        value = value.cpu().double().numpy()
    elif callable(getattr(value, "asnumpy", None)):  # MXNet
        value = value.asnumpy()
    return np.asarray(value, dtype=np.float64)


def _offered_twice(name: str, mode: str, step: int) -> ConfigError:
    """The error for a name offered again at one step with another value."""
    return ConfigError(f"add({name!r}): offered twice at {mode} step {step} with different values (the second would "
                       f"replace the first without a word); accepted: one value per name and step (the same tensor "
                       f"may be offered under several kinds, a ReLU output as activations and relu_outputs): give "
                       f"the other value a name of its own")


def _kept_copy(value: Any) -> Any:
    """A kept every-step value as it is now: a torch tensor's detached clone (on its device: no host
    sync), an array's copy (MXNet's, numpy's); a number as it is."""
    if isinstance(value, (int, float)):
        return value
    clone = getattr(value, "clone", None)
    if callable(clone):  # torch
        detach = getattr(value, "detach", None)
        return (detach() if callable(detach) else value).clone()
    copy = getattr(value, "copy", None)
    return copy() if callable(copy) else value


_SUMMARY_CHARS = 500
"""The most characters of an exception's message line that :func:`exception_summary` keeps."""


def exception_summary(exc: BaseException) -> str:
    """``exc``'s type and the first line of its message, as a traceback's last line names them
    (``IndexError: Target 10 is out of bounds.``, ``mypkg.DataError: ...``; the type alone for an
    empty message); `` ...`` ends it where the message goes on (more lines, or a line cut at
    :data:`_SUMMARY_CHARS` characters). What a failed run's end marker holds as ``stop_reason``."""
    cls = type(exc)
    module = getattr(cls, "__module__", None)
    if isinstance(module, str) and module.startswith("tripwire.") and module.split(".")[-1].startswith("_"):
        # (a tripwire error by its public name, tripwire.ConfigError, not its private module's: trial 38k)
        public = module.rsplit(".", 1)[0]
        if getattr(sys.modules.get(public), cls.__name__, None) is cls:
            module = public
    name = cls.__qualname__ if module in (None, "builtins", "__main__") else f"{module}.{cls.__qualname__}"
    try:
        args = getattr(exc, "args", ())
        # (a KeyError's str is its argument's repr, one line: Keras's wrapper of a layer's KeyError read
        # "KeyError: 'Exception encountered ...\n\n\x1b[1m...'", its escapes as text; trial 42g)
        text = args[0] if isinstance(exc, KeyError) and len(args) == 1 and isinstance(args[0], str) and (
            "\n" in args[0]) else str(exc)
    except Exception:  # (an exception whose __str__ raises: its type is what can be said)
        text = ""
    lines = [line.strip() for line in _ANSI.sub("", text).strip().splitlines() if line.strip()]
    if not lines:
        return name
    first = lines[0]
    if len(lines) > 1 and _KERAS_WRAPPER.fullmatch(first) and not lines[1].startswith("Arguments received by "):
        # (Keras's own first line names the layer only; the layer's error is the next line: trial 41k,
        # "ValueError: Exception encountered when calling Bad.call(). ..." lost it)
        first = f"{first[:-1] if first.endswith('.') else first}: {lines[1]}"
        lines = lines[1:]
    more = len(lines) > 1 or len(first) > _SUMMARY_CHARS
    return f"{name}: {first[:_SUMMARY_CHARS]}{' ...' if more else ''}"


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
"""The colour codes of a terminal (Keras sets the layer's error in bold)."""
_KERAS_WRAPPER = re.compile(r"Exception encountered when calling [\w.]+(?:\.call)?\(\)\.?")
"""The first line of Keras's wrapper around an error raised in a layer's ``call``."""


def _own_stop(session: Session, exc: BaseException) -> bool:
    """Is ``exc`` the :class:`~tripwire.TrainingStopped` of ``session``'s own ``raise`` action?"""
    finding = getattr(exc, "finding", None)
    return _is_stop(exc) and finding is not None and any(f is finding for f in session.findings)


def _due_between(cfg: Any, first: int, last: int) -> bool:
    """Whether the save config ``cfg`` (a :class:`ModeSaveConfig`) is due at some step from ``first``
    to ``last``, to be saved at ``last``: an interval's step only while ``last`` is before its
    ``end_step`` (trial 42g: ``end_step: 9`` saved step 9), a listed step wherever it is."""
    if any(first <= listed <= last for listed in cfg.steps):
        return True
    nxt = cfg.next_save(first)
    return nxt is not None and nxt <= last and (cfg.end_step is None or last < cfg.end_step)


def _failing(exc: BaseException | None) -> bool:
    """Whether ``exc``, handled or propagating where :meth:`Session.close` is called without a status
    (an ``except`` or ``finally`` block), ends the training failed: any exception but the ``raise``
    action's ``TrainingStopped`` (the stop decides), an iterator's end (``StopIteration``: a loop
    over ``next()``) and an exit of status 0 (``sys.exit()``)."""
    if exc is None or _is_stop(exc) or isinstance(exc, (StopIteration, StopAsyncIteration, GeneratorExit)):
        return False
    return not (isinstance(exc, SystemExit) and exc.code in (None, 0))


def _say_quietly(say: Callable[..., None], *args: Any) -> None:
    """``say(*args)`` (a logger call) where its own failure must not stop what comes next: a failed
    action's report, after which the finding's other actions are taken (trial 43g: a logging handler
    of the user's that raises failed the ``log`` action, and its report raised again from the guard,
    so ``stop_training`` after it never ran and the fit ended failed)."""
    try:
        say(*args)
    except Exception:  # noqa: BLE001 - (the logging handler's own error: nothing left to say it with)
        pass


def exits_cleanly(exc: BaseException | None) -> bool:
    """Whether ``exc`` is ``sys.exit()`` or ``sys.exit(0)``: the program's own end, which ends a run
    cut inside a framework's loop ``stopped`` (:data:`_EXITED`), not ``failed``."""
    return isinstance(exc, SystemExit) and not _failing(exc)


def _is_stop(exc: Any) -> bool:
    from ._errors import TrainingStopped

    return isinstance(exc, TrainingStopped)


def _values_of(record: StepRecord) -> np.ndarray:
    scalars = record.scalars
    if len(scalars) == 1:
        return scalars[0][2]
    return np.concatenate([v for _, _, v in scalars]) if scalars else np.zeros(0)


def _numel(backend: Any, tensor: Any) -> int:
    """The number of elements of ``tensor``: the backend's ``numel`` where it has one, else the
    tensor's ``size`` where that is a number (numpy's; torch's is a method), else the product of its
    ``shape`` (a tensor type of a backend of the user's own, as a ``tf.Tensor``: trial 37c, one with a
    shape and no ``size`` was taken for one element and its ``raw`` stored as its sum), else numpy's."""
    fn = getattr(backend, "numel", None)
    if fn is not None:
        return int(fn(tensor))
    size = getattr(tensor, "size", None)
    if isinstance(size, (int, np.integer)):
        return int(size)
    shape = getattr(tensor, "shape", None)
    if shape is not None:
        try:
            dims = [int(d) for d in shape]
        except (TypeError, ValueError):  # (an unknown dimension, None: numpy's count below)
            dims = None
        if dims is not None:
            return int(np.prod(dims, dtype=np.int64))
    return int(np.asarray(tensor).size)


def _call_reductions(reductions: tuple[str, ...]) -> list[str]:
    return ["sum" if r == "raw" else r for r in reductions]  # raw of one element == its sum


def _host_copy(backend: ReductionBackend, tensor: Any) -> np.ndarray:
    arr = backend.to_numpy(tensor)
    return np.array(arr, copy=True)  # the framework may reuse the buffer after the step


class _RuleSetNotes(logging.Filter):
    """Drops the INFO notes on a rule set's members that an integration cannot feed (marked
    ``extra={"tripwire_note": "rule_set"}`` by :func:`_feedable`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return getattr(record, "tripwire_note", None) != "rule_set"


class _UnregisteredRuleNotes(logging.Filter):
    """Drops load_config's WARNING on a rule name that is not registered (yet): a session builds its
    rules at once, and refuses the name there with the same "did you mean" (it was said twice)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(record, "tripwire_unregistered_rule", False)


@contextlib.contextmanager
def unregistered_rule_notes_muted() -> Iterator[None]:
    """Within: no WARNING from load_config on an unregistered rule name (see :class:`_UnregisteredRuleNotes`):
    for code that builds the rules right after loading the config (a Session; a callback's constructor
    that calls check_config), where an unknown name is refused with the same "did you mean"."""
    note = _UnregisteredRuleNotes()
    logger.addFilter(note)
    try:
        yield
    finally:
        logger.removeFilter(note)


@contextlib.contextmanager
def rule_set_notes_muted() -> Iterator[None]:
    """Within: no notes on a rule set's unfed members (an integration that checked its config in its
    constructor, which logged them, and makes its session later, which would log them again)."""
    note = _RuleSetNotes()
    logger.addFilter(note)
    try:
        yield
    finally:
        logger.removeFilter(note)


def check_config(config: Config, rules: list[Rule] | None = None, *, framework: str = "python",
                 provides: Iterable[str] | None = None) -> list[Rule]:
    """Everything a session would refuse, checked before training starts (callbacks call it in their
    constructor): the rules (built unless given), every action (top-level and per rule), what the
    rules need against the save config and, with ``provides`` (the kinds the ``framework``
    integration captures), a rule or collection the integration can never feed. Returns the rules.

    A rule is refused when none of the tensors it needs is captured (``losses`` and ``metrics`` are
    captured everywhere, XGBoost's evaluation results being its losses, and do not count: a rule
    that needs gradients and the loss does nothing without the gradients); a rule of a rule set is
    left out instead (logged at INFO level). A built-in collection the config names, or a custom one
    whose ``kinds`` are all uncaptured, is refused too.
    """
    rules = _feedable(config, build_rules(config.rules) if rules is None else rules, framework,
                      _check_provides(provides))
    for i, a in enumerate(config.actions):
        resolve_action(a, f"actions[{i}]")
    for rule in rules:
        for i, a in enumerate(rule.actions or ()):
            resolve_action(a, f"{config_path(rule)}.actions[{i}]")
    _effective_collections(config, rules, framework)
    return rules


def scaler_skipped_note(history: History, worker: int | None = None, framework: str | None = None) -> str | None:
    """Why a run holds no gradient where its ``loss_scale`` (train) shows fp16 AMP's GradScaler
    skipping steps all run long: two train save steps or more, each one's scale below the one
    before (the scaler lowers it only at a step it skips, and the gradients of a skipped step are
    not captured); ``None`` otherwise (no ``loss_scale``, a single record, a scale that held or
    grew at some save step). The session's end (:meth:`Session._unfed`) and ``tripwire watch``
    give it as the gradient rules' "had nothing to read" cause, as the Lightning callback does, in
    place of a pointer at the config (trial 30g F2). ``framework="keras"``: said of Keras's
    ``LossScaleOptimizer`` (trial 36c: a Keras run was told of torch's GradScaler and torch ops)."""
    try:
        if not history.has_tensor(LOSS_SCALE):
            return None
        steps, scales = history.series(LOSS_SCALE, mode="train", worker=worker)
    except (TripwireError, ValueError, KeyError):  # (no train records of this worker: nothing shown)
        return None
    if len(scales) < 2 or not np.all(np.isfinite(scales)) or not np.all(np.diff(scales) < 0):
        return None
    keras = framework == "keras"
    scaler, ops, doc = (("Keras's LossScaleOptimizer (mixed_float16)", "keras.ops.sqrt, keras.ops.log",
                         'docs/keras.md, "Gradients are the unscaled ones"') if keras else
                        ("fp16 AMP's GradScaler", "torch.sqrt, torch.log", "docs/architecture.md, the AMP recipe"))
    return (f"{scaler} skipped optimizer steps all run long: the loss scale fell from each of the "
            f"{len(scales)} train save steps to the next ({scales[0]:.6g} at step {int(steps[0])} to {scales[-1]:.6g} "
            f"at step {int(steps[-1])}), as the {'optimizer' if keras else 'scaler'} lowers it only at a step it skips: "
            f"the gradients were not finite once unscaled (a NaN or an infinity in the backward pass: {ops} or a "
            f"division at 0; values beyond fp16's range; a learning rate far too high), and the gradients of a step "
            f"the {'optimizer' if keras else 'scaler'} skips are never applied, so they are not captured "
            f"(loss_scale_collapse reads the scale; {doc})")


def check_write_and_keep_arrays(write: Any, keep_arrays: Any) -> tuple[bool | None, int | None]:
    """:class:`Session`'s ``write`` and ``keep_arrays`` checked (the Session's constructor, and the
    integrations that pass them on to it check them in theirs with this: the Keras callback):
    ``write`` a bool or None, ``keep_arrays`` an integer >= 1 (numpy's too, as ``int``) or None; else
    a :class:`ConfigError` (a ValueError) naming the parameter, the value and what is accepted.
    Returns them as the session takes them."""
    got = None if write is None else plain_bool(write)
    if write is not None and got is None:  # (trial 33f M5: write="yes" was taken, as true)
        raise ConfigError(f"write: got {write!r} ({type(write).__name__}); accepted: True or False, or None (the "
                          f"default: as writer.ranks says); no other value stands for either")
    # (trial 33f M3: keep_arrays="many" was taken, and the first step that kept an array raised a bare TypeError)
    return got, check_int(keep_arrays, "keep_arrays", minimum=1, allow_none=True)


def _check_provides(provides: Any) -> list[str] | None:
    """``provides`` (the kinds an integration captures) as a sorted list of kinds, or None: a kind or
    a list of kinds, each a built-in collection name; anything else is a :class:`ConfigError` naming
    the item, with a "did you mean" (trial 33f M4: ``provides=[5]`` raised a bare TypeError,
    ``["gradeints"]`` and the string ``"gradients"`` were taken without a word)."""
    if provides is None:
        return None
    given = [provides] if isinstance(provides, str) else provides
    if isinstance(given, Mapping) or not isinstance(given, Iterable):
        raise ConfigError(f"provides: got {provides!r} ({type(provides).__name__}); accepted: None (anything may "
                          f"come), a kind or a list of kinds ({', '.join(sorted(_ALL_KINDS))})")
    kinds = list(given)
    for i, kind in enumerate(kinds):
        where = "provides" if isinstance(provides, str) else f"provides[{i}]"
        if not isinstance(kind, str) or kind not in _ALL_KINDS:
            guess = did_you_mean(kind, sorted(_ALL_KINDS)) if isinstance(kind, str) else ""
            raise ConfigError(f"{where}: got {kind!r}{'' if isinstance(kind, str) else f' ({type(kind).__name__})'}"
                              f"{guess}; accepted: the kinds the integration captures, each a built-in collection "
                              f"name: {', '.join(sorted(_ALL_KINDS))}")
    return sorted(set(kinds))


def _feedable(config: Config, rules: list[Rule], framework: str, provides: Iterable[str] | None) -> list[Rule]:
    """The rules ``provides`` can feed (a rule set's members that it cannot are left out); a rule or
    collection it cannot feed at all is a :class:`ConfigError` (see :func:`check_config`)."""
    if provides is None:
        return rules
    have = frozenset(provides) | {"losses", "metrics"}
    listing = ", ".join(sorted(have))
    kept: list[Rule] = []
    for rule in rules:
        reqs = rule.requirements()
        # what the rule cannot judge without: its required collections, or (a rule whose every
        # requirement is optional, loss_scale_collapse's) its optional ones; an optional one beside
        # a required one only refines the judgement (oscillating_loss's clipping limits)
        required = {req.collection for req in reqs if not req.optional}
        needed = (required or {req.collection for req in reqs}) - {"losses", "metrics"}
        if needed and not needed & have:
            if rule.rule_set is None:
                raise ConfigError(
                    f"{config_path(rule)}: {rule.name} needs {', '.join(map(repr, sorted(needed)))}, which the {framework} "
                    f"integration does not capture (it captures: {listing}); remove the rule (in a loop of your own, a "
                    f"tripwire.Session takes any value you offer it)"
                )
            # a rule set (``default``) holds the members that apply to the framework at hand
            logger.info("tripwire: rule %r of the %r set does not apply to %s (it needs %s)", rule.name,
                        rule.rule_set, framework, ", ".join(sorted(needed)), extra={"tripwire_note": "rule_set"})
            continue
        kept.append(rule)
    for name, col in config.collections.items():
        kinds = col.kinds
        if kinds is not None and not set(kinds) & have:
            what = f"{name!r}" if kinds == (name,) else f"{name!r} (kinds {', '.join(kinds)})"
            raise ConfigError(f"collections.{name}: the {framework} integration does not capture {what} "
                              f"(it captures: {listing})")
    return kept


def _effective_collections(config: Config, rules: list[Rule], framework: str | None = None) -> dict[str, Collection]:
    """The user's collections plus what the rules need; an unsatisfiable need is an error
    (``framework``: the integration that feeds them, where it changes what a rule reads)."""
    cols = dict(config.collections)
    for rule in rules:
        for req in rule.requirements():
            col = cols.get(req.collection)
            need = req.reduction_config()
            save = (col.save if col is not None else None) or config.save
            for mode in req.modes:
                m = save.for_mode(mode)
                if m.enabled and m.end_step is not None and m.end_step <= m.start_step and not m.steps:
                    where = f"collections.{req.collection}.save" if col is not None and col.save is not None else "save"
                    raise ConfigError(
                        f"{where}: start_step {m.start_step} and end_step {m.end_step} save no step of mode {mode!r}, "
                        f"but rule {rule.name!r} needs {req.collection!r} there; accepted: end_step > start_step "
                        f"(or null), or remove the rule"
                    )
                if not m.enabled and not req.optional:
                    # (a collection the rule adds is saved as the config saves: the top-level save)
                    where = (f"collections.{req.collection}.save" if col is not None and col.save is not None
                             else "save" if col is None or not config.save.for_mode(mode).enabled else
                             f"collections.{req.collection}.save")
                    others = [m for m in (rule.modes or ()) if m != mode]
                    # (trial 41b: the rule limited to the modes saved was not offered)
                    limit = (f", limit the rule to the modes saved ({{name: {rule.name}, modes: [{', '.join(others)}]}})"
                             if others else "")
                    raise ConfigError(
                        f"{where}.modes.{mode}: disabled, but rule {rule.name!r} needs "
                        f"{req.collection!r} in mode {mode!r}; enable it{limit} or remove the rule"
                    )
                if col is None:  # (a collection added below for the rule: saved as the config saves)
                    continue
                if req.max_interval is not None and m.interval > req.max_interval:
                    if col.save is None:  # named, with no save config of its own: saved as the rule needs
                        continue
                    # the key that set it: the mode's own interval where it differs from the collection's
                    per_mode = mode in col.save.modes and col.save.interval != m.interval
                    key = f"collections.{req.collection}.save" + (f".modes.{mode}" if per_mode else "") + ".interval"
                    # an interval the collection's save does not state is the run's (trial 32i F6: the key
                    # named was one the user never wrote)
                    written = getattr(col, "_save_written", None)
                    inherited = not per_mode and isinstance(written, Mapping) and "interval" not in written
                    said = (f"save.interval: {m.interval}, which collections.{req.collection}.save inherits,"
                            if inherited else f"{key}: {m.interval}")
                    raise ConfigError(
                        f"{said} is too sparse for rule {rule.name!r}, which needs {req.collection!r} at "
                        f"least every {req.max_interval} steps in mode {mode!r}; accepted: {req.max_interval} or less"
                        + (f" (state {key}, or collections.{req.collection}.save.modes.{mode}.interval)" if inherited
                           else "" if per_mode else f" (or collections.{req.collection}.save.modes.{mode}.interval)")
                    )
            # a collection the rule adds, or one named without a save config of its own, saved by the
            # run's config: as often as the rule needs in every mode it reads
            own = col.save if col is not None else None
            sparse = [mode for mode in req.modes if req.max_interval is not None
                      and config.save.for_mode(mode).interval > req.max_interval]
            if own is None and sparse:
                # as often as the rule needs in the modes it reads, the others as the config saves
                # (trial 28h: class_imbalance reads eval, and its interval 1 made every train step
                # store labels and predictions, and the train rules judge every step)
                own = SaveConfig.from_dict({"modes": {mode: {"interval": req.max_interval} for mode in sparse}},
                                           "save", config.save)
            if col is None:
                base = Collection.builtin(req.collection)
                cols[req.collection] = Collection(
                    base.name, base.include, base.exclude, base.kinds,
                    _merge(base.reduction if req.collection in SCALAR_KINDS else ReductionConfig(), need), own, base.every_step,
                )
                continue
            cols[req.collection] = Collection(col.name, col.include, col.exclude, col.kinds, _merge(col.reduction, need), own,
                                              col.every_step)
    _check_named_inputs(rules, cols, framework)
    return cols


#: what makes a rule's named input a pattern rather than a name (``.`` too: ``fc1.weight`` also matches ``fc1xweight``)
_REGEX_CHARS = frozenset("\\.^$*+?{}[]()|")


def _literal_names(pattern: str) -> list[str] | None:
    """The names a rule's full-match ``pattern`` (:meth:`Rule.named_inputs`) matches, where it is a
    name or an alternation of names (``loss|aux_loss``; a ``^``/``$`` around each is no matter in a
    full match); None for any other regex, of which no config can tell which names it will meet."""
    if not isinstance(pattern, str) or "(" in pattern:
        return None
    names = []
    for part in pattern.split("|"):
        part = part[1:] if part.startswith("^") else part
        part = part[:-1] if part.endswith("$") and not part.endswith("\\$") else part
        if not part or _REGEX_CHARS & set(part):
            return None
        names.append(part)
    return names


#: the named inputs that XGBoost's callback binds to its own metrics where left at these defaults
#: (``bind_default_metric_names``, which reads this table: XGBoost logs ``<evalset>-<metric>``, never ``loss``)
_XGBOOST_REBOUND = {"loss": "loss", "train": "loss", "validation": "val_loss"}


def _check_named_inputs(rules: list[Rule], cols: Mapping[str, Collection], framework: str | None = None) -> None:
    """A rule that reads tensors by names its parameters give (:meth:`Rule.named_inputs`: a loss rule's
    ``loss``, ``overfit``'s ``train`` and ``validation``, ``tree_depth``'s ``tensor``) where the
    collections that could hold them (those taking a kind of its :attr:`Rule.input_collections`, as
    the config and the rules make them) all keep every such name out by their include/exclude
    patterns is a :class:`ConfigError` naming the rule, the parameter, the tensor, the collection and
    the pattern, and what to change (trial 33a F1: ``rules: [loss_not_decreasing]`` with ``losses:
    {exclude: ['^loss$']}`` was valid, and a flat loss never fired). Only where it is certain: a name
    (or an alternation of names), not a regex nor a name a rule finds anywhere in longer ones
    (``input_match: search``: the labels rules), and where some collection takes its kinds at all (what
    the integration never offers is said elsewhere); names known at run time (layer names) are not
    checked."""
    for rule in rules:
        if getattr(rule, "input_match", "fullmatch") != "fullmatch":
            continue
        kinds = tuple(getattr(rule, "input_collections", ("losses", "metrics")))
        holders = [c for c in cols.values() if any(c.accepts_kind(k) for k in kinds)]
        if not holders:
            continue
        try:
            inputs = rule.named_inputs()
        except Exception as exc:  # (a rule of the user's: named with its entry, as requirements() is)
            raise ConfigError(f"{config_path(rule)}: rule {rule.name!r}: named_inputs() raised {type(exc).__name__}: "
                              f"{exc}") from exc
        if not isinstance(inputs, Mapping):
            raise ConfigError(f"{config_path(rule)}: rule {rule.name!r}: named_inputs() returned {inputs!r:.80}; "
                              f"accepted: a dict {{parameter: tensor name or full-match regex}} ({{}}: none)")
        for param, pattern in inputs.items():
            if framework == "xgboost" and _XGBOOST_REBOUND.get(param) == pattern:
                # an XGBoost run reads its own '<evalset>-<metric>' here, names known at training only,
                # all of kind metrics (trial 33i F4: the error spoke of 'loss' and collections.losses)
                if not any(c.accepts_kind("metrics") for c in cols.values()):
                    raise ConfigError(
                        f"{config_path(rule)}: rule {rule.name!r} reads {param}={pattern!r}, which in an XGBoost run "
                        f"reads XGBoost's own evaluation results ('<evalset>-<metric>', such as 'train-logloss'), all "
                        f"of kind metrics, but this config keeps no collection of kind metrics, so the rule would "
                        f"never judge; accepted: a config that keeps them: name metrics among the collections "
                        f"(collections: {{metrics: null, ...}}, or include_collections=['metrics']), or remove the "
                        f"rule")
                continue
            names = _literal_names(pattern) if isinstance(pattern, str) else None
            if names is None or any(c.matches(n, k) for c in holders for n in names for k in kinds if c.accepts_kind(k)):
                continue
            reasons, fixes = [], []
            for c in holders:
                variants = [v for n in names for k in kinds if c.accepts_kind(k) for v in
                            ((n, n[len(k) + 1:]) if c.kinds is not None and n.startswith(f"{k}/") else (n,))]
                excluded = [(i, p) for i, p in enumerate(c.exclude) if any(re.search(p, v) for v in variants)]
                if excluded:
                    reasons.append(", ".join(f"collections.{c.name}.exclude[{i}] {p!r}" for i, p in excluded)
                                   + " keeps it out")
                    fixes.append(" and ".join(f"remove {p!r} from collections.{c.name}.exclude (or narrow it)"
                                              for _, p in excluded))
                else:
                    reasons.append(f"collections.{c.name}.include {list(c.include)} matches no such name")
                    fixes.append(f"add a pattern that matches it to collections.{c.name}.include "
                                 f"(^{re.escape(names[0])}$)")
            absent = [k for k in kinds if not any(c.accepts_kind(k) for c in cols.values())]
            none_of = (f" (no collection of kind {' or '.join(absent)} is configured)" if absent else "")
            tensor = f"a tensor named {names[0]!r}" if len(names) == 1 else f"any of {', '.join(map(repr, names))}"
            raise ConfigError(
                f"{config_path(rule)}: rule {rule.name!r} reads {param}={pattern!r} from the {' or '.join(kinds)} "
                f"collection{'s' if len(kinds) > 1 else ''}, but this config can never capture {tensor}: "
                f"{'; '.join(reasons)}{none_of}, so the rule would never judge it; accepted: a collection that "
                f"keeps it: {'; or '.join(fixes)}; or point {param}= at a tensor the collection keeps, or remove the "
                f"rule")


def _rules_cut_by_end_step(config: Config, rules: list[Rule], cols: dict[str, Collection]) -> str | None:
    """The WARNING for rules whose inputs an ``end_step`` stops saving, or None. smdebug's habit of
    limiting capture with ``end_step`` turns the rules off after that step: a loss that went flat, then
    NaN, after ``end_step=20`` was never found, and nothing said why (trial 20b). Listed ``steps``
    are saved past ``end_step``, but no rule judges a run from a few listed steps."""
    cut: dict[tuple[str, str, int], list[str]] = {}  # (key, mode, end_step) -> rule names
    listed: dict[tuple[str, str, int], tuple[int, ...]] = {}  # the listed steps saved past end_step
    for rule in rules:
        for req in rule.requirements():
            if req.optional:
                continue
            col = cols.get(req.collection)
            own = col is not None and col.save is not None
            save = col.save if own else config.save  # type: ignore[union-attr]
            for mode in req.modes:
                m = save.for_mode(mode)  # type: ignore[union-attr]
                if m.enabled and m.end_step is not None:
                    key = f"collections.{req.collection}.save.end_step" if own else "save.end_step"
                    names = cut.setdefault((key, mode, m.end_step), [])
                    listed[(key, mode, m.end_step)] = tuple(sorted(x for x in set(m.steps) if x >= m.end_step))
                    if rule.name not in names:
                        names.append(rule.name)
    if not cut:
        return None
    # (trial 23l: with steps: [3, 7], end_step: 0 the rules read those steps; it said "read nothing")
    parts = [f"{key}={end} ({mode}): rule{'s' if len(names) > 1 else ''} {', '.join(map(repr, names))} read nothing "
             f"from {mode} step {end} on" + (f" but the listed step{'s' if len(listed[(key, mode, end)]) > 1 else ''} "
                                             f"{', '.join(map(str, listed[(key, mode, end)]))}"
                                             if listed.get((key, mode, end)) else "")
             for (key, mode, end), names in sorted(cut.items(), key=lambda kv: (MODES.index(kv[0][1]), kv[0][2], kv[0][0]))]
    return ("tripwire: " + "; ".join(parts) + ". Those rules judge no later step, so a fault after it is not found "
            "and nothing stops training for it (if training runs longer). To store less while the rules keep "
            "judging, give end_step to the collections you want to cut (collections: {weights: {save: {end_step: "
            "N}}}) instead of to what the rules read")


def _say_histograms_differ(name: str, cols: tuple[Collection, ...]) -> None:
    """A WARNING when the collections of one tensor ask for different histograms: it keeps one (the
    first collection's that has a histogram, at every step: :meth:`Session._histogram_of`), and the
    others' bins and range would go unsaid."""
    wanted = [(c.name, c.reduction.histogram_bins, c.reduction.histogram_range) for c in cols if c.reduction.histogram]
    if len({(bins, rng) for _, bins, rng in wanted}) < 2:
        return
    def how(bins: int, rng: tuple[float, float] | None) -> str:
        def edge(x: float) -> str:  # (the shortest exact form: :g said [1, 1] of [0.9999995, 1.0000004])
            return repr(x).removesuffix(".0")
        return f"{bins} bins over " + (f"[{edge(rng[0])}, {edge(rng[1])}]" if rng else "its own range")
    logger.warning(
        "tripwire: tensor %r is in collections that ask for different histograms (%s); a tensor keeps one "
        "histogram a step: collection %r's. Give those collections the same histogram_bins and histogram_range, "
        "or exclude the tensor from all but one (the same holds for every tensor in those collections)", name,
        "; ".join(f"{c!r}: {how(bins, rng)}" for c, bins, rng in wanted), wanted[0][0])


def _merge(a: ReductionConfig, b: ReductionConfig) -> ReductionConfig:
    return a.merged(b)


__all__ = ["Session", "StepPlan", "check_config"]

"""Torch helpers shared by the torch-based integrations: the reduction backend and the capture
helpers (parameters, gradients, learning rates, update ratios, activation hooks).

Everything here runs on the tensors' own device. The backend reduces *all tensors due at a step in
one call* (``reduce_groups``): one-element tensors (losses, learning rates, metrics) as one stacked
vector (read one by one with ``.item()`` where they are all a step holds, on the CPU), larger ones
packed per device and dtype into one buffer of 256-element chunks, reduced with a constant number
of calls per pack (see :class:`_Bucket`); all results are copied to the host once; sparse
tensors are reduced apart, from their stored values (:func:`_sparse_row`). Nothing here is called
on steps that are not saved.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import math
import mmap
import os
import pickle
import re
import select
import socket
import sys
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from tripwire._errors import missing_extra

try:
    import torch
    from torch import nn
    from torch.nn.utils import parametrize as _parametrize
except ImportError as exc:  # pragma: no cover - exercised only without torch
    raise missing_extra("torch", "lightning", exc) from exc

from tripwire._config import SCALAR_KINDS, parse_reduction
from tripwire._reductions import EMPTY_ZERO, VALUE_ITSELF, widened
from tripwire.integrations._reduce_worker import THRESHOLD_STAT as _THRESHOLD_STAT
from tripwire.integrations._reduce_worker import HostStats, layout, per_tensor
from tripwire.integrations._reduce_worker import row_key as _row_key

logger = logging.getLogger("tripwire")

__all__ = [
    "ActivationCapture",
    "TorchBackend",
    "capture_activations",
    "clean_name",
    "learning_rates",
    "main_output",
    "param_kind",
    "scaler_found_inf",
    "scaler_skips",
    "snapshot",
    "update_ratios",
]

def clean_name(name: str) -> str:
    """A parameter or module name without the ``_orig_mod`` components that ``torch.compile``
    inserts, wherever they are (trial 25j: a layer compiled alone, ``self.fc1 = torch.compile(self.fc1)``,
    is the leaf ``fc1._orig_mod``: its activations were named ``fc1._orig_mod/output``)."""
    if "_orig_mod" not in name:
        return name
    return ".".join(part for part in name.split(".") if part != "_orig_mod")


#: The last name component of a bias: ``bias``, or one starting with ``bias_`` or ending in ``_bias``
#: (trial 28d: ``nn.MultiheadAttention``'s ``in_proj_bias``, ``bias_k``/``bias_v``, and an RNN's
#: ``bias_ih_l0``/``bias_hh_l0_reverse`` were stored as weights).
_BIAS_PART = re.compile(r"^bias(_|$)|_bias$")


def param_kind(name: str) -> str:
    """``biases`` for a parameter whose last name component is ``bias``, starts with ``bias_`` or
    ends in ``_bias`` (``fc.bias``, ``attn.in_proj_bias``, ``rnn.bias_ih_l0``), else ``weights``
    (``fc.weight``, ``rnn.weight_hh_l0``; a name that merely holds ``bias``, such as
    ``unbiased_scale``, is a weight too). The Keras and MXNet integrations tell biases their own way."""
    return "biases" if _BIAS_PART.search(name.rsplit(".", 1)[-1]) else "weights"


# ------------------------------------------------------------------------------------ backend
@functools.lru_cache(maxsize=64)
def _host_dtype(dtype: torch.dtype) -> np.dtype:
    """The numpy dtype a tensor of ``dtype`` becomes on the host (bf16 -> float32)."""
    if dtype == torch.bfloat16:
        return np.dtype(np.float32)
    return np.dtype(torch.empty(0, dtype=dtype).numpy().dtype)


@functools.lru_cache(maxsize=1024)
def _threshold_for(thr: float, dtype: torch.dtype) -> float:
    """The threshold as numpy compares it against an array of ``dtype`` (NEP 50: a Python float is
    cast to a floating array's dtype; integer arrays compare in float64)."""
    host = _host_dtype(dtype)
    if host.kind == "f":
        with np.errstate(over="ignore"):
            return float(np.asarray(thr).astype(host))
    return float(thr)


class TorchBackend:
    """:class:`tripwire.ReductionBackend` for torch tensors: batched, on the tensors' device, one
    host copy per call. Matches :class:`tripwire.NumpyBackend` on every reduction (float32 within
    about 1e-6 relative, float64 and integers to rounding; on MPS, which has no float64, float32).
    Sparse tensors (COO, as ``nn.Embedding(sparse=True)``'s gradients; CSR, CSC, BSR, BSC) get the
    reductions of their dense tensor, computed on their device from their stored values without
    densifying (:func:`_sparse_row`); their histograms and raw arrays densify them (``to_dense()``,
    at save steps only). Trial 28g: a sparse gradient ended the training at its first save step.
    Keeps scratch buffers between calls: use one backend per session (not thread-safe)."""

    name = "torch"

    def __init__(self) -> None:
        self._scratch = _Scratch()
        self._pool: ThreadPoolExecutor | None = None
        # the program reduce_groups_async found for groups it left to reduce_groups (the session's
        # next call, with the same list): not worked out twice
        self._declined: tuple[Any, _Program] | None = None
        self._fence: _Fence | None = None  # the step in flight reads the tensors themselves (live)
        self._live = True  # live reads allowed (until a tensor is seen changed before its fence)

    # -- protocol -----------------------------------------------------------------------------
    def numel(self, tensor: Any) -> int:
        return int(tensor.numel())

    def to_numpy(self, tensor: Any) -> np.ndarray:
        """The tensor on the host (bf16 as float32; a sparse tensor densified: ``to_dense()``)."""
        _produce_late((tensor,))
        t = _dense(tensor)
        if t.dtype == torch.bfloat16:
            t = t.float()
        return t.cpu().numpy()

    def reduce(self, tensors: Sequence[Any], reductions: Sequence[str]) -> np.ndarray:
        return self.reduce_groups([(tensors, reductions)])[0]

    def reduce_groups(self, groups: Sequence[tuple[Sequence[Any], Sequence[str]]]) -> list[np.ndarray]:
        """Every ``(tensors, reductions)`` group of a step in one call (the session calls this,
        when a backend has it, instead of :meth:`reduce` once per group): one float64 array per
        group, shaped ``(len(tensors), len(reductions))``. A tensor that appears in several groups
        (or twice, e.g. a layer's output that is also the next activation's input) is reduced once,
        for the union of the reductions asked of it."""
        declined, self._declined = self._declined, None
        program = declined[1] if declined is not None and declined[0] is groups else _program(groups, self._scratch)
        return program.run(groups, self._scratch)

    def reduce_groups_async(self, groups: Sequence[tuple[Sequence[Any], Sequence[str]]], live: bool = False
                            ) -> Callable[[], list[np.ndarray]] | None:
        """:meth:`reduce_groups` with the work taken off the calling thread, or None (then call
        :meth:`reduce_groups`) for a step too small for it to pay, or with tensors off the CPU.
        The tensors are copied now (they may change as soon as this returns: the next optimizer
        step); the statistics are computed on one background thread while training goes on. The
        result is the returned callable's value, which waits for it. Call it before any other
        call to this backend (the session does: one step in flight at a time). Also None where no
        CPU is free for that thread (:func:`background_allowed`).

        ``live=True``: the caller calls :meth:`fence` before anything may change the tensors in
        place (the next optimizer step, ``zero_grad``, a clipping): the copy is then made on the
        background thread too, and :meth:`fence` waits until it is made. A tensor changed in place
        before the fence (its version counter moved: a ``.data`` write does not move it) has the
        step reduced again when the result is taken, on the calling thread, from the tensors as
        they are then; this backend copies on the calling thread from then on."""
        program = _program(groups, self._scratch)
        if not program.background or not background_allowed():  # (the program first: a cached lookup,
            self._declined = (groups, program)                     # where the CPU count is a system call)
            return None
        if self._pool is None:
            # one intra-op thread: the work overlaps training instead of competing with it for
            # every core (a new thread would otherwise get OpenMP's default, all of them)
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="tripwire-reduce", initializer=torch.set_num_threads,
                                            initargs=(1,))
            if self._scratch.process is None and ReduceProcess.supported():
                self._scratch.process = ReduceProcess()  # (ready some steps later: see ReduceProcess)
        live = live and self._live
        future, outs, fence = program.start(groups, self._scratch, self._pool, live=live)
        if fence is None:
            return lambda: program._assemble(outs, future.result())
        self._fence = fence

        def redo() -> list[np.ndarray]:
            future.result()  # (the background thread is done with the scratch buffers)
            return program.run(groups, self._scratch)

        fence.redo = redo

        def complete() -> list[np.ndarray]:
            self.fence()  # (nothing to wait for when the caller fenced)
            gathered = future.result()
            if fence.redone is not None:
                return fence.redone
            return program._assemble(outs, gathered)

        return complete

    def warm_up(self, tensors: Iterable[torch.Tensor], collections: Iterable[Any]) -> bool:
        """Start the reduction process now, without waiting for it, where the steps to come will
        most likely be reduced in the background: the training's parameters ``tensors`` are on the
        CPU, hold at least ``BACKGROUND_MIN / 2`` elements, the config's ``collections`` capture
        tensors (weights, gradients, activations, inputs: not only scalars) and a CPU is free
        (:func:`background_allowed`). Otherwise it starts at the first such step, as ever. The
        integrations call this at a training's start: the process (python and numpy, about a tenth
        of a second) is then ready by the first steps instead of some dozens of steps in, which
        were reduced on the thread meanwhile. Returns whether it started one."""
        if self._scratch.process is not None or not ReduceProcess.supported() or not background_allowed():
            return False
        if all(c.kinds and set(c.kinds) <= set(SCALAR_KINDS) for c in collections):  # (kinds None: any kind)
            return False  # (scalars only: never a background step)
        numel = 0
        for t in tensors:
            if not isinstance(t, torch.Tensor) or t.device.type != "cpu":
                return False
            if torch.nn.parameter.is_lazy(t):
                continue  # (a lazy module's parameter before its first forward has no size: trial 43e)
            numel += t.numel()
        if numel < BACKGROUND_MIN // 2:
            return False
        self._scratch.process = ReduceProcess()
        return True

    def fence(self) -> list[tuple[int, int]]:
        """Wait until the background thread no longer reads the tensors of the step in flight
        (see ``live`` in :meth:`reduce_groups_async`); at once when nothing is in flight. Returns
        the ``(group, row)`` places of the tensors seen changed in place before the copy was made
        (empty when none): that step is then reduced again, here, from the tensors as they are now
        (not later: the training thread would have moved them on by another step)."""
        fence, self._fence = self._fence, None
        if fence is None or not fence.wait():
            return []
        self._live = False
        fence.redone = fence.redo()
        logger.debug("tripwire: a captured tensor changed in place before the fence; the background reduction "
                     "copies tensors on the training thread from now on")
        return fence.changed_places

    def close(self) -> None:
        """Stop the background thread and the reduction process (if started); a later call starts
        others."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        proc, self._scratch.process = self._scratch.process, None
        if proc is not None:
            proc.close()

    def histogram(self, tensor: Any, bins: int, value_range: tuple[float, float] | None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`tripwire.NumpyBackend.histogram` on the tensor's device, with the same counts and
        edges: float64 edges (``histogram_edges`` over ``value_range``, or over the finite minimum
        and maximum, ``widened`` where they are equal: those two numbers are copied to the host, one
        sync), and each value's bin found as ``numpy.histogram(x, bins, range=(lo, hi))`` with a
        float64 ``lo``/``hi`` finds it: its own arithmetic in float64 (the index from the scaled
        value, corrected by one either way against the edges; trial 30a F4: this arithmetic in
        float32 and float32-rounded edges miscounted). Where numpy would not bin (equal edges: see
        ``numpy_binnable``), and on MPS, which has no float64, ``torch.bucketize`` against the edges
        exactly (``bin_thresholds``: float32, bf16 and fp16 values against the edges rounded up to
        float32; on MPS integers are binned as float32). The counts are summed on the device and
        copied to the host once. A sparse tensor is densified first (``to_dense()``: its implicit
        zeros are binned)."""
        from tripwire._reductions import bin_thresholds, histogram_edges, numpy_binnable

        _produce_late((tensor,))
        x = _dense(tensor).reshape(-1)
        mps = x.device.type == "mps"
        if x.dtype in (torch.float16, torch.bfloat16) or (mps and not x.dtype.is_floating_point):
            x = x.float()
        elif not x.dtype.is_floating_point:
            x = x.to(torch.float64)
        if value_range is not None:
            lo, hi = float(value_range[0]), float(value_range[1])
        elif x.numel() == 0:
            lo, hi = 0.0, 1.0
        else:
            lo, hi = torch.stack(torch.aminmax(x)).tolist()
            if not (math.isfinite(lo) and math.isfinite(hi)):  # NaN or Inf among them: the finite values'
                finite = torch.isfinite(x)
                lo, hi = torch.stack((torch.where(finite, x, math.inf).min(), torch.where(finite, x, -math.inf).max())).tolist()
            lo, hi = (0.0, 1.0) if lo > hi else widened(lo, hi)
        edges = histogram_edges(lo, hi, bins)
        if x.numel() == 0:
            return np.zeros(bins, dtype=np.int64), edges
        if not mps and numpy_binnable(edges):
            xd = x.to(torch.float64)
            first, last = float(edges[0]), float(edges[-1])
            keep = (xd >= first) & (xd <= last)  # NaN, Inf and values out of range fail
            xd = torch.where(keep, xd, first)
            f = xd - first
            idx = f.div_(last - first).mul_(bins).to(torch.int64).clamp_(max=bins - 1)
            # the edges, then the upper edges of the bins with the last one +Inf: numpy's last bin is
            # closed (one host-to-device copy, not waited for: no sync)
            e = torch.from_numpy(np.concatenate((edges, edges[1:-1], [math.inf]))).to(x.device, non_blocking=True)
            idx -= (xd < e.index_select(0, idx)).to(torch.int64)
            idx += (xd >= e[bins + 1:].index_select(0, idx)).to(torch.int64)
        else:
            inner, bounds = bin_thresholds(edges, np.float64 if x.dtype == torch.float64 else np.float32)
            th = torch.from_numpy(np.concatenate((bounds, inner))).to(x.device, non_blocking=True)
            keep = (x >= th[0]) & (x <= th[1])
            idx = torch.bucketize(x, th[2:], right=True)  # the number of inner edges at or below each value
        idx = torch.where(keep, idx, bins)  # (values not counted: bin `bins`, dropped below)
        counts = torch.zeros(bins + 1, dtype=torch.int64, device=x.device).scatter_add_(0, idx, torch.ones_like(idx))
        return counts[:bins].cpu().numpy(), edges


# ---------------------------------------------------------------------- one-element tensors
def _scalar_work(t: torch.Tensor) -> torch.Tensor:
    """Float32 for float32/bf16/fp16, float64 for float64 and integers (exact)."""
    t = t.detach()
    return t if t.dtype == _work_dtype(t.dtype, t.device) else t.to(_work_dtype(t.dtype, t.device))


#: Dtypes whose ``.item()``, made float64 on the host, is what the stacked path gives
#: (:func:`_stack_scalars`, then float64): floats exactly; integers rounded to nearest, as torch's
#: conversion rounds them; bools 0 or 1.
_ITEM_DTYPES = frozenset((torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.bool, torch.uint8,
                          torch.int8, torch.int16, torch.int32, torch.int64))


def _stack_scalars(tensors: list[torch.Tensor]) -> torch.Tensor:
    """One-element tensors of one device (losses, learning rates, update ratios) as one vector in
    the work dtype (float64 when any of them needs it); their reductions are computed on the host
    from this vector (:func:`_scalar_columns`), a few numbers."""
    if len({t.dtype for t in tensors}) == 1:  # (called under no_grad: no detach needed)
        return _scalar_work(torch.stack([t if t.dim() == 0 else t.reshape(()) for t in tensors]))
    ws = [_scalar_work(t).reshape(()) for t in tensors]
    wdt = torch.float64 if any(w.dtype == torch.float64 for w in ws) else torch.float32
    return torch.stack([w.to(wdt) for w in ws])


def _scalar_columns(v: np.ndarray, dtypes: list[torch.dtype], parsed: Sequence[tuple[str, float | None]]) -> np.ndarray:
    """Every reduction of one-element tensors (host values ``v``, exact copies of the work-dtype
    values): the value itself or a comparison of it."""
    if all(base in VALUE_ITSELF for base, _ in parsed):  # the value itself (raw is "sum")
        return np.repeat(v[:, None], len(parsed), axis=1)
    finite = np.isfinite(v)
    cols: list[np.ndarray] = []
    with np.errstate(invalid="ignore"):
        for base, thr in parsed:
            if base == "numel":
                col = np.ones_like(v)
            elif base == "nonfinite_count":
                col = (~finite).astype(np.float64)
            elif base in ("min", "max", "mean", "sum"):
                col = v
            elif base in ("std", "variance", "abs_std", "abs_variance"):
                col = np.where(finite, 0.0, np.nan)
            elif base in ("l1", "l2", "abs_min", "abs_max", "abs_mean", "abs_sum"):
                col = np.abs(v)
            elif base == "zero_fraction":
                col = (v == 0).astype(np.float64)
            elif base == "positive_fraction":
                col = (v > 0).astype(np.float64)
            elif thr is not None and base in _THRESHOLD_STAT:
                t = np.array([_threshold_for(thr, d) for d in dtypes])
                x = np.abs(v) if base == "fraction_abs_gt" else v
                col = ((x < t) if base == "fraction_lt" else (x > t)).astype(np.float64)
            else:
                raise ValueError(f"reduction: unknown reduction {base!r}")
            cols.append(col)
    return np.stack(cols, axis=1) if cols else np.zeros((len(v), 0))


# -------------------------------------------------------------------------- fused reductions
# What each reduction needs from a tensor (``probe``: a statistic that is non-finite exactly when
# the tensor holds NaN/Inf, used to skip counting non-finite values in the common case).
_NEEDS: dict[str, tuple[str, ...]] = {
    "numel": (),
    "nonfinite_count": ("probe",),
    "mean": ("sum",),
    "sum": ("sum",),
    "std": ("sum", "sq", "var"),
    "variance": ("sum", "sq", "var"),
    "min": ("minmax",),
    "max": ("minmax",),
    "abs_max": ("minmax",),
    "l2": ("sq",),
    "l1": ("abs",),
    "abs_sum": ("abs",),
    "abs_mean": ("abs",),
    "abs_min": ("abs", "abs_min"),
    "abs_std": ("abs", "sq", "abs_var"),
    "abs_variance": ("abs", "sq", "abs_var"),
    "zero_fraction": ("nonzero",),
    "positive_fraction": ("positive",),
}
_WIDTH = 256  # a bucket's buffer is (chunks, _WIDTH): every chunk belongs to one tensor
_CHUNK = 1 << 20  # at most this many elements per bucket, unless one tensor alone is larger
_SCRATCH_MAX = 1 << 22  # CPU scratch buffers kept between steps hold at most this many elements
_SUM_ERROR = 1e-6  # bound on the error of float32 chunk sums, relative to sqrt(sum(x^2)) (tests check it)
BACKGROUND_MIN = 1 << 17
"""A save step whose tensors (on the CPU) hold at least this many elements in all is reduced on a
background thread (see :meth:`TorchBackend.reduce_groups_async`)."""
BACKGROUND_MAX = 1 << 23
"""... and at most this many (the private copy of the step's tensors is kept between steps)."""
BACKGROUND_FREE_CPUS = 1
"""... and only where the process may run on at least this many CPUs more than torch's intra-op
threads (``torch.get_num_threads()``) take: with none free, a thread of ours takes a CPU from the
training step (an OpenMP parallel region waits for its slowest thread) and the same work costs
more than on the training thread itself."""


REDUCE_PROCESS = True
"""Where the background reduction applies, its statistics are computed in a process of its own
(:class:`ReduceProcess`, numpy over shared memory) instead of on the background thread, on Linux,
once that process has started (until then, and wherever it cannot start or has failed, on the
thread). The thread keeps the copy of the step's tensors (now into shared memory) and the host
assembly; tests switch this off to compare the two."""

REDUCE_TIMEOUT = 60.0
"""Seconds the background thread waits for the reduction process to answer one step before it
gives up on that process (killed; the step and the rest of the training reduced in process)."""


class ReduceProcessError(RuntimeError):
    """The reduction process failed or ended (internal: the step is then reduced in process)."""


class ReduceProcess:
    """A child process that computes the per-chunk statistics of the steps a :class:`TorchBackend`
    reduces in the background (``integrations/_reduce_worker.py``, run by ``python -c``: it imports
    numpy only). Started by the first such step, without waiting: it answers ``ready`` about a
    tenth of a second later, and the steps before that are reduced on the thread as before. The
    buckets' private copies and the results lie in ``memfd`` shared memory (nothing left behind
    in ``/dev/shm``, whatever ends the process); messages go over a ``SOCK_SEQPACKET`` socket pair.
    The child is in a session of its own (a Ctrl-C in the terminal is for the training), and ends
    when this end closes: :meth:`close`, the training process ending however it ends, or a fork's
    child (which forgets the parent's process, see :func:`_forget_reduce_processes`). Any failure
    (the child ended, an error, no answer within :data:`REDUCE_TIMEOUT`) kills it and says so in
    one WARNING; the backend then reduces in process."""

    _all: weakref.WeakSet[ReduceProcess] = weakref.WeakSet()

    @staticmethod
    def supported() -> bool:
        """Linux (``memfd_create``, ``SOCK_SEQPACKET``, ``send_fds``) and a Python executable."""
        return (REDUCE_PROCESS and bool(sys.executable) and hasattr(os, "memfd_create")
                and hasattr(socket, "SOCK_SEQPACKET") and hasattr(socket, "send_fds"))

    def __init__(self) -> None:
        import subprocess

        self.state = "starting"  # "ready", "dead"
        self._lock = threading.Lock()  # one message at a time on the socket
        self._keys = iter(range(1, 1 << 62))
        self._seq = 0
        self._maps: dict[int, Any] = {}  # key -> mmap (alive while its tensor may be used)
        self._proc: Any = None
        self._sock, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            from tripwire.integrations import _reduce_worker

            source = Path(_reduce_worker.__file__).read_bytes()
            env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
            # (the interpreter's own isolation: -I ignores PYTHONPATH and the user's site-packages)
            flags = [f for f, on in (("-I", sys.flags.isolated), ("-E", sys.flags.ignore_environment),
                                     ("-s", sys.flags.no_user_site)) if on]
            self._proc = subprocess.Popen(
                [sys.executable, *flags, "-c", _reduce_worker.BOOT, str(child.fileno()), "tripwire-reduce"],
                pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True, env=env)
            self._sock.send(source)  # (what BOOT runs)
        except (OSError, ValueError) as exc:
            self._die(f"could not start ({exc})")  # (the socket closed; a child started is killed)
        finally:
            child.close()
        ReduceProcess._all.add(self)

    def ready(self) -> bool:
        """Whether the process answers (asked without waiting: False while it starts)."""
        if self.state == "starting":
            with self._lock:
                if self.state == "starting":
                    try:
                        readable, _, _ = select.select([self._sock], [], [], 0)
                        if readable:
                            msg = self._recv_locked()
                            if msg[0] == "ready":
                                self.state = "ready"
                            else:
                                self._die(f"could not start: {msg[-1].strip().splitlines()[-1]}")
                        elif self._proc.poll() is not None:
                            self._die(f"could not start: it ended (exit code {self._proc.returncode})")
                    except (OSError, ReduceProcessError) as exc:
                        self._die(f"could not start: it {exc}" if isinstance(exc, ReduceProcessError)
                                  else f"could not start ({exc})")
        return self.state == "ready"

    def wait_ready(self, timeout: float) -> bool:
        """:meth:`ready`, waiting up to ``timeout`` seconds for the process to start (tests, and
        callers that would rather wait than reduce the first steps on the thread)."""
        if self.state == "starting":
            with contextlib.suppress(OSError, ValueError):
                select.select([self._sock], [], [], timeout)
        return self.ready()

    def buffer(self, numel: int, dtype: torch.dtype) -> tuple[int, torch.Tensor]:
        """A new shared buffer of ``numel`` elements (its key, and the tensor over it)."""
        host = _host_dtype(dtype)
        nbytes = max(1, numel) * host.itemsize
        fd = os.memfd_create("tripwire-reduce", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, nbytes)
            mm = mmap.mmap(fd, nbytes)
            key = next(self._keys)
            with self._lock:
                self._send_locked(("map", key, nbytes), [fd])
        finally:
            os.close(fd)
        self._maps[key] = mm
        with _normal_tensors():  # (made under inference mode too: written later outside it)
            return key, torch.from_numpy(np.frombuffer(mm, dtype=host, count=numel))

    def release(self, key: int) -> None:
        """A buffer of :meth:`buffer` no longer used (the mapping goes with its last tensor)."""
        self._maps.pop(key, None)
        if self.state == "ready":  # (a process that ended meanwhile is found so at its next request)
            with self._lock, contextlib.suppress(OSError, ReduceProcessError):
                self._send_locked(("unmap", key), [])

    def plan(self, key: int, *plan: Any) -> None:
        """A bucket's plan (``_reduce_worker``'s protocol: its :class:`HostStats`, columns and op
        names), which :meth:`reduce` names by ``key`` (a key sent again replaces the plan)."""
        with self._lock:
            self._ask_locked(("plan", key, *plan))

    def reduce(self, buf_key: int, dtype: np.dtype, chunks: int, plan_key: int, res_key: int,
               ops: list[tuple[str, int, int, float, int, int]]) -> bool:
        """The statistics ``ops`` of buffer ``buf_key`` per tensor, and where nothing needs a repair
        the plan's matrix, into buffer ``res_key`` (``_reduce_worker``'s protocol); waits for them
        (the GIL released). Returns whether the matrix was written. Raises :class:`ReduceProcessError`
        (the process then killed) on any failure."""
        with self._lock:
            self._seq += 1
            self._ask_locked(("reduce", self._seq, buf_key, dtype.str, chunks, plan_key, res_key, ops))
            try:
                readable, _, _ = select.select([self._sock], [], [], REDUCE_TIMEOUT)
                if not readable:
                    raise ReduceProcessError(f"did not answer within {REDUCE_TIMEOUT:g} s")
                reply = self._recv_locked()
            except (OSError, ReduceProcessError) as exc:
                self._die(str(exc))
                raise ReduceProcessError(str(exc)) from exc
            if reply[:2] != ("done", self._seq):
                reason = reply[-1].strip().splitlines()[-1] if reply[0] == "error" else f"answered {reply[:2]!r}"
                self._die(f"failed: {reason}")
                raise ReduceProcessError(reason)
            return bool(reply[2])

    def close(self) -> None:
        """End the process (it sees its end of the socket close, and exits)."""
        with self._lock:
            if self.state == "dead":
                return
            self.state = "dead"
            self._sock.close()
        self._reap(timeout=2.0)
        self._maps.clear()

    def _ask_locked(self, msg: tuple[Any, ...]) -> None:
        """Send ``msg`` to the ready process, or give up on it (killed, said) and raise."""
        if self.state != "ready":
            raise ReduceProcessError("the reduction process is not running")
        try:
            self._send_locked(msg, [])
        except (OSError, ReduceProcessError) as exc:
            self._die(str(exc))
            raise ReduceProcessError(str(exc)) from exc

    def _send_locked(self, msg: tuple[Any, ...], fds: list[int]) -> None:
        data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            if fds:
                socket.send_fds(self._sock, [data], fds)
            else:
                self._sock.send(data)
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise self._ended() from exc

    def _recv_locked(self) -> tuple[Any, ...]:
        try:
            data = self._sock.recv(1 << 16)  # (answers are a few bytes)
        except ConnectionResetError as exc:
            raise self._ended() from exc
        if not data:
            raise self._ended()
        return pickle.loads(data)

    def _ended(self) -> ReduceProcessError:
        code = None
        if self._proc is not None:
            with contextlib.suppress(Exception):
                code = self._proc.wait(timeout=1.0)
        return ReduceProcessError("ended" + (f" (exit code {code})" if code is not None else ""))

    def _die(self, reason: str) -> None:
        """Given up on: killed, said once (the caller holds the lock, or no one else has the object)."""
        if self.state == "dead":
            return
        self.state = "dead"
        logger.warning("tripwire: the reduction process %s; this training's statistics are computed in the "
                       "training process from now on (the same values, at some cost to the step time)", reason)
        with contextlib.suppress(OSError):
            self._sock.close()
        if self._proc is not None:
            with contextlib.suppress(OSError):
                self._proc.kill()
            self._reap(timeout=2.0)

    def _reap(self, timeout: float) -> None:
        if self._proc is None:
            return
        import subprocess

        try:
            self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                self._proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=timeout)


def _forget_reduce_processes() -> None:
    """In a fork's child: the parent's reduction processes are the parent's (their sockets closed
    here, nothing sent to them, nothing killed); a backend of the child starts its own."""
    for proc in list(ReduceProcess._all):
        proc.state = "dead"
        with contextlib.suppress(OSError):
            proc._sock.close()
        proc._proc = None
        proc._maps.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_reduce_processes)


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def background_allowed() -> bool:
    """Whether a CPU is free for the background reduction (:data:`BACKGROUND_FREE_CPUS`); asked at
    every save step (a program may change torch's thread count)."""
    return _usable_cpus() >= torch.get_num_threads() + BACKGROUND_FREE_CPUS


_ROW_ORDER = ("nonzero", "abs", "positive")  # tensors needing these first: each stat spans few chunks


def _needs(parsed: Sequence[tuple[str, float | None]]) -> set[Any]:
    stats: set[Any] = set()
    for base, thr in parsed:
        if thr is not None and base in _THRESHOLD_STAT:
            stats.add((_THRESHOLD_STAT[base], thr))
            if base == "fraction_abs_gt":
                stats.add("abs")
        elif base in _NEEDS:
            stats.update(_NEEDS[base])
        else:
            raise ValueError(f"reduction: unknown reduction {base!r}")
    return stats


def _acc_dtype(device: Any) -> torch.dtype:
    return torch.float64 if device.type != "mps" else torch.float32


def _work_dtype(dtype: torch.dtype, device: Any) -> torch.dtype:
    """Float32 for float32/bf16/fp16, float64 for float64 and integers/bool (exact)."""
    if dtype in (torch.float32, torch.float64):
        return dtype
    if dtype in (torch.bfloat16, torch.float16):
        return torch.float32
    return _acc_dtype(device)


def _data_key(t: torch.Tensor) -> Any:
    """Equal keys <=> the same elements in the same order (views of one buffer reduce once)."""
    try:
        ptr = t.data_ptr()
    except RuntimeError:  # pragma: no cover - tensors without storage (subclasses)
        ptr = 0
    if ptr == 0:
        return ("id", id(t))
    if t.is_contiguous():
        return (t.device, t.dtype, ptr, t.numel())
    return (t.device, t.dtype, ptr, tuple(t.shape), t.stride())


class _Layout:
    """Where the tensors of a bucket lie in its ``(chunks, _WIDTH)`` buffer: each tensor fills whole
    chunks, the rest of its last chunk is padding. The padding positions (device index tensors) are
    built once per list of sizes and device, and cached."""

    def __init__(self, sizes: Sequence[int], device: Any) -> None:
        # (tensor k owns chunks [chunk_of[k], chunk_of[k + 1]); see _reduce_worker.layout)
        self.pads, self.chunk_of, pad_pos, pad_first = layout(tuple(sizes))
        self.chunks = int(self.chunk_of[-1])
        self.max_pad = int(self.pads.max(initial=0))

        def dev(a: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64)).to(device)

        self.pad_pos = dev(pad_pos)
        self.pad_first = dev(pad_first)  # each padding slot's tensor's first element


def _normal_tensors() -> Any:
    """Buffers kept between steps are made as normal tensors even when the step that makes them
    runs under ``torch.inference_mode`` (Lightning's validation): an inference tensor could not be
    written later outside inference mode (the next train step, the background thread)."""
    return torch.inference_mode(False)


class _Scratch:
    """Buffers and layouts reused from one step to the next. On CPU a fresh multi-megabyte
    allocation goes back to the OS when freed and page-faults again on its next use, which costs
    more than the arithmetic done on it; other devices have caching allocators (plain
    ``torch.empty``). Not thread-safe: one backend per session."""

    def __init__(self) -> None:
        self._buffers: dict[tuple[str, torch.dtype], torch.Tensor] = {}
        self._layouts: dict[tuple[tuple[int, ...], Any], _Layout] = {}
        self._zeros: dict[tuple[torch.dtype, Any], torch.Tensor] = {}
        self.programs: dict[Any, _Program] = {}  # see _program
        self.process: ReduceProcess | None = None  # see shared()
        self._shared: dict[tuple[str, torch.dtype], tuple[int, torch.Tensor]] = {}
        self._shared_keys: dict[int, int] = {}  # data_ptr -> key, of the shared buffers
        self._shared_for: ReduceProcess | None = None  # the process that knows those keys

    def shared(self, name: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """:meth:`get` for a CPU buffer that the reduction process reads (:meth:`shared_key`) where
        that process is ready, else :meth:`get`'s. Kept between steps whatever its size (the
        background reduction's steps are at most ``BACKGROUND_MAX`` elements)."""
        proc = self.process
        if proc is None or not proc.ready():
            return self.get(name, shape, dtype, torch.device("cpu"))
        if self._shared_for is not proc:  # (buffers of an earlier process: that one knew their keys)
            self._shared.clear()
            self._shared_keys.clear()
            self._shared_for = proc
        numel = math.prod(shape)
        held = self._shared.get((name, dtype))
        if held is None or held[1].numel() < numel:
            try:
                key, buf = proc.buffer(numel, dtype)
            except ReduceProcessError as exc:
                proc._die(str(exc))
                return self.get(name, shape, dtype, torch.device("cpu"))
            except OSError as exc:  # (memfd_create or mmap: out of memory, a limit)
                proc._die(f"could not share a buffer ({exc})")
                return self.get(name, shape, dtype, torch.device("cpu"))
            if held is not None:
                self._shared_keys.pop(held[1].data_ptr(), None)
                proc.release(held[0])
            held = self._shared[(name, dtype)] = (key, buf)
            self._shared_keys[buf.data_ptr()] = key
        return held[1][:numel].view(shape)

    def shared_key(self, tensor: torch.Tensor) -> int | None:
        """The key of the shared buffer that ``tensor`` starts (None: not one of :meth:`shared`'s)."""
        return self._shared_keys.get(tensor.data_ptr()) if self._shared_keys else None

    def get(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device: Any) -> torch.Tensor:
        numel = math.prod(shape)
        if device.type != "cpu" or numel > _SCRATCH_MAX:
            with _normal_tensors():
                return torch.empty(shape, dtype=dtype, device=device)
        buf = self._buffers.get((name, dtype))
        if buf is None or buf.numel() < numel:
            with _normal_tensors():
                buf = self._buffers[(name, dtype)] = torch.empty(numel, dtype=dtype)
        return buf[:numel].view(shape)

    def layout(self, sizes: Sequence[int], device: Any) -> _Layout:
        key = (tuple(sizes), device)
        lay = self._layouts.get(key)
        if lay is None:
            if len(self._layouts) >= 64:
                self._layouts.clear()
            with _normal_tensors():
                lay = self._layouts[key] = _Layout(sizes, device)
        return lay

    def zeros(self, dtype: torch.dtype, device: Any) -> torch.Tensor:
        """``_WIDTH`` zeros (padding), never written."""
        key = (dtype, device)
        z = self._zeros.get(key)
        if z is None:
            with _normal_tensors():
                z = self._zeros[key] = torch.zeros(_WIDTH, dtype=dtype, device=device)
        return z


class _Bucket:
    """Tensors of one device and dtype, reduced together with a constant number of calls.

    :meth:`compute` copies them once into a ``(chunks, _WIDTH)`` buffer in which every chunk
    belongs to one tensor (zero padding at the end of each tensor), then computes each statistic
    for all of them at once: a reduction over the chunk axis (``sum(1)``, ``amin(1)``); the
    per-chunk results (a few thousand numbers per million elements) leave the device in the step's
    one host copy, where each tensor's chunks are reduced in float64 (:meth:`segment`). Sums are
    per chunk in float32 (256 elements, cascade summation), then in float64; counts are 0/1 rows
    written by comparisons as floats (a float output is much faster than a boolean one on CPU),
    summed exactly. Variances that one pass cannot give accurately are two-pass, as numpy's.
    """

    def __init__(self, device: Any, dtype: torch.dtype) -> None:
        self.device = device
        self.dtype = dtype
        self.stats: set[Any] = set()
        self.tensors: list[torch.Tensor] = []
        self._viewed = False  # the private copy stands for the tensors (own_views)
        self.sizes: list[int] = []
        self.numel = 0
        self.parts: dict[str, torch.Tensor] = {}
        self.host: dict[str, np.ndarray] = {}
        self.needs: dict[Any, list[int]] = {}  # statistic -> the tensors (in order) that need it
        self._lay: _Layout | None = None
        self._segs: list[tuple[str, int, int, int]] = []  # per op: its name, first chunk, first and end tensor
        self._pad_pieces: list[torch.Tensor | None] = []
        self.x = torch.empty(0)
        self._host_stats: HostStats | None = None  # see host_stats()
        self._ops: list[tuple[str, Any, str, int, int, float]] | None = None  # see ops()
        self._segmented = False  # host holds per-tensor statistics already (see segment)
        self.columns: list[tuple[str, float | None]] = []  # the program's columns of this bucket
        self.matrix: np.ndarray | None = None  # those columns, by the reduction process (see _compute_in)
        self._plan_in: ReduceProcess | None = None  # the process that has this bucket's plan

    def add(self, numel: int, stats: set[Any]) -> int:
        """Room for one more tensor of ``numel`` elements that needs ``stats``: its position."""
        k = len(self.sizes)
        self._host_stats = None
        self._ops = None
        self._plan_in = None
        self.sizes.append(numel)
        self.numel += numel
        if "probe" in stats and "sum" not in stats and "sq" not in stats:
            stats = stats | {"sq"}
        self.stats |= stats
        for s in stats:
            self.needs.setdefault(s, []).append(k)
        return k

    def bind(self, tensors: list[torch.Tensor]) -> None:
        """This step's tensors (in the order of :meth:`add`); forgets the last step's results."""
        self.tensors = tensors
        self._viewed = False
        self.parts, self.host = {}, {}
        self._segmented = False
        self.matrix = None

    def pack(self, scratch: _Scratch, own: int | None = None) -> None:
        """This step's tensors into the bucket's ``(chunks, _WIDTH)`` buffer ``x`` (one ``cat``;
        a lone contiguous tensor of the work dtype without padding is read in place). ``own``: a
        private copy in scratch buffer ``x<own>`` (reduced later, by another thread, while training
        goes on and changes the tensors), whose slices then stand for the tensors."""
        copy = self.prepare(scratch, own)
        if copy is not None:
            copy()
            if own is not None:
                self.own_views()

    def prepare(self, scratch: _Scratch, own: int | None = None) -> Callable[[], Any] | None:
        """:meth:`pack` but the copy itself, which it returns (one ``torch.cat``, which leaves the
        GIL while it copies; with ``own``, :meth:`own_views` after it), or None for a tensor read
        in place."""
        work = _work_dtype(self.dtype, self.device)
        lay = self._lay
        if lay is None:
            lay = self._lay = scratch.layout(self.sizes, self.device)
            zeros = scratch.zeros(self.dtype, self.device)
            self._pad_pieces = [zeros[:pad] if pad else None for pad in lay.pads.tolist()]
        shape = (lay.chunks, _WIDTH)
        first = self.tensors[0].detach()
        if own is None and len(self.tensors) == 1 and lay.max_pad == 0 and first.dtype == work and first.is_contiguous():
            self.x = first.view(shape)  # read only: padding is never written when there is none
            return None
        if own is None or self.device.type != "cpu":
            x = self.x = scratch.get("x" if own is None else f"x{own}", shape, work, self.device)
        else:
            x = self.x = scratch.shared(f"x{own}", shape, work)
        pieces: list[torch.Tensor] = []
        for t, pad in zip(self.tensors, self._pad_pieces):  # (under no_grad: no detach needed)
            pieces.append(t.reshape(-1))
            if pad is not None:
                pieces.append(pad)
        return functools.partial(torch.cat, pieces, out=x.view(-1))

    def own_views(self) -> None:
        """The private copy stands for the tensors (after :meth:`pack` with ``own``): the bound
        tensors are let go, and :meth:`tensor` slices the copy (made only for the rare repairs,
        not for every tensor at every step: slicing holds the GIL against the training thread)."""
        self.tensors = []
        self._viewed = True

    def tensor(self, k: int) -> torch.Tensor:
        """The ``k``-th tensor of this step: the bound one, or its slice of the private copy."""
        if not self._viewed:
            return self.tensors[k]
        c = int(self._lay.chunk_of[k]) * _WIDTH  # type: ignore[union-attr]
        return self.x.view(-1)[c:c + self.sizes[k]]

    def ops(self) -> list[tuple[str, Any, str, int, int, float]]:
        """What :meth:`compute` computes, in order: ``(result name, statistic, kind, first chunk, end
        chunk, threshold)`` per result, each over the chunks of the tensors that need it (tensors
        are ordered so that they are few). Worked out once per bucket."""
        if self._ops is not None:
            return self._ops
        stats, chunk_of = self.stats, self._lay.chunk_of  # type: ignore[union-attr]

        def span(stat: Any) -> tuple[int, int]:
            need = self.needs[stat]
            return int(chunk_of[need[0]]), int(chunk_of[need[-1] + 1])

        ops: list[tuple[str, Any, str, int, int, float]] = []
        for stat in ("sum", "sq", "abs"):  # (sums per chunk in the work dtype, across chunks in float64)
            if stat in stats:
                ops.append((stat, stat, stat, *span(stat), 0.0))
        for spec in [s for s in ("nonzero", "positive") if s in stats] + sorted((s for s in stats if isinstance(s, tuple)), key=repr):
            if isinstance(spec, str):
                ops.append((spec, spec, spec, *span(spec), 0.0))
            else:
                ops.append((_row_key(spec), spec, spec[0], *span(spec), _threshold_for(spec[1], self.dtype)))
        if "minmax" in stats:
            ops += [("min", "minmax", "min", *span("minmax"), 0.0), ("max", "minmax", "max", *span("minmax"), 0.0)]
        if "abs_min" in stats and "abs" in stats:
            ops.append(("abs_min", "abs_min", "abs_min", *span("abs_min"), 0.0))
        self._ops = ops
        return ops

    def compute(self, scratch: _Scratch) -> None:
        """Every statistic of the packed buffer (:meth:`pack`), per chunk (:meth:`ops`): by the
        reduction process where the buffer is shared with it (:meth:`_Scratch.shared`), else here
        with torch. Per chunk: ``sum(1)`` in the work dtype; ``sq`` the chunk's 2-norm (float32 over
        256 elements, squared and summed in float64 by :meth:`segment`); ``abs`` the sum of ``|x|``;
        counts as 0/1 rows written by comparisons as floats (a float output is much faster than a
        boolean one on CPU), summed exactly; ``min``/``max`` with each tensor's padding set to its
        first element first (no effect; ``aminmax(dim=1)`` is about 20x slower on CPU; NaN
        propagates); ``abs_min`` with the padding of ``|x|`` set to +inf."""
        if self._lay is None:
            raise RuntimeError("_Bucket.compute: pack() first")
        ops = self.ops()
        self._segs = [(name, lo, self.needs[stat][0], self.needs[stat][-1] + 1) for name, stat, _, lo, _, _ in ops]
        proc = scratch.process
        if proc is not None and proc.state == "ready" and self.device.type == "cpu":
            key = scratch.shared_key(self.x)
            if key is not None and self._compute_in(proc, key, ops, scratch):
                return
        self._compute_here(ops, scratch)

    def _compute_in(self, proc: ReduceProcess, key: int, ops: list[tuple[str, Any, str, int, int, float]],
                    scratch: _Scratch) -> bool:
        """:meth:`compute` by the reduction process, into a shared result buffer; False where it
        failed (it is then given up on: the step is computed here)."""
        count, columns = len(self.sizes), self.columns
        out = scratch.shared(f"r{key}", (count * (len(ops) + len(columns)),), torch.float64)
        res_key = scratch.shared_key(out)
        if res_key is None:
            return False
        try:
            if self._plan_in is not proc:  # (what the process keeps of this bucket: sent once)
                hs = self.host_stats()
                proc.plan(id(self), hs.sizes, hs.stats, hs.needs, hs.low_precision, hs.thresholds, columns,
                          [name for name, *_ in ops])
                self._plan_in = proc
            done = proc.reduce(key, _host_dtype(self.x.dtype), self._lay.chunks, id(self), res_key,  # type: ignore[union-attr]
                               [(kind, lo, hi, thr, k0, k1) for (_, _, kind, lo, hi, thr), (_, _, k0, k1)
                                in zip(ops, self._segs)])
        except ReduceProcessError:
            return False
        values = out.numpy().copy()  # (the buffer is written again by the next step's request)
        self.host = {name: values[j * count:(j + 1) * count] for j, (name, *_) in enumerate(ops)}
        self._segmented = True
        if done:
            self.matrix = values[len(ops) * count:].reshape(count, len(columns))
        return True

    def _compute_here(self, ops: list[tuple[str, Any, str, int, int, float]], scratch: _Scratch) -> None:
        """:meth:`compute` with torch, on the calling thread."""
        parts, device, lay, x = self.parts, self.device, self._lay, self.x
        work = _work_dtype(self.dtype, device)
        absolute: torch.Tensor | None = None
        abs_lo = 0
        padded = False
        row = scratch.get("row", (lay.chunks, _WIDTH), work, device)  # type: ignore[union-attr]
        for name, stat, kind, lo, hi, _ in ops:
            if kind == "sum":
                parts[name] = x[lo:hi].sum(1)
            elif kind == "sq":
                parts[name] = torch.linalg.vector_norm(x[lo:hi], dim=1)
            elif kind == "abs":
                abs_lo = lo
                absolute = torch.abs(x[lo:hi], out=scratch.get("abs", (hi - lo, _WIDTH), work, device))
                parts[name] = absolute.sum(1)
            elif kind in ("min", "max"):
                if not padded and lay.max_pad:  # type: ignore[union-attr]
                    flat = x.view(-1)
                    flat.index_put_((lay.pad_pos,), flat.index_select(0, lay.pad_first))  # type: ignore[union-attr]
                padded = True
                parts[name] = x[lo:hi].amin(1) if kind == "min" else x[lo:hi].amax(1)
            elif kind == "abs_min":
                if lay.max_pad:  # type: ignore[union-attr]
                    pos = lay.pad_pos - abs_lo * _WIDTH  # type: ignore[union-attr]
                    pos = pos[(pos >= 0) & (pos < absolute.numel())]  # type: ignore[union-attr]
                    absolute.view(-1).index_fill_(0, pos, float("inf"))  # type: ignore[union-attr]
                parts[name] = absolute[lo - abs_lo:hi - abs_lo].amin(1)  # type: ignore[index]
            else:  # a count
                src = absolute[lo - abs_lo:hi - abs_lo] if kind == "abs_gt" else x[lo:hi]  # type: ignore[index]
                parts[name] = self._fill(stat, src, row[: hi - lo]).sum(1)

    def segment(self) -> None:
        """Per-tensor statistics from the copied per-chunk ones (float64 on the host: a tensor's
        chunks are contiguous, so one ``reduceat`` per statistic); tensors outside a statistic's
        span get 0."""
        if self._segmented:  # (by the reduction process: see _compute_in)
            return
        chunk_of = self._lay.chunk_of  # type: ignore[union-attr]
        for name, lo, k0, k1 in self._segs:
            out = np.zeros(len(self.sizes))
            per_tensor(self.host[name], name, chunk_of, lo, k0, k1, out)
            self.host[name] = out

    def host_stats(self) -> HostStats:
        """The host-side arithmetic of this bucket's statistics (made once its layout is known)."""
        hs = self._host_stats
        if hs is None:
            if self._lay is None:
                raise RuntimeError("_Bucket.host_stats: pack() first")
            low = _work_dtype(self.dtype, self.device) != _acc_dtype(self.device)
            thresholds = {s[1]: _threshold_for(s[1], self.dtype) for s in self.stats if isinstance(s, tuple)}
            hs = self._host_stats = HostStats(tuple(self.sizes), self.stats, self.needs, low, thresholds)
        return hs

    def finish(self) -> list[tuple[int, str]]:
        """:meth:`HostStats.finish` of this step's host statistics."""
        return self.host_stats().finish(self.host)

    def exact(self, k: int, stat: str) -> torch.Tensor:
        """One statistic of one tensor in float64, on its device: ``sum``, ``sum(x^2)``, or
        ``sum((x - mean(x))^2)`` (of ``|x|`` for ``abs_var``)."""
        x = self.tensor(k).detach().reshape(-1).to(_acc_dtype(self.device))
        if stat == "sum":
            return x.sum()
        if stat == "sq":
            return torch.dot(x, x)
        if stat == "abs":
            return x.abs().sum()
        if stat == "abs_var":
            x = x.abs()
        d = x - x.mean()
        return torch.dot(d, d)

    def _fill(self, spec: Any, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """One 0/1 row written by a comparison as floats (much faster than a boolean output on
        CPU; NaN compares false and counts as non-zero, as in numpy). ``abs_gt`` gets ``|x|``."""
        if spec == "nonzero":
            return torch.ne(x, 0, out=out)
        if spec == "positive":
            return torch.gt(x, 0, out=out)
        kind, thr = spec
        t = _threshold_for(thr, self.dtype)
        if kind == "gt":
            return torch.gt(x, t, out=out)
        if kind == "lt":
            return torch.lt(x, t, out=out)
        return torch.gt(x, t, out=out)

    def results(self) -> list[tuple[str, torch.Tensor]]:
        return list(self.parts.items())

    def column(self, base: str, thr: float | None, nonfinite: np.ndarray) -> np.ndarray:
        """:meth:`HostStats.column` of this step's host statistics."""
        return self.host_stats().column(self.host, base, thr, nonfinite)

    def probe(self) -> list[int]:
        """:meth:`HostStats.probe` of this step's host statistics."""
        return self.host_stats().probe(self.host)


# ------------------------------------------------------------------------------ sparse tensors
_STRIDED = torch.strided
#: Compressed sparse layouts: their stored values (``.values()``) are distinct elements (an invariant).
_COMPRESSED = (torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc)


def _dense(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` detached, as a strided tensor (``to_dense()`` of a sparse one: its implicit zeros
    written out). For a histogram or a raw array of a sparse tensor, at save steps only."""
    t = tensor.detach()
    return t if t.layout is _STRIDED else t.to_dense()


def _stored_values(t: torch.Tensor) -> torch.Tensor:
    """The explicitly stored elements of a sparse tensor, flat, one per dense element they stand for
    (a COO tensor coalesced first: the gradient of ``EmbeddingBag(sparse=True)`` repeats an index
    once per use, and the dense element is the sum of its entries). A layout that is neither COO
    nor compressed is densified."""
    if t.layout is torch.sparse_coo:
        return t.coalesce().values().reshape(-1)
    if t.layout in _COMPRESSED:
        return t.values().reshape(-1)
    return t.to_dense().reshape(-1)


def _sparse_row(tensor: torch.Tensor, parsed: Sequence[tuple[str, float | None]]) -> np.ndarray:
    """Every reduction of a sparse tensor, equal to that of its dense tensor (``numel`` elements,
    the implicit ones zero), computed on its device from its stored values without densifying: sums,
    norms, counts and extremes over the stored values, with the implicit zeros counted where they
    matter (``mean`` is the sum over the dense ``numel``; ``min``/``max`` take 0 in where the tensor
    has implicit zeros; ``zero_fraction`` counts them; a threshold counts them where 0 passes it;
    ``variance`` is two-pass over the stored values plus the implicit zeros' share). In float64
    (float32 on MPS), one host copy. As :class:`tripwire.NumpyBackend` on ``to_dense()`` (to
    rounding), an empty tensor included."""
    t = tensor.detach()
    n = int(t.numel())
    out = np.full(len(parsed), np.nan, dtype=np.float64)
    if n == 0:
        for j, (base, _) in enumerate(parsed):
            if base in ("numel", "nonfinite_count") or base in EMPTY_ZERO:
                out[j] = 0.0
        return out
    values = _stored_values(t)
    stored = int(values.numel())
    implicit = n - stored  # elements that are zero without being stored
    acc = _acc_dtype(values.device)
    x = values if values.dtype == acc else values.to(acc)
    wanted: dict[str, torch.Tensor] = {}

    def stat(name: str) -> None:
        if name in wanted:
            return
        if name == "sum":
            wanted[name] = x.sum()
        elif name == "sq":
            wanted[name] = torch.dot(x, x)
        elif name == "abs":
            wanted[name] = x.abs().sum()
        elif name in ("var", "abs_var"):  # two passes: sum((x - mean)^2) over stored, + implicit * mean^2
            y = x.abs() if name == "abs_var" else x
            mean = y.sum() / n
            d = y - mean
            wanted[name] = torch.dot(d, d) + implicit * mean * mean
        elif name == "nonfinite":
            wanted[name] = (~torch.isfinite(values)).sum().to(acc)
        elif name == "zero":
            wanted[name] = (values == 0).sum().to(acc)
        elif name == "positive":
            wanted[name] = (values > 0).sum().to(acc)
        elif stored == 0:  # extremes of no stored value: the implicit zeros only
            wanted[name] = torch.zeros((), dtype=acc, device=x.device)
        elif name == "min":
            wanted[name] = x.amin()
        elif name == "max":
            wanted[name] = x.amax()
        elif name == "abs_min":
            wanted[name] = x.abs().amin()
        elif name == "abs_max":
            wanted[name] = x.abs().amax()
        else:  # a threshold: "gt:<thr>", "lt:<thr>", "abs_gt:<thr>"
            kind, _, thr = name.partition(":")
            src = x.abs() if kind == "abs_gt" else x
            cmp = torch.lt if kind == "lt" else torch.gt
            wanted[name] = cmp(src, _threshold_for(float(thr), t.dtype)).sum().to(acc)

    for base, thr in parsed:
        if base == "numel":
            continue
        if base == "nonfinite_count":
            stat("nonfinite")
        elif base in ("sum", "mean"):
            stat("sum")
        elif base == "l2":
            stat("sq")
        elif base in ("l1", "abs_sum", "abs_mean"):
            stat("abs")
        elif base in ("variance", "std"):
            stat("var")
        elif base in ("abs_variance", "abs_std"):
            stat("abs_var")
        elif base in ("min", "max", "abs_min", "abs_max"):
            stat(base)
        elif base == "zero_fraction":
            stat("zero")
        elif base == "positive_fraction":
            stat("positive")
        elif thr is not None and base in _THRESHOLD_STAT:
            stat(f"{_THRESHOLD_STAT[base]}:{thr!r}")
        else:
            raise ValueError(f"reduction: unknown reduction {base!r}")
    names = list(wanted)
    host = dict(zip(names, torch.stack([wanted[k] for k in names]).cpu().numpy().astype(np.float64).tolist())) \
        if names else {}
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        for j, (base, thr) in enumerate(parsed):
            if base == "numel":
                v = float(n)
            elif base == "nonfinite_count":
                v = host["nonfinite"]
            elif base == "sum":
                v = host["sum"] + 0.0
            elif base == "mean":
                v = host["sum"] / n + 0.0
            elif base == "l2":
                v = float(np.sqrt(host["sq"]))
            elif base in ("l1", "abs_sum"):
                v = host["abs"]
            elif base == "abs_mean":
                v = host["abs"] / n
            elif base in ("variance", "std", "abs_variance", "abs_std"):
                v = host["abs_var" if base.startswith("abs_") else "var"] / n
                v = float(np.sqrt(v)) if base.endswith("std") else v
            elif base in ("min", "abs_min"):  # (np.minimum: NaN propagates, as numpy's min)
                v = float(np.minimum(host[base], 0.0)) if implicit else host[base]
            elif base in ("max", "abs_max"):
                v = float(np.maximum(host[base], 0.0)) if implicit else host[base]
                v += 0.0
            elif base == "zero_fraction":
                v = (implicit + host["zero"]) / n
            elif base == "positive_fraction":
                v = host["positive"] / n
            else:  # a threshold: the implicit zeros count where 0 passes it
                t_ = _threshold_for(thr, t.dtype)  # type: ignore[arg-type]
                zero_passes = (0.0 < t_) if base == "fraction_lt" else (0.0 > t_)
                v = (host[f"{_THRESHOLD_STAT[base]}:{thr!r}"] + implicit * zero_passes) / n
            out[j] = v
    return out


@functools.lru_cache(maxsize=256)
def _plan(reductions: tuple[str, ...]) -> tuple[tuple[tuple[str, float | None], ...], frozenset[Any]]:
    """Parsed reductions and the statistics they need (cached: the same lists come every step)."""
    parsed = tuple(parse_reduction(r) for r in reductions)
    return parsed, frozenset(_needs(parsed))


def _program(groups: Sequence[tuple[Sequence[Any], Sequence[str]]], scratch: _Scratch) -> _Program:
    # the same arrangement of tensors comes at every save step: what to compute, how to pack it
    # and where each result goes are worked out once per arrangement (a _Program)
    signature: list[Any] = []
    seen: dict[Any, int] = {}
    for tensors, reductions in groups:
        row: list[Any] = [tuple(reductions)]
        for t in tensors:
            n = t.numel()
            if t.layout is not _STRIDED:  # (a sparse tensor: reduced from its stored values, see _sparse_row)
                row.append((n, t.dtype, t.device, t.layout))
            else:
                row.append((n, t.dtype, t.device, seen.setdefault(_data_key(t), len(seen)) if n > 1 else -1))
        signature.append(tuple(row))
    key = tuple(signature)
    program = scratch.programs.get(key)
    if program is None:
        if len(scratch.programs) >= 16:
            scratch.programs.clear()
        program = scratch.programs[key] = _Program(groups)
    return program


class _Fence:
    """The tensors of a step whose copy the background thread makes (``live``), their version
    counters when the step ended, and whether one changed before the copy was known made. The copy
    is made once, by whichever thread comes first: the background thread, or the training thread
    at the fence when that thread has not started it (a busy machine: training never waits for a
    thread that has no CPU)."""

    def __init__(self, versions: list[tuple[torch.Tensor, int]], places: list[tuple[int, int]]) -> None:
        self.versions = versions
        self.places = places  # (group, row) of each tensor
        self.copies: list[Callable[[], Any]] = []
        self.copied = threading.Event()
        self._claim = threading.Lock()
        self.changed = False
        self.changed_places: list[tuple[int, int]] = []
        self.redo: Callable[[], list[np.ndarray]] = lambda: []
        self.redone: list[np.ndarray] | None = None  # the step reduced again at the fence

    @classmethod
    def of(cls, tensors: list[list[torch.Tensor]], places: list[list[tuple[int, int]]]) -> _Fence | None:
        """A fence over ``tensors`` (offered at ``places``: ``(group, row)``), or None where one has
        no version counter (an inference tensor: those the calling thread copies)."""
        try:
            return cls([(t, t._version) for ts in tensors for t in ts], [p for ps in places for p in ps])
        except RuntimeError:  # "Inference tensors do not track version counter"
            return None

    def copy(self) -> None:
        """Make the copy (the first caller), or wait until the other thread has made it."""
        if self._claim.acquire(blocking=False):
            try:
                with torch.no_grad():
                    for copy in self.copies:
                        copy()
            finally:
                self.copied.set()
        else:
            self.copied.wait()

    def wait(self) -> bool:
        """The copy made (by this thread if the other has not started it); True when a tensor
        changed in place before it was made (maybe)."""
        self.copy()
        self.changed_places = [p for (t, v), p in zip(self.versions, self.places) if t._version != v]
        self.changed = bool(self.changed_places)
        return self.changed


class _Program:
    """How one arrangement of groups is reduced: tensors in several groups (or views of one
    buffer) reduced once for the union of their statistics, packed into buckets per device and
    dtype (at most ``_CHUNK`` elements each: a bucket computes the union of its tensors'
    statistics, cheaper than more calls); one-element tensors stacked per group and device; the
    host-known columns (``numel``; ``nonfinite_count`` of one-element tensors is computed) filled
    in advance; where each bucket's results go in each group's output. Sparse tensors (any layout
    but ``torch.strided``) are in no bucket: each is reduced on its own from its stored values
    (:func:`_sparse_row`), on the calling thread."""

    def __init__(self, groups: Sequence[tuple[Sequence[Any], Sequence[str]]]) -> None:
        self.plans = [_plan(tuple(rs)) for _, rs in groups]
        self.templates: list[np.ndarray] = []
        uniques: dict[Any, int] = {}
        unique_slots: list[tuple[int, int]] = []  # (group, row) of each unique tensor's first offer
        unique_stats: list[set[Any]] = []
        placed: list[list[tuple[int, int]]] = []  # per group: (row, unique index)
        self.sparse: list[tuple[int, int]] = []  # (group, row) of each sparse tensor (see _sparse_row)
        # per group and device: the rows of one-element tensors and their dtypes
        self.scalars: list[tuple[int, Any, list[int], list[torch.dtype]]] = []
        for g, ((tensors, _), (parsed, need)) in enumerate(zip(groups, self.plans)):
            out = np.full((len(tensors), len(parsed)), np.nan, dtype=np.float64)
            numels = [t.numel() for t in tensors]
            sparse = {i for i, t in enumerate(tensors) if t.layout is not _STRIDED}
            if sparse:  # (reduced apart: marked 0 here, out of the scalars and the buckets)
                self.sparse += [(g, i) for i in sorted(sparse)]
                numels = [0 if i in sparse else n for i, n in enumerate(numels)]
            empty = [i for i, n in enumerate(numels) if n == 0]
            for j, (base, _) in enumerate(parsed):
                if base == "numel":
                    out[:, j] = numels
                elif base == "nonfinite_count":
                    out[:, j] = 0.0
                elif base in EMPTY_ZERO and empty:
                    out[empty, j] = 0.0
            self.templates.append(out)
            if parsed:
                by_device: dict[Any, list[int]] = {}
                for i, n in enumerate(numels):
                    if n == 1:
                        by_device.setdefault(tensors[i].device, []).append(i)
                self.scalars += [(g, device, rows, [tensors[i].dtype for i in rows]) for device, rows in by_device.items()]
            rows_u: list[tuple[int, int]] = []
            if need:
                for i, n in enumerate(numels):
                    if n > 1:
                        key = _data_key(tensors[i])
                        u = uniques.get(key)
                        if u is None:
                            u = uniques[key] = len(unique_slots)
                            unique_slots.append((g, i))
                            unique_stats.append(set(need))
                        else:
                            unique_stats[u] |= need
                        rows_u.append((i, u))
            placed.append(rows_u)
        self.buckets: list[_Bucket] = []
        self.slots: list[list[tuple[int, int]]] = []  # per bucket: where its tensors are offered
        # no tensor of more than one element, all on one device: see _run_scalars()
        self.scalar_only = not unique_slots and len({d for _, d, _, _ in self.scalars}) == 1
        # ... on the CPU, of dtypes whose .item() is exact: read one by one, no torch op
        self.scalar_items = self.scalar_only and all(
            device.type == "cpu" and all(d in _ITEM_DTYPES for d in dtypes) for _, device, _, dtypes in self.scalars)
        self.scalar_places = [(g, i) for g, _, rows, _ in self.scalars for i in rows]
        # per block of scalars: (group, its rows, where its values start and end in scalar_places, the
        # number of columns where every reduction is the value itself, else 0)
        self.scalar_blocks: list[tuple[int, np.ndarray, int, int, int]] = []
        # the groups whose every tensor is in their block (nothing of their template is left)
        self.scalar_whole: set[int] = set()
        start = 0
        for g, _, rows, _ in self.scalars:
            parsed = self.plans[g][0]
            itself = len(parsed) if all(base in VALUE_ITSELF for base, _ in parsed) else 0
            self.scalar_blocks.append((g, np.asarray(rows, dtype=np.intp), start, start + len(rows), itself))
            start += len(rows)
            if len(rows) == len(groups[g][0]):
                self.scalar_whole.add(g)
        open_buckets: dict[Any, int] = {}
        order = sorted(range(len(unique_slots)), key=lambda u: tuple(s not in unique_stats[u] for s in _ROW_ORDER))
        where: list[tuple[int, int]] = [(0, 0)] * len(unique_slots)
        for u in order:
            g, i = unique_slots[u]
            t = groups[g][0][i]
            key = (t.device, t.dtype)
            b = open_buckets.get(key)
            if b is None or self.buckets[b].numel + t.numel() > _CHUNK:
                b = open_buckets[key] = len(self.buckets)
                self.buckets.append(_Bucket(t.device, t.dtype))
                self.slots.append([])
            self.slots[b].append((g, i))
            where[u] = (b, self.buckets[b].add(int(t.numel()), unique_stats[u]))
        # per group: (bucket, rows of the group, positions in the bucket)
        assembly: list[list[tuple[int, np.ndarray, np.ndarray]]] = []
        for rows_u in placed:
            by_bucket: dict[int, tuple[list[int], list[int]]] = {}
            for i, u in rows_u:
                b, k = where[u]
                entry = by_bucket.setdefault(b, ([], []))
                entry[0].append(i)
                entry[1].append(k)
            assembly.append([(b, np.asarray(idx), np.asarray(pos)) for b, (idx, pos) in by_bucket.items()])
        # per bucket: the union of the reductions its groups ask for (one matrix of columns a step),
        # and per block the rows and columns of that matrix that the group takes
        self.bucket_columns: list[list[tuple[str, float | None]]] = [[] for _ in self.buckets]
        self.blocks: list[list[tuple[int, np.ndarray, tuple[np.ndarray, np.ndarray]]]] = []
        for (parsed, _), blocks in zip(self.plans, assembly):
            mine = []
            for b, idx, pos in blocks:
                cols = self.bucket_columns[b]
                for spec in parsed:
                    if spec not in cols:
                        cols.append(spec)
                colidx = np.asarray([cols.index(spec) for spec in parsed], dtype=np.int64)
                mine.append((b, idx, (pos[:, None], colidx[None, :])))
            self.blocks.append(mine)
        for bucket, cols in zip(self.buckets, self.bucket_columns):
            bucket.columns = cols
        # reduced in the background (start()): tensors on the CPU only, enough elements for the
        # copy to cost less than the statistics it takes off the training thread, few enough for
        # the private copies (one buffer per bucket, kept between steps) to stay small
        total = sum(b.numel for b in self.buckets)
        self.background = (BACKGROUND_MIN <= total <= BACKGROUND_MAX
                           and all(b.device.type == "cpu" for b in self.buckets)
                           and all(d.type == "cpu" for _, d, _, _ in self.scalars))

    def run(self, groups: Sequence[tuple[Sequence[Any], Sequence[str]]], scratch: _Scratch) -> list[np.ndarray]:
        if self.scalar_only:
            return self._run_scalars(groups)
        outs = [t.copy() for t in self.templates]
        self._fill_sparse(groups, outs)
        with torch.no_grad():
            for bucket, slots in zip(self.buckets, self.slots):
                bucket.bind([groups[g][0][i] for g, i in slots])
                bucket.pack(scratch)
                bucket.compute(scratch)
            return self._collect(outs, self._stacked(groups))

    def _run_scalars(self, groups: Sequence[tuple[Sequence[Any], Sequence[str]]]) -> list[np.ndarray]:
        """:meth:`run` for one-element tensors only (losses, metrics, learning rates: the default
        config's save steps), as few calls as can be (a save step's reduction comes after the
        training step has taken the caches, where each call costs microseconds): the values read on
        the host (:attr:`scalar_items`: ``.item()`` each; else one stack and one host copy), then
        the columns of each block (the value repeated where every reduction is the value itself:
        ``raw``, asked as ``sum``); a block that holds every tensor of its group is that group's
        output (no template copy)."""
        _produce_late(groups[g][0][i] for g, i in self.scalar_places)
        if self.scalar_items:
            host = np.array([groups[g][0][i].item() for g, i in self.scalar_places], dtype=np.float64)
        else:
            with torch.no_grad():
                host = _stack_scalars([groups[g][0][i] for g, i in self.scalar_places]).cpu().numpy().astype(np.float64)
        outs = [t if g in self.scalar_whole else t.copy() for g, t in enumerate(self.templates)]
        self._fill_sparse(groups, outs)
        for (g, rows, lo, hi, itself), (_, _, _, dtypes) in zip(self.scalar_blocks, self.scalars):
            chunk = host[lo:hi]
            cols = chunk[:, None].repeat(itself, axis=1) if itself else _scalar_columns(chunk, dtypes, self.plans[g][0])
            if g in self.scalar_whole:
                outs[g] = cols
            else:
                outs[g][rows] = cols
        return outs

    def start(self, groups: Sequence[tuple[Sequence[Any], Sequence[str]]], scratch: _Scratch,
              pool: ThreadPoolExecutor, live: bool = False) -> tuple[Future[Any], list[np.ndarray], _Fence | None]:
        """:meth:`run` in three parts: a copy of this step's tensors (one ``cat`` per bucket, one
        ``stack`` of the scalars) on the calling thread, or with ``live`` on ``pool``'s thread
        (then the returned :class:`_Fence` says when it is made); the statistics and their host
        copy on ``pool``'s thread, while training goes on; their assembly per tensor
        (:meth:`_assemble`) on the thread that takes the result. Only for a :attr:`background`
        program; the caller finishes before the next call that uses ``scratch``. Returns the
        future, the outputs and the fence (None unless ``live``)."""
        outs = [t.copy() for t in self.templates]
        self._fill_sparse(groups, outs)  # (now: the sparse tensors are not copied for the background thread)
        bound = [[groups[g][0][i] for g, i in slots] for slots in self.slots]
        fence = _Fence.of(bound, self.slots) if live else None
        with torch.no_grad():
            for j, (bucket, tensors) in enumerate(zip(self.buckets, bound)):
                bucket.bind(tensors)
                if fence is None:
                    bucket.pack(scratch, own=j)
                else:  # all but the copy itself, which the background thread makes (see _Fence)
                    copy = bucket.prepare(scratch, own=j)
                    if copy is not None:
                        fence.copies.append(copy)
            late: list[tuple[torch.Tensor, int, torch.Tensor]] = []
            scalars = self._stacked(groups, late)

        def compute() -> list[tuple[list[tuple[Any, str, torch.Tensor]], np.ndarray]]:
            # torch calls only: the host-side assembly (numpy and Python, which would hold the GIL
            # against the training thread) is left to the thread that takes the result
            try:
                with torch.no_grad():
                    if fence is not None:
                        fence.copy()
                        for bucket in self.buckets:
                            bucket.own_views()
                    if late:
                        self._fill_late(late)
                    for bucket in self.buckets:
                        bucket.compute(scratch)
                return self._gather(scalars)
            finally:
                if fence is not None:
                    fence.copied.set()  # (whatever happened: the fence never waits for ever)

        try:
            return pool.submit(compute), outs, fence
        except RuntimeError:
            # (the interpreter is exiting: its executors take no new work once their exit handler ran,
            # and a session closed at exit ends its open step here; trial 42d: "cannot schedule new
            # futures after shutdown" lost that step and the losses kept since the last save)
            done: Future[Any] = Future()
            done.set_result(compute())
            return done, outs, fence

    def _fill_sparse(self, groups: Sequence[tuple[Sequence[Any], Sequence[str]]], outs: list[np.ndarray]) -> None:
        """The rows of the sparse tensors (:func:`_sparse_row`), into ``outs``."""
        if self.sparse:
            with torch.no_grad():
                for g, i in self.sparse:
                    outs[g][i] = _sparse_row(groups[g][0][i], self.plans[g][0])

    def _stacked(self, groups: Sequence[tuple[Sequence[Any], Sequence[str]]],
                 late: list[tuple[torch.Tensor, int, torch.Tensor]] | None = None) -> list[tuple[Any, torch.Tensor]]:
        """Each block of one-element tensors stacked (a new tensor: a copy). Values that are produced
        later (:class:`LateValues`) are produced now; with ``late``, a list, they are not: each
        leaves ``(stacked block, position, value)`` there for the thread that produces them."""
        out = []
        for block in self.scalars:
            tensors = [groups[block[0]][0][i] for i in block[2]]
            marked = [(j, t) for j, t in enumerate(tensors) if _late_of(t) is not None]
            if marked and late is None:
                _produce_late(t for _, t in marked)
            stacked = _stack_scalars(tensors)
            if marked and late is not None:
                late.extend((stacked, j, t) for j, t in marked)
            out.append((block, stacked))
        return out

    @staticmethod
    def _fill_late(late: list[tuple[torch.Tensor, int, torch.Tensor]]) -> None:
        """The late values of :meth:`_stacked` produced, into their stacked blocks."""
        _produce_late(t for _, _, t in late)
        for stacked, j, t in late:
            stacked[j] = t

    def _collect(self, outs: list[np.ndarray], scalars: list[tuple[Any, torch.Tensor]]) -> list[np.ndarray]:
        """The computed statistics to the host (one copy per device), per tensor, into ``outs``."""
        return self._assemble(outs, self._gather(scalars))

    def _gather(self, scalars: list[tuple[Any, torch.Tensor]]) -> list[tuple[list[tuple[Any, str, torch.Tensor]], np.ndarray]]:
        """Every statistic of every bucket and every block of scalars, one host copy per device:
        ``(items, host values)`` per device (torch calls only: the background thread's part)."""
        pieces: dict[Any, list[tuple[Any, str, torch.Tensor]]] = {}
        for block, value in scalars:
            pieces.setdefault(block[1], []).append((block, "", value))
        for bucket in self.buckets:
            for name, value in bucket.results():
                pieces.setdefault(bucket.device, []).append((bucket, name, value))
        gathered = []
        with torch.no_grad():
            for device, items in pieces.items():
                values = [v.reshape(-1) for _, _, v in items]
                if len({v.dtype for v in values}) > 1:
                    acc = _acc_dtype(device)
                    values = [v.to(acc) for v in values]
                host = torch.cat(values).cpu()
                # (float64 here, a torch call: on the background thread where the step goes there, not
                # numpy's copy on the thread that assembles)
                gathered.append((items, (host if host.dtype == torch.float64 else host.to(torch.float64)).numpy()))
        return gathered

    def _assemble(self, outs: list[np.ndarray],
                  gathered: list[tuple[list[tuple[Any, str, torch.Tensor]], np.ndarray]]) -> list[np.ndarray]:
        """The host values of :meth:`_gather` per tensor into ``outs`` (numpy; torch only for the
        rare repairs, on the bucket's tensors)."""
        buckets = self.buckets
        # (NaN and Inf are results here: numpy's floating-point warnings silenced throughout)
        with torch.no_grad(), np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            for items, host in gathered:
                flat = host if host.dtype == np.float64 else host.astype(np.float64)
                offset = 0
                for owner, name, value in items:
                    chunk = flat[offset:offset + value.numel()]
                    offset += value.numel()
                    if isinstance(owner, _Bucket):
                        owner.host[name] = chunk
                    else:
                        g, _, rows, dtypes = owner
                        outs[g][rows] = _scalar_columns(chunk, dtypes, self.plans[g][0])
            for bucket in buckets:
                bucket.segment()
            # repairs, rare (one more host copy): exact non-finite counts where the probe says there
            # may be some, two-pass variances where the one-pass formula is not accurate
            nonfinite = [np.zeros(len(b.sizes)) for b in buckets]
            repairs: list[tuple[int, int, str, torch.Tensor]] = []
            for j, b in enumerate(buckets):
                if b.matrix is not None:  # (by the reduction process: nothing to repair)
                    continue
                for k in b.probe():
                    repairs.append((j, k, "nonfinite", (~torch.isfinite(b.tensor(k).detach())).sum()))
                for k, stat in b.finish():
                    repairs.append((j, k, stat, b.exact(k, stat)))
            if repairs:
                values = torch.stack([v.to("cpu", torch.float64) for *_, v in repairs]).numpy()
                for (j, k, stat, _), value in zip(repairs, values):
                    if stat == "nonfinite":
                        nonfinite[j][k] = value
                    else:
                        buckets[j].host[stat][k] = value
            # assemble each group from its tensors' statistics: one matrix of columns per bucket,
            # one block of it per group and bucket
            mats = [bucket.matrix if bucket.matrix is not None else
                    np.column_stack([bucket.column(base, thr, nonfinite[b]) for base, thr in cols]) if cols else None
                    for b, (bucket, cols) in enumerate(zip(buckets, self.bucket_columns))]
        for out, blocks in zip(outs, self.blocks):
            for b, idx, sel in blocks:
                out[idx] = mats[b][sel]  # type: ignore[index]
        return outs


# ---------------------------------------------------------------------------------- capture
def named_trainable(module: nn.Module) -> list[tuple[str, torch.Tensor]]:
    """``(clean name, parameter)`` for every parameter (frozen ones included)."""
    return [(clean_name(n), p) for n, p in module.named_parameters()]


def learning_rates(optimizers: Sequence[Any]) -> dict[str, float]:
    """``lr/<group>`` for every parameter group (``lr/<optimizer>.<group>`` with several
    optimizers; a group's ``name`` key replaces its index)."""
    out: dict[str, float] = {}
    for j, opt in enumerate(optimizers):
        groups = getattr(opt, "param_groups", None) or []
        for i, group in enumerate(groups):
            if "lr" not in group:
                continue
            label = str(group.get("name", i))
            key = f"lr/{label}" if len(optimizers) == 1 else f"lr/{j}.{label}"
            lr = group["lr"]
            out[key] = float(lr.item() if isinstance(lr, torch.Tensor) else lr)
    return out


def snapshot(params: Sequence[torch.Tensor], into: Sequence[torch.Tensor] | None = None) -> list[torch.Tensor]:
    """Copies of ``params`` on their device (one fused call). ``into``: buffers of a previous
    snapshot to copy into when they match (no new allocation: on CPU a fresh multi-megabyte
    buffer page-faults on every step)."""
    if not params:
        return []
    with torch.no_grad():
        src = [p.detach() for p in params]
        if into is not None and len(into) == len(src) and all(
            b.shape == s.shape and b.dtype == s.dtype and b.device == s.device for b, s in zip(into, src)
        ):
            torch._foreach_copy_(list(into), src)
            return list(into)
        return [s.clone() for s in src]


class LateValues:
    """One-element values of a step computed after the step has ended, by the thread that reduces
    it: the background thread of :meth:`TorchBackend.reduce_groups_async`, else the calling thread,
    before anything reads them. ``producer(out)`` fills the vector ``out`` (``count`` values of
    ``dtype``, on the CPU) once, whichever thread comes first. The Lightning callback's update
    ratios of a save step whose weights it copied take three passes over every weight off the
    training thread this way (:func:`update_ratios` of the step's two private copies). Offer
    :meth:`views`; call :meth:`wait` before the producer's inputs change (it produces the values
    there when no thread has started them: nothing ever waits for a thread that has no CPU)."""

    def __init__(self, count: int, dtype: torch.dtype, producer: Callable[[torch.Tensor], Any]) -> None:
        self.values = torch.empty(count, dtype=dtype)
        self._producer: Callable[[torch.Tensor], Any] | None = producer
        self._claim = threading.Lock()
        self._done = threading.Event()
        self._error: BaseException | None = None  # the producer's, raised again to every later reader

    def views(self) -> list[torch.Tensor]:
        """One one-element view of :attr:`values` per value, each marked as late (``_tripwire_late``:
        the reduction program produces them before it reads them, see :func:`_produce_late`)."""
        out = []
        for i in range(len(self.values)):
            v = self.values[i]
            v._tripwire_late = self  # type: ignore[attr-defined]
            out.append(v)
        return out

    def wait(self) -> None:
        """The values produced: by this thread when no other has started, else wait for it. A
        producer that raised raises here again, for every reader (its values were never filled)."""
        if self._claim.acquire(blocking=False):
            producer, self._producer = self._producer, None
            try:
                if producer is not None:
                    with torch.no_grad():
                        producer(self.values)
            except BaseException as exc:
                self._error = exc
                raise
            finally:
                self._done.set()
        else:
            self._done.wait()
            if self._error is not None:
                raise self._error


def _late_of(t: Any) -> LateValues | None:
    d = getattr(t, "__dict__", None)
    return d.get("_tripwire_late") if d else None


def _produce_late(tensors: Iterable[torch.Tensor]) -> None:
    """Produce the :class:`LateValues` behind any of ``tensors`` (before they are read)."""
    for t in tensors:
        late = _late_of(t)
        if late is not None:
            late.wait()


def update_ratios(before: Sequence[torch.Tensor], after: Sequence[torch.Tensor], *, inplace: bool = False) -> torch.Tensor:
    """``||after - before|| / ||before||`` per parameter, as one device vector (fused norms).
    ``inplace=True`` overwrites ``before`` with the differences (no allocation)."""
    with torch.no_grad():
        after = [a.detach() for a in after]
        if any(b.dtype in (torch.bfloat16, torch.float16) for b in before):
            # in float32 (exact for half values): the difference of two bf16 weights rounded to bf16
            # was off by up to 2e-3 relative (trial 18b, precision="bf16-true")
            # (a complex parameter beside them keeps its type: .to(float32) drops the imaginary part)
            before = [b.to(torch.float32, copy=True) if b.dtype in (torch.bfloat16, torch.float16) else b.clone()
                      for b in before]
            after = [a.float() if a.dtype in (torch.bfloat16, torch.float16) else a for a in after]
            inplace = True  # (the copies)
        den = torch.stack(torch._foreach_norm(list(before)))
        if inplace:
            torch._foreach_sub_(list(before), after)
            delta = list(before)
        else:
            delta = torch._foreach_sub(after, list(before))
        return torch.stack(torch._foreach_norm(delta)) / den


_ACT_INPUT_TYPES: tuple[type, ...] = (nn.ReLU, nn.Tanh, nn.Sigmoid)


def bind_activation_kinds(module: nn.Module, rules: Sequence[Any]) -> dict[str, dict[str, str]]:
    """Point ``saturated_activation``'s ``sigmoid_regex``/``tanh_regex``, left at their defaults,
    at the module's own ``nn.Sigmoid``/``nn.Tanh`` layers too: their inputs are named by path
    (``net.1/input``), which says nothing of the function, and a sigmoid in an ``nn.Sequential`` was
    judged with the tanh threshold (trial 17i). Returns ``{rule: {parameter: regex}}`` as bound."""
    from tripwire.rules.saturated_activation import SaturatedActivation

    layers: dict[str, list[str]] = {"sigmoid_regex": [], "tanh_regex": []}
    for raw_name, sub in module.named_modules():
        kind = "sigmoid_regex" if isinstance(sub, nn.Sigmoid) else "tanh_regex" if isinstance(sub, nn.Tanh) else None
        if kind is not None and raw_name:
            layers[kind].append(re.escape(clean_name(raw_name)))
    bound: dict[str, dict[str, str]] = {}
    params = inspect.signature(SaturatedActivation.__init__).parameters
    defaults = {k: params[k].default for k in layers}
    for rule in rules:
        if not isinstance(rule, SaturatedActivation):
            continue
        for param, names in layers.items():
            if names and getattr(rule, param) == defaults[param]:
                value = f"{defaults[param]}|^(?:{'|'.join(names)})/input$"
                setattr(rule, param, value)
                bound.setdefault(rule.name, {})[param] = value
    return bound


def loaded_metric_class() -> type | None:
    """torchmetrics' ``Metric`` class where torchmetrics is loaded, else None (it is never imported
    here). A Metric module (``self.train_acc = torchmetrics.Accuracy(...)``) is a leaf module but no
    layer: its forward returns the batch's metric value (trial 32d F6: ``train_acc/output``, the batch
    accuracy, was stored among the layer outputs and counted in every "all layers" judgement of the
    activations), so :class:`ActivationCapture` hooks neither it nor the modules inside it (a
    metric's own feature network). Where torchmetrics is not loaded no module can be a Metric."""
    tm = sys.modules.get("torchmetrics")
    metric = getattr(tm, "Metric", None) if tm is not None else None
    return metric if isinstance(metric, type) else None


class ActivationCapture:
    """Forward hooks that exist only while a save step runs.

    ``attach(module, want_outputs, want_inputs, want_relu)`` registers hooks on the module's leaf
    submodules, and on each ``nn.MultiheadAttention`` (not a leaf: its ``forward`` uses its child
    ``out_proj``'s weights without calling it, so that child is not hooked); each hook keeps
    (detached, by reference) the layer output as ``<layer>/output`` and, for ReLU/Tanh/Sigmoid
    layers, the input as ``<layer>/input``. A layer's output is its main tensor (:func:`main_output`):
    the tensor it returns; an RNN/LSTM/GRU's output sequence (the first element of its
    ``(output, h_n)`` / ``(output, (h_n, c_n))``; of a ``PackedSequence``, its ``.data``, the
    time steps of every sequence packed without padding); an RNN cell's ``h`` (``LSTMCell``'s first
    element); ``nn.MultiheadAttention``'s ``attn_output`` (not the attention weights). A layer whose
    output is none of these (a dict, a tuple of another module, None) is not captured: :meth:`take`
    names such layers in one WARNING, once per layer (trial 28d: LSTM and attention outputs were
    dropped without a word). ``detach()`` removes the
    hooks. Only the first call of each layer per attachment is kept (gradient accumulation,
    layers called twice). Modules compiled with ``torch.compile`` call the hooks only while their
    graph was compiled with them (docs/lightning.md, "torch.compile": with the default guards, a
    graph compiled on a step without hooks runs on later save steps too, and captures nothing);
    ``hooked`` (the layers hooked by the last attachment) and ``caught`` (the layers whose hook
    ran, found by :meth:`take`), with ``ran`` (which of the ``watch`` modules ran: a compiled
    module's wrapper runs its own hooks eagerly), let the caller see such a save step (trial 22c).
    """

    def __init__(self) -> None:
        self._handles: list[Any] = []
        self.outputs: dict[str, torch.Tensor] = {}
        self.relu_outputs: dict[str, torch.Tensor] = {}
        self.inputs: dict[str, torch.Tensor] = {}
        self._specs: dict[Any, list[tuple[nn.Module, Callable[..., None], str]]] = {}
        # trial 22c: the layers hooked by the last attach, those whose hook ran (found by take), and
        # the ids of the watched modules that ran while attached
        self.hooked: frozenset[str] = frozenset()
        self.caught: frozenset[str] = frozenset()
        self.ran: set[int] = set()
        self._watch_handles: list[Any] = []
        # trial 28d: the layers whose output was no tensor tripwire captures ({layer: its type}),
        # and those said already (once per layer: the public helper shares one set per model)
        self.uncaptured: dict[str, str] = {}
        self._said: set[str] = set()

    @property
    def attached(self) -> bool:
        return bool(self._handles)

    def attach(self, module: nn.Module, *, outputs: bool, inputs: bool, relu: bool,
               select: Callable[[str, str], bool] | None = None, key: Any = None,
               watch: Iterable[nn.Module] = ()) -> None:
        """``key``: identifies ``select``'s answers (e.g. the set of due collections): the layers
        to hook are then found once per key and module, not at every save step. Call
        :meth:`forget` when the module's structure or the meaning of the keys changes.
        ``watch``: modules whose forward pre-hook notes in ``ran`` that they ran (trial 22c)."""
        self.detach()
        self.outputs, self.relu_outputs, self.inputs = {}, {}, {}
        cache_key = None if key is None else (id(module), outputs, inputs, relu, key)
        specs = self._specs.get(cache_key) if cache_key is not None else None
        if specs is None:
            specs = []
            # (the children of a MultiheadAttention: its forward never calls them; a torchmetrics
            # Metric and the modules inside it: see loaded_metric_class)
            bypassed: list[str] = []
            metric = loaded_metric_class()
            for raw_name, sub in module.named_modules():
                if raw_name == "" or any(raw_name.startswith(p) for p in bypassed):
                    continue
                if metric is not None and isinstance(sub, metric):
                    bypassed.append(raw_name + ".")
                    continue
                if isinstance(sub, nn.MultiheadAttention):
                    bypassed.append(raw_name + ".")
                elif _parametrize.is_parametrized(sub):
                    # (weight_norm, spectral_norm, ...: the modules under its ``parametrizations`` compute
                    # its weight, not an output; the layer is the leaf. Trial 43e: fc1's output was missing,
                    # and its recomputed weight stored as the activation "fc1.parametrizations.weight.0/output")
                    bypassed.append(raw_name + ".parametrizations.")
                    if any(n != "parametrizations" for n, _ in sub.named_children()):
                        continue
                elif any(True for _ in sub.children()):
                    continue
                name = clean_name(raw_name)
                is_act = isinstance(sub, _ACT_INPUT_TYPES)
                want_out = outputs and (select is None or select(f"{name}/output", "activations"))
                want_relu = relu and isinstance(sub, nn.ReLU) and (select is None or select(f"{name}/output", "relu_outputs"))
                want_in = inputs and is_act and (select is None or select(f"{name}/input", "activation_inputs"))
                if want_out or want_relu or want_in:
                    specs.append((sub, self._hook(name, want_out, want_relu, want_in), name))
            if cache_key is not None:
                self._specs[cache_key] = specs
        self._handles = [sub.register_forward_hook(hook) for sub, hook, _ in specs]
        self.hooked, self.caught, self.ran = frozenset(name for _, _, name in specs), frozenset(), set()
        self.uncaptured = {}
        if self._handles:
            self._watch_handles = [m.register_forward_pre_hook(self._noting(id(m))) for m in watch]

    def _noting(self, key: int) -> Callable[..., None]:
        def note(_module: nn.Module, _args: Any) -> None:
            self.ran.add(key)

        return note

    def forget(self) -> None:
        """Drop the layers remembered by :meth:`attach` (a new session or a changed module)."""
        self._specs.clear()

    def _hook(self, name: str, want_out: bool, want_relu: bool, want_in: bool) -> Callable[..., None]:
        key_out, key_in = f"{name}/output", f"{name}/input"

        def hook(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
            if want_out and key_out not in self.outputs:
                main = main_output(module, output)
                if main is not None:
                    self.outputs[key_out] = main.detach()
                elif name not in self.uncaptured:
                    self.uncaptured[name] = _output_type(output)
            if want_relu and key_out not in self.relu_outputs and isinstance(output, torch.Tensor):
                self.relu_outputs[key_out] = output.detach()
            if want_in and args and isinstance(args[0], torch.Tensor) and key_in not in self.inputs:
                self.inputs[key_in] = args[0].detach()

        return hook

    def detach(self) -> None:
        for h in (*self._handles, *self._watch_handles):
            h.remove()
        self._handles, self._watch_handles = [], []

    def take(self) -> Iterator[tuple[str, torch.Tensor, tuple[str, ...]]]:
        """What was captured: ``(name, tensor, kinds)``; a ReLU output is one tensor offered under
        ``activations`` and ``relu_outputs``. Clears the buffers; ``caught`` counts the layers."""
        self.caught = frozenset(n.rsplit("/", 1)[0] for n in (*self.outputs, *self.relu_outputs, *self.inputs))
        self._say_uncaptured()
        for name, t in self.outputs.items():
            kinds = ("activations", "relu_outputs") if name in self.relu_outputs else ("activations",)
            yield name, t, kinds
        for name, t in self.relu_outputs.items():
            if name not in self.outputs:
                yield name, t, ("relu_outputs",)
        for name, t in self.inputs.items():
            yield name, t, ("activation_inputs",)
        self.outputs, self.relu_outputs, self.inputs = {}, {}, {}

    def _say_uncaptured(self) -> None:
        """One WARNING naming the layers, not named before, whose output was not captured (trial 28d)."""
        new = {n: t for n, t in self.uncaptured.items() if n not in self._said}
        self.uncaptured = {}
        if not new:
            return
        self._said.update(new)
        shown = ", ".join(f"{n} ({t})" for n, t in list(new.items())[:5]) + (
            f" and {len(new) - 5} more" if len(new) > 5 else "")
        logger.warning(
            "tripwire: the output of %d layer(s) is not captured under activations: %s: it is no tensor that "
            "tripwire captures as <layer>/output (a tensor; an RNN/LSTM/GRU's output sequence, a PackedSequence's "
            ".data; an RNN cell's h; nn.MultiheadAttention's attn_output); the other layers' outputs are captured",
            len(new), shown)


def main_output(module: nn.Module, output: Any) -> torch.Tensor | None:
    """The tensor captured as ``module``'s ``<layer>/output``, or None where there is none: ``output``
    itself where it is a tensor; a ``PackedSequence``'s ``.data`` (the time steps of every sequence,
    packed without padding: ``(sum of lengths, features)``); for an ``nn.RNN``/``LSTM``/``GRU``
    (``nn.RNNBase``), an RNN cell (``nn.RNNCellBase``: ``LSTMCell`` returns ``(h, c)``) and an
    ``nn.MultiheadAttention`` (``(attn_output, attn_weights)``), the first element of the tuple it
    returns (its ``.data`` where it is a ``PackedSequence``). The tuples of other modules are not
    guessed at: None."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, nn.utils.rnn.PackedSequence):
        return output.data
    if isinstance(module, (nn.RNNBase, nn.RNNCellBase, nn.MultiheadAttention)) and isinstance(output, (tuple, list)) and output:
        first = output[0]
        if isinstance(first, nn.utils.rnn.PackedSequence):
            first = first.data
        if isinstance(first, torch.Tensor):
            return first
    return None


def _output_type(output: Any) -> str:
    """What a layer returned, for the WARNING: ``a tuple (Tensor, dict)``, ``a dict``, ``None``."""
    if output is None:
        return "None"
    kind = type(output).__name__
    if isinstance(output, (tuple, list)):
        return f"a {kind} ({', '.join(type(v).__name__ for v in output[:3])}{', ...' if len(output) > 3 else ''})"
    return f"a {kind}"


#: The kinds :class:`ActivationCapture` captures, in ``attach``'s order (outputs, inputs, relu).
_ACTIVATION_KINDS = ("activations", "activation_inputs", "relu_outputs")
#: Per model, the layers :func:`capture_activations` said it could not capture (said once per layer).
_SAID_PER_MODEL: weakref.WeakKeyDictionary[nn.Module, set[str]] = weakref.WeakKeyDictionary()
#: Per model, the plan of the last :func:`capture_activations` block that ended without an exception
#: (trial 31h F6: a second block at the same step is refused by name, at any step).
_LAST_PLAN: weakref.WeakKeyDictionary[nn.Module, weakref.ref[Any]] = weakref.WeakKeyDictionary()
#: Per session, the models whose ``nn.Sigmoid``/``nn.Tanh`` layers :func:`capture_activations`
#: pointed ``saturated_activation`` at, and what it bound (trial 31h F2; :func:`bind_activation_kinds`).
_BOUND: weakref.WeakKeyDictionary[Any, tuple[weakref.WeakSet[nn.Module], dict[str, dict[str, str]]]] = (
    weakref.WeakKeyDictionary())
#: Per session, of compiled models: the most layers a save step's hooks caught, per (model, mode,
#: hooked layers), and whether the WARNING on lost activations was said (trial 31h F1).
_CAUGHT: weakref.WeakKeyDictionary[Any, dict[Any, int]] = weakref.WeakKeyDictionary()
#: Where docs/lightning.md says how ``torch.compile`` and forward hooks meet.
_COMPILE_DOC = 'docs/lightning.md, "torch.compile"'


def checked_model_and_plan(who: str, model: Any, plan: Any, purpose: str) -> nn.Module:
    """The checks of a hand-written loop's capture helper (:func:`capture_activations`,
    ``tripwire.integrations.torch.capture_update_ratios``): a ``ConfigError`` naming ``who`` for a
    ``model`` that is no ``torch.nn.Module`` (``purpose``: what the model is for) or a ``plan`` that is
    no StepPlan (or None); returns the module a ``DistributedDataParallel`` or ``DataParallel``
    wraps (its names are the ones the DDP recipe's gradients carry), else ``model``."""
    from tripwire._errors import ConfigError
    from tripwire._session import StepPlan

    if not isinstance(model, nn.Module):
        raise ConfigError(f"{who}: model={model!r:.80} ({type(model).__name__}); accepted: a torch.nn.Module "
                          f"({purpose})")
    if plan is not None and not isinstance(plan, StepPlan):
        raise ConfigError(f"{who}: plan={plan!r:.80} ({type(plan).__name__}); accepted: the StepPlan of this "
                          f"step, plan = session.begin_step(mode, step), or None")
    while isinstance(model, (nn.parallel.DistributedDataParallel, nn.DataParallel)):
        model = model.module
    return model


@contextlib.contextmanager
def hook_guards() -> Iterator[None]:
    """While the ``with`` block runs, ``torch._dynamo.config.skip_nnmodule_hook_guards`` is False
    where TorchDynamo is in use (imported: ``torch.compile`` imports it) and it was True (torch's
    default), then back to True; otherwise nothing is changed (a False set by the user stays). A
    graph TorchDynamo compiles in the block then guards on its modules' (empty) forward-hook dicts,
    so the graphs with and without hooks are told apart (trial 31h F1; docs/lightning.md,
    "torch.compile"). The option is read when a graph is compiled, not when it runs."""
    config = sys.modules.get("torch._dynamo.config")
    if config is None or config.skip_nnmodule_hook_guards is not True:
        yield
        return
    config.skip_nnmodule_hook_guards = False
    try:
        yield
    finally:
        config.skip_nnmodule_hook_guards = True


def compiled_regions(module: nn.Module) -> list[tuple[nn.Module | None, frozenset[str]]]:
    """The parts of ``module`` compiled with TorchDynamo: each ``torch.compile`` wrapper
    (``OptimizedModule``) among its modules, or None for one compiled in place (``module.compile()``:
    its own hooks run inside the compiled code, so nothing tells whether it ran), with the (clean)
    names of its leaf layers; empty where nothing is compiled (or TorchDynamo was never imported)."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")  # (never imported: nothing was compiled)
    if eval_frame is None:
        return []
    optimized = getattr(eval_frame, "OptimizedModule", ())
    leaves = [(clean_name(n), id(sub)) for n, sub in module.named_modules()
              if n and not any(True for _ in sub.children())]
    regions: list[tuple[nn.Module | None, frozenset[str]]] = []
    for m in module.modules():
        wrapper = isinstance(m, optimized) if optimized else False
        if wrapper or getattr(m, "_compiled_call_impl", None) is not None:
            inner = {id(sub) for sub in m.modules()}
            regions.append((m if wrapper else None, frozenset(n for n, key in leaves if key in inner)))
    return regions


def _bind_kinds_once(model: nn.Module, session: Any) -> None:
    """:func:`bind_activation_kinds` for ``model``, once per session and model, as the Lightning
    callback does when its session starts (trial 31h F2): what it binds is noted in the run's meta
    (``Session.bind_inputs``), merged with what other models of the session bound."""
    entry = _BOUND.get(session)
    if entry is None:
        entry = _BOUND[session] = (weakref.WeakSet(), {})
    models, bound = entry
    if model in models:
        return
    models.add(model)
    new = bind_activation_kinds(model, session.rules)
    if new:
        for rule, params in new.items():
            bound.setdefault(rule, {}).update(params)
        session.bind_inputs(bound)


def _check_caught(model: nn.Module, plan: Any, capture: ActivationCapture,
                  regions: list[tuple[nn.Module | None, frozenset[str]]]) -> None:
    """A save step of a compiled model whose hooks caught nothing, or fewer layers than an earlier
    save step of its mode with the same layers hooked, ran a graph compiled without them (trial 31h
    F1: one compiled before or outside the ``capture_activations`` blocks keeps the guards it was
    compiled with): the first such step of a session says so in one WARNING, and each tells the
    session why those collections hold nothing (``Session.empty_because``)."""
    inside = frozenset().union(*(names for m, names in regions if m is None or id(m) in capture.ran))
    hooked = capture.hooked & inside
    if not hooked:
        return
    layers = capture.caught & inside
    state = _CAUGHT.setdefault(plan.session, {})
    key = (id(model), plan.mode, hooked)
    caught, best = len(layers), state.get(key, 0)
    if caught and caught >= best:
        state[key] = caught
        return
    session = plan.session
    names = tuple(c.name for c in plan.due if any(c.accepts_kind(k) for k in _ACTIVATION_KINDS))
    session.empty_because(names, "the compiled model ran a graph compiled without capture_activations' forward hooks "
                                 f"at its save steps ({_COMPILE_DOC})")
    if state.get("said"):
        return
    state["said"] = 1
    rules = sorted({r.name for r in session.rules for req in r.requirements() if req.collection in names})
    logger.warning(
        "tripwire: capture_activations: %s step %d saves %s, but the forward hooks on %d layer(s) of the compiled "
        "model caught %s: TorchDynamo ran a graph compiled without them, with "
        "torch._dynamo.config.skip_nnmodule_hook_guards = True (torch's default), which skips the guards on empty "
        "forward-hook dicts: a graph compiled before or outside the capture_activations blocks (a warm-up call, "
        "a forward pass run without the block at the steps that save nothing). So these activations are not "
        "captured at this save step, nor likely at later ones, and the rules reading them (%s) do not judge them. "
        "Run every forward pass of the model inside capture_activations, at every step (it sets the option to False "
        "while the block runs, and costs nothing where nothing is due), and set "
        "torch._dynamo.config.skip_nnmodule_hook_guards = False before the model first runs (or call "
        "torch._dynamo.reset() before training) (%s)",
        plan.mode, plan.step, ", ".join(names) or "activations", len(hooked), f"only {caught}" if caught else "nothing",
        ", ".join(rules) or "none configured", _COMPILE_DOC)


def _check_repeated(model: nn.Module, plan: Any) -> None:
    """A ``ConfigError`` for a second :func:`capture_activations` block of ``model`` at the step of
    ``plan`` (trial 31h F6), said at any step, not only where activations are due."""
    last = _LAST_PLAN.get(model)
    if last is None or last() is not plan:
        return
    from tripwire._errors import ConfigError

    raise ConfigError(
        f"capture_activations: a second block for this model ({type(model).__name__}) at {plan.mode} step {plan.step} "
        f"(the plan of session.begin_step({plan.mode!r}, {plan.step}) had one already): the layer outputs of a step "
        f"are those of one forward pass, and a second block would offer other values under the same names; "
        f"accepted: one capture_activations block per step and model, around one forward pass (with gradient "
        f"accumulation, the first micro-batch's: with capture_activations(model, plan if i == 0 else None): ..., "
        f"i the micro-batch's index)")


@contextlib.contextmanager
def capture_activations(model: nn.Module, plan: Any) -> Iterator[None]:
    """Capture the layer outputs of ``model``'s forward pass in the ``with`` block for ``plan`` (a
    :class:`tripwire.StepPlan` from ``session.begin_step``), as the Lightning callback does::

        plan = session.begin_step("train", step)
        with capture_activations(model, plan):
            out = model(x)                      # the forward pass whose layers are captured
        loss = loss_fn(out, y)
        plan.add("loss", loss.detach(), "losses")
        ...
        decision = session.end_step()

    Where ``plan`` wants ``activations``, ``activation_inputs`` or ``relu_outputs`` (a save step of a
    collection of those kinds), forward hooks are registered on ``model``'s leaf submodules (and on each
    ``nn.MultiheadAttention``) as the block starts and removed as it ends; as it ends without an
    exception, what they caught is offered to ``plan`` (``plan.add``; read when the step ends):
    ``<layer>/output`` under ``activations`` (the main tensor of the layer's output: a tensor as is, an
    RNN/LSTM/GRU's output sequence, a ``PackedSequence``'s ``.data``, ``nn.MultiheadAttention``'s
    ``attn_output``; see :func:`main_output`; a complex output as its magnitude ``|z|``), ``<layer>/input`` (the input of ``nn.ReLU``/``Tanh``/
    ``Sigmoid`` layers) under ``activation_inputs``, and the output of ``nn.ReLU`` layers under
    ``relu_outputs``, each where a due collection takes that name; ``<layer>`` is the submodule's name in
    ``model.named_modules()`` (``torch.compile``'s ``_orig_mod.`` dropped; of a ``DistributedDataParallel``
    or ``DataParallel``, the module it wraps; the model itself is not a layer). A layer whose output is
    none of those is not captured, and one WARNING per layer says so.
    Where ``plan`` is falsy or None (nothing is due) or wants none of those kinds, no hook is registered:
    the block costs next to nothing.

    The first block of a session for a model points ``saturated_activation``'s ``sigmoid_regex`` and
    ``tanh_regex``, where left at their defaults, at the model's own ``nn.Sigmoid`` and ``nn.Tanh``
    layers too, as the Lightning callback does (:func:`bind_activation_kinds`): a sigmoid in an
    ``nn.Sequential`` (``1/input``) gets the sigmoid threshold, not the tanh one (trial 31h F2).

    Run one block per step and model, around one forward pass (a layer called several times in the
    block keeps its first call; with gradient accumulation, the first micro-batch's:
    ``capture_activations(model, plan if i == 0 else None)``): a second block of the model with the same
    ``plan`` is a ``ConfigError`` naming ``capture_activations``, the step and the fix, as it starts, at
    any step (one that saves nothing too, so that the loop fails at its first step, not at a later save
    step).

    ``torch.compile`` (trial 31h F1): TorchDynamo, by default
    (``torch._dynamo.config.skip_nnmodule_hook_guards = True``), does not guard a graph compiled without
    hooks on the hooks, so that graph, compiled at the first step that saves nothing, ran at every later
    save step too and the hooks caught nothing (``dead_relu`` never judged a compiled model). So while
    the block runs, at every step, that option is False where TorchDynamo is in use and it was True
    (then back to True; a False you set stays): the graphs with and without the hooks are told apart,
    compiled once each (one more per distinct set of hooked layers), and the save steps run the one
    with hooks, as the Lightning callback has it (docs/lightning.md, "torch.compile"). Run every
    forward pass of the model in the block, the steps that save nothing too (as above): a graph
    compiled outside it, or before the first block (a warm-up call), keeps the default's guards. Where
    a save step's hooks on layers of a compiled part of ``model`` caught nothing, or fewer layers than
    an earlier save step of its mode, one WARNING (once per session) says so, names the collections
    and the rules reading them, and the fix: set the option to False before the model first runs, or
    call ``torch._dynamo.reset()`` before training.

    A ``ConfigError`` for a ``model`` that is no ``torch.nn.Module`` or a ``plan`` that is no StepPlan
    (or None)."""
    model = checked_model_and_plan("capture_activations", model, plan, "the model whose layers' outputs are captured")
    if plan is not None:
        _check_repeated(model, plan)
        _bind_kinds_once(model, plan.session)
    wants = [plan.wants(k) for k in _ACTIVATION_KINDS] if plan else [False] * len(_ACTIVATION_KINDS)
    with hook_guards():
        if not any(wants):
            yield
            if plan is not None:
                _LAST_PLAN[model] = weakref.ref(plan)
            return
        regions = compiled_regions(model)
        capture = ActivationCapture()
        capture._said = _SAID_PER_MODEL.setdefault(model, set())
        capture.attach(model, outputs=wants[0], inputs=wants[1], relu=wants[2],
                       select=lambda name, kind: bool(plan.select(name, kind)),
                       watch=[m for m, _ in regions if m is not None])
        try:
            yield
        finally:
            capture.detach()
    _LAST_PLAN[model] = weakref.ref(plan)
    for name, tensor, kinds in capture.take():
        if tensor.is_complex():  # (its magnitude |z|, as the Lightning callback offers it: session 30)
            tensor = tensor.abs()
        for kind in kinds:
            plan.add(name, tensor, kind)
    if regions:
        _check_caught(model, plan, capture, regions)


def offer(plan: Any, name: str, tensor: Any, kinds: Iterable[str]) -> bool:
    """Offer one tensor under several kinds at once (one pending entry, the union of the
    collections), so a ReLU output is reduced once for ``activations`` and ``relu_outputs``."""
    kinds = tuple(kinds)
    if len(kinds) == 1:
        return bool(plan.add(name, tensor, kinds[0]))
    if tensor.is_complex():  # (its magnitude |z|, as StepPlan.add takes one: this path goes around it)
        tensor = tensor.abs()
    cols: list[Any] = []
    for kind in kinds:
        for c in plan.select(name, kind):
            if all(c is not d for d in cols):
                cols.append(c)
    if cols:
        plan._pending.append((name, tensor, tuple(cols)))
    return bool(cols)


def scaler_found_inf(scaler: Any, optimizer: Any) -> bool | None:
    """Whether ``scaler`` (a ``torch.amp.GradScaler``) found an infinite or NaN value in the
    gradients of ``optimizer`` when it unscaled them at this step: then ``scaler.step(optimizer)``
    skips the optimizer step (and ``scaler.update()`` lowers the scale). False for a disabled scaler
    (or None); None where it has not unscaled that optimizer's gradients since its last ``update()``
    (``scaler.unscale_(optimizer)`` not called yet: nothing is known). Reads the scaler's state,
    which GradScaler keeps private (``_per_optimizer_states``); a host sync (one ``.item()``), so
    call it only at steps that save gradients."""
    if scaler is None or not scaler.is_enabled():
        return False
    states = getattr(scaler, "_per_optimizer_states", None)
    state = states.get(id(optimizer)) if isinstance(states, dict) else None  # (.get: the defaultdict adds nothing)
    found = state.get("found_inf_per_device") if isinstance(state, dict) else None
    if not found:
        return None
    values = [v.reshape(()).to(dtype=torch.float32, device="cpu") for v in found.values()]
    return bool(torch.stack(values).sum().item() > 0)


def scaler_skips(scaler: Any, optimizer: Any) -> bool:
    """Whether fp16 mixed precision's ``torch.amp.GradScaler`` skips this step of ``optimizer``:
    its gradients overflowed at the loss scale (inf or NaN once unscaled), so ``scaler.step``
    leaves the weights as they are and ``scaler.update`` lowers the scale. Healthy runs do this, on
    their first steps at the initial scale and now and then later: the gradients of such a step are
    never applied, and offered to a session they read as a NaN or an infinity (``exploding_tensor``,
    critical, stopped a healthy run at step 0: trial 26k). In a hand-written loop::

        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)        # the true gradients, not scaled by the loss scale
        plan = session.begin_step("train", step)
        plan.add("loss", loss.detach(), "losses")
        if plan.wants("gradients") and not scaler_skips(scaler, optimizer):
            for name, p in model.named_parameters():
                plan.add(f"gradients/{name}", p.grad, "gradients")
        decision = session.end_step()
        scaler.step(optimizer)
        scaler.update()

    Call it after ``scaler.unscale_(optimizer)`` and before ``scaler.update()``; it syncs with the
    device once (call it only where ``plan.wants("gradients")``). False for a disabled scaler
    (``enabled=False``: bf16, fp32) or ``scaler=None``. A ``ConfigError`` for anything that is no
    GradScaler, and where the scaler has not unscaled ``optimizer``'s gradients at this step (its
    answer is not known yet: call ``scaler.unscale_(optimizer)`` first)."""
    from tripwire._errors import ConfigError

    if scaler is not None and not (callable(getattr(scaler, "is_enabled", None))
                                   and callable(getattr(scaler, "unscale_", None))):
        raise ConfigError(f"scaler_skips: scaler={scaler!r:.80} ({type(scaler).__name__}); accepted: a "
                          f"torch.amp.GradScaler (or None: no loss scaling)")
    found = scaler_found_inf(scaler, optimizer)
    if found is None:
        raise ConfigError(
            f"scaler_skips: the scaler has not unscaled the gradients of this optimizer ({type(optimizer).__name__}) "
            f"at this step, so whether it skips the step is not known yet; accepted: call "
            f"scaler.unscale_(optimizer) after backward() and before scaler_skips (and before scaler.step and "
            f"scaler.update), with the optimizer the scaler steps")
    return found

"""The reduction process: the statistics of a save step's packed tensors, computed with numpy in a
process of its own (see :class:`tripwire.integrations._torch.ReduceProcess`).

Why a process: on the CPU, a background *thread* that reduces a step beside training takes and
gives back the GIL around each of its torch calls, and every hand-over wakes a thread on the other
core; measured on a 2-core machine, a fit ran 17-37% slower beside such a thread even where the
thread held the GIL for microseconds at a time, and no slower beside a process doing the same work
(docs/benchmarks.md, sessions 23 and 39). The training process copies each step's tensors into
shared memory (as it copied them into a private buffer for the thread); this process computes the
statistics there, per chunk then per tensor, and, where no tensor needs a repair, each bucket's
matrix of figures, into shared memory too; the training process places the figures (and makes the
rare repairs: exact recounts, with torch, from the same buffer).

This module imports the standard library and numpy only: the child runs its source (:data:`BOOT`:
no tripwire, no torch import there), and the training process imports it for :class:`HostStats`,
the host arithmetic both sides share.

Protocol over a ``SOCK_SEQPACKET`` socket pair, one pickled tuple per message:

* to the worker ``("map", key, nbytes)`` with one file descriptor (a ``memfd``): shared memory that
  later requests name by ``key``; ``("unmap", key)``: no longer used;
* ``("plan", key, sizes, stats, needs, low_precision, thresholds, columns, names)``: a bucket's
  :class:`HostStats`, the columns of its matrix (``(reduction, threshold)``) and the host name of each
  op's result, which later requests name by ``key``;
* ``("reduce", seq, buf_key, dtype, chunks, plan_key, res_key, ops)``: the statistics ``ops`` of the
  ``(chunks, 256)`` buffer at the start of ``buf_key`` per tensor (:func:`reduce_tensors`), float64
  into ``res_key``, then, where no tensor needs a non-finite count or an exact recount
  (:meth:`HostStats.probe`, :meth:`HostStats.finish`), the plan's matrix after them (a row per
  tensor); answered ``("done", seq, matrix_written)`` or ``("error", seq, traceback)``;
* from the worker, first, ``("ready", pid)`` (or ``("error", 0, traceback)`` where numpy does not
  import).

The worker ends when the other end closes (the training process ended or closed its backend).
"""

from __future__ import annotations

from typing import Any

WIDTH = 256  # (integrations._torch._WIDTH)
BLOCK = 256  # chunks reduced together (256 KB of float32: in a core's cache while each statistic reads it)


#: ``sum(x^2) / (n var)`` above this (an error above ~5e-7): the variance is recomputed in two passes.
VAR_CONDITION = 25.0
#: A float32 sum of squares below this held squares under float32's normal range (1.2e-38): recomputed.
TINY_SQ = 1e-30
#: The count that each threshold reduction reads.
THRESHOLD_STAT = {"fraction_gt": "gt", "fraction_lt": "lt", "fraction_abs_gt": "abs_gt"}


def row_key(spec: Any) -> str:
    """The name of a statistic's per-tensor values: ``sum``, ``nonzero``; ``gt:0.5`` for a count."""
    return spec if isinstance(spec, str) else f"{spec[0]}:{spec[1]!r}"


class HostStats:
    """The host side of one bucket's statistics, numpy only (the training process's ``_Bucket``
    and the reduction process share it): ``host`` maps a statistic (``sum``, ``sq`` (the sum of
    squares), ``abs``, ``min``, ..., a count's :func:`row_key`) to its float64 value per tensor.
    ``sizes``: the tensors' element counts; ``stats``: the statistics computed, ``needs``: for each
    the tensors (positions) that need it; ``low_precision``: float32 work for float64 results;
    ``thresholds``: each threshold as the tensors' dtype compares it. The methods silence numpy's
    floating-point warnings (NaN and Inf are results here)."""

    def __init__(self, sizes: tuple[int, ...], stats: Any, needs: dict[Any, list[int]], low_precision: bool,
                 thresholds: dict[float, float]) -> None:
        import numpy as np

        self.sizes = sizes
        self.stats = set(stats)
        self.needs = {k: list(v) for k, v in needs.items()}
        self.low_precision = low_precision
        self.pads = layout(tuple(sizes))[0]  # (zero padding: the threshold columns count it)
        self.thresholds = dict(thresholds)
        self._n = np.asarray(sizes, dtype=np.float64)
        self._masks: dict[Any, Any] = {}
        self._probe_split: tuple[Any, Any] | None = None

    def finish(self, h: dict[str, Any]) -> list[tuple[int, str]]:
        """Variances from the sums (one pass: ``sum(x^2) - sum(x)^2 / n``), into ``h``; the tensors
        for which that is not accurate (large mean against the spread, or a non-positive result),
        and the sums that float32 could not hold, are returned for an exact two-pass computation
        ``(tensor, statistic)``."""
        import numpy as np

        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            return self._finish(h, np)

    def _finish(self, h: dict[str, Any], np: Any) -> list[tuple[int, str]]:
        n, stats = self._n, self.stats
        redo: list[tuple[int, str]] = []
        finite_sum = np.isfinite(h["sum"]) if "sum" in stats else None
        if self.low_precision and "sum" in stats:
            # float32 sums of 256 elements, in float64 across chunks: the rounding error is
            # about 1.5 * eps32 * sqrt(sum(x^2)) (at most ~6x that for zero-mean tensors,
            # measured), below _SUM_ERROR * sqrt(sum(x^2)): within float32's own resolution of
            # the data, so a sum that cancels (a zero-mean tensor) is not recomputed; a sum that
            # overflowed float32 (or holds NaN/Inf) is, in float64
            bad = ~finite_sum & self._mask("sum")  # type: ignore[operator]
            if bad.any():
                redo += [(int(k), "sum") for k in np.flatnonzero(bad)]
        if "abs" in stats and self.low_precision:
            # (trial 23u: a sum of |x| that overflowed float32, values near its largest, was stored inf)
            bad = ~np.isfinite(h["abs"]) & self._mask("abs")
            if bad.any():
                redo += [(int(k), "abs") for k in np.flatnonzero(bad)]
        if "sq" in stats:
            # float32 squares overflow past |x| ~ 1.8e19 and underflow below ~1e-19: such
            # tensors get their sum of squares in float64 (a zero sum of squares with a zero
            # sum is an all-zero tensor)
            sq = h["sq"]
            finite_sq = np.isfinite(sq)
            # (trial 23u: squares of float32 values about 1e-22 are denormals, imprecise, not zero: a sum
            # of squares below float32's normal range is recomputed too; trial 37b: also where no sum is
            # asked for, as with the default rules' l2 and abs_mean alone)
            tiny = (sq < TINY_SQ) if self.low_precision else np.zeros(len(sq), dtype=bool)
            suspect = ~finite_sq | (sq == 0) | tiny
            if "sum" in stats:  # (all zeros: a zero sum of squares with a zero sum; trial 23u: not an overflow)
                suspect &= ~((sq == 0) & (h["sum"] == 0) & self._mask("sum"))
            suspect &= self._mask("sq")
            if suspect.any():
                redo += [(int(k), "sq") for k in np.flatnonzero(suspect)]
            for stat, total in (("var", "sum"), ("abs_var", "abs")):
                if stat not in stats:
                    continue
                s = h[total]
                m2 = sq - s**2 / n
                ok = (finite_sq & (finite_sum if total == "sum" else np.isfinite(s)) & (m2 > 0) & (sq <= VAR_CONDITION * m2)
                      & ~suspect)
                zero = (sq == 0) & (s == 0)  # all zeros (else squares that underflowed: two passes)
                h[stat] = np.where(ok, m2, np.where(zero, 0.0, np.nan))
                bad = ~(ok | zero) & self._mask(stat)
                if bad.any():
                    redo += [(int(k), stat) for k in np.flatnonzero(bad)]
        return redo

    def _mask(self, stat: Any) -> Any:
        """Which tensors need ``stat`` (boolean, made once)."""
        m = self._masks.get(stat)
        if m is None:
            import numpy as np

            m = self._masks[stat] = np.zeros(len(self.sizes), dtype=bool)
            m[self.needs.get(stat, [])] = True
        return m

    def column(self, h: dict[str, Any], base: str, thr: float | None, nonfinite: Any) -> Any:
        """One reduction for every tensor (float64) from the host statistics (after :meth:`finish`)."""
        import numpy as np

        n = self._n
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            if base == "numel":
                col = n
            elif base == "nonfinite_count":
                col = nonfinite
            elif base == "sum":
                col = h["sum"]
            elif base == "mean":
                col = h["sum"] / n
            elif base in ("variance", "std", "abs_variance", "abs_std"):
                col = h["abs_var" if base.startswith("abs_") else "var"] / n
                col = np.sqrt(col) if base.endswith("std") else col
            elif base in ("min", "max", "abs_min"):
                col = h[base]
            elif base == "l2":
                col = np.sqrt(h["sq"])
            elif base == "abs_max":
                col = np.maximum(h["max"], -h["min"]) + 0.0  # NaN propagates; + 0.0: no -0.0 (an all-zero tensor)
            elif base in ("l1", "abs_sum"):
                col = h["abs"]
            elif base == "abs_mean":
                col = h["abs"] / n
            elif base == "zero_fraction":
                col = (n - h["nonzero"]) / n
            elif base == "positive_fraction":
                col = h["positive"] / n
            else:  # a threshold: the zero padding compared too
                t = self.thresholds[thr]  # type: ignore[index]
                padded = (t < 0) if base in ("fraction_gt", "fraction_abs_gt") else (t > 0)
                col = (h[row_key((THRESHOLD_STAT[base], thr))] - self.pads * padded) / n
        return col

    def matrix(self, h: dict[str, Any], columns: list[tuple[str, float | None]]) -> Any:
        """Every column of ``columns`` (``(reduction, threshold)``), a row per tensor, where no
        tensor needs a non-finite count (:meth:`probe` found none)."""
        import numpy as np

        zeros = np.zeros(len(self.sizes))
        return np.column_stack([self.column(h, base, thr, zeros) for base, thr in columns])

    def probe(self, h: dict[str, Any]) -> list[int]:
        """The tensors that need a non-finite count and may hold NaN/Inf (a non-finite sum, or sum
        of squares): exact for float32 sources, conservative otherwise (an overflowing sum only
        costs an exact count). Ascending."""
        import numpy as np

        by_sum, by_sq = self._probes()
        if by_sum.size == 0 and by_sq.size == 0:
            return []
        if by_sq.size == 0:
            return by_sum[~np.isfinite(h["sum"][by_sum])].tolist()
        found = np.concatenate((by_sum[~np.isfinite(h["sum"][by_sum])] if by_sum.size else by_sum,
                                by_sq[~np.isfinite(h["sq"][by_sq])]))
        found.sort()
        return found.tolist()

    def _probes(self) -> tuple[Any, Any]:
        """The tensors needing a non-finite count, split by the statistic that tells (their sum
        when they have one, else their sum of squares); worked out once."""
        if self._probe_split is None:
            import numpy as np

            with_sum = set(self.needs.get("sum", ()))
            probe = self.needs.get("probe", [])
            self._probe_split = (np.asarray([k for k in probe if k in with_sum], dtype=np.int64),
                                 np.asarray([k for k in probe if k not in with_sum], dtype=np.int64))
        return self._probe_split


def layout(sizes: tuple[int, ...]) -> tuple[Any, Any, Any, Any]:
    """Where the tensors of a bucket lie in its ``(chunks, WIDTH)`` buffer, their ``sizes`` elements
    each (a tensor fills whole chunks; the rest of its last chunk is padding): ``(pads, chunk_of,
    pad_pos, pad_first)``, each tensor's padding, the chunks each tensor owns (tensor ``k``:
    ``[chunk_of[k], chunk_of[k + 1])``), each padding slot's flat index and the flat index of its
    tensor's first element (ascending). The training process's ``_Layout`` is built from it."""
    import numpy as np

    n = np.asarray(sizes, dtype=np.int64)
    chunks = -(-n // WIDTH)
    pads = chunks * WIDTH - n
    chunk_of = np.concatenate(([0], np.cumsum(chunks)))
    starts = chunk_of[:-1] * WIDTH
    owner = np.repeat(np.arange(len(sizes)), pads)
    within = np.arange(owner.size) - np.repeat(np.cumsum(pads) - pads, pads)
    return pads, chunk_of, starts[owner] + n[owner] + within, starts[owner]


def per_tensor(values: Any, name: str, chunk_of: Any, lo: int, k0: int, k1: int, out: Any) -> None:
    """A statistic's values per tensor into ``out[k0:k1]`` (float64), from its per-chunk ``values``
    over chunks ``[lo, ...)`` of the tensors ``[k0, k1)``: the least for ``min`` and ``abs_min``, the
    greatest for ``max``, else the sum (squared first for ``sq``, a chunk's norm); a tensor's chunks
    are contiguous: one ``reduceat``."""
    import numpy as np

    values = np.asarray(values, dtype=np.float64)
    if name == "sq":
        values = values * values
    how = np.minimum if name in ("min", "abs_min") else np.maximum if name == "max" else np.add
    out[k0:k1] = how.reduceat(values, chunk_of[k0:k1] - lo)


def reduce_chunks(x: Any, sizes: tuple[int, ...], ops: list[tuple[str, int, int, float, int]], out: Any,
                  lay: tuple[Any, Any, Any, Any] | None = None, scratch: dict[str, Any] | None = None) -> None:
    """Each op's per-chunk statistic of ``x`` (a ``(chunks, WIDTH)`` float array, written: its padding
    slots are set as ``min``/``max`` need them) into ``out[offset:offset + hi - lo]`` (an array of
    ``x``'s dtype). An op is ``(name, lo, hi, threshold, offset)`` over chunks ``[lo, hi)``:

    * ``sum``: the chunk's sum; ``sq``: its 2-norm (``sqrt(sum(x^2))``); ``abs``: the sum of ``|x|``
      (and ``|x|`` kept for the ops after it);
    * ``nonzero``, ``positive``, ``gt``, ``lt``, ``abs_gt``: how many elements are non-zero,
      ``> 0``, ``> threshold``, ``< threshold``, ``|x| > threshold`` (NaN compares false, and counts
      as non-zero); the zero padding counts as a zero element;
    * ``min``, ``max``: the chunk's extremes, padding set to its tensor's first element first (no
      effect); ``abs_min``: the least ``|x|``, padding set to +inf. NaN propagates.

    As ``_Bucket.compute`` computes them with torch, in the same dtype (float32 sums of 256
    elements by ``einsum``, whose vector lanes each add a few dozen terms: within about 1e-7 of the
    float64 sum relative to ``sqrt(sum(x^2))`` for random data; torch's is a cascade)."""
    import numpy as np

    if scratch is None:
        scratch = {}

    def temp(kind: str, dtype: Any, rows: int) -> Any:
        """A ``(rows, WIDTH)`` work buffer kept between calls (a fresh multi-megabyte one would
        page-fault on every step)."""
        buf = scratch.get(kind)
        if buf is None or buf.dtype != dtype or buf.shape[0] < rows:
            buf = scratch[kind] = np.empty((max(rows, BLOCK), WIDTH), dtype=dtype)
        return buf[:rows]

    if not ops:
        return
    _, _, pos, first = lay if lay is not None else layout(sizes)
    start, end = min(lo for _, lo, _, _, _ in ops), max(hi for _, _, hi, _, _ in ops)
    with np.errstate(all="ignore"):
        # block by block, each op in turn: a block stays in the cache while every statistic reads it
        # (one pass over the buffer from memory, not one per statistic)
        for b0 in range(start, end, BLOCK):
            b1 = min(b0 + BLOCK, end)
            absolute = None  # |x| of rows [a0, a0 + len(absolute)) of this block
            a0 = b0
            padded = False
            for name, lo, hi, threshold, offset in ops:
                lo_, hi_ = max(lo, b0), min(hi, b1)
                if lo_ >= hi_:
                    continue
                src = x[lo_:hi_]
                dst = out[offset + lo_ - lo:offset + hi_ - lo]
                if name == "sum":
                    np.einsum("ij->i", src, out=dst)
                elif name == "sq":
                    np.einsum("ij,ij->i", src, src, out=dst)
                    np.sqrt(dst, out=dst)
                elif name == "abs":
                    absolute, a0 = np.abs(src, out=temp("abs", x.dtype, hi_ - lo_)), lo_
                    np.einsum("ij->i", absolute, out=dst)
                elif name in ("nonzero", "positive", "gt", "lt", "abs_gt"):
                    hits = temp("hits", np.bool_, hi_ - lo_)
                    if name == "nonzero":
                        np.not_equal(src, 0, out=hits)
                    elif name == "positive":
                        np.greater(src, 0, out=hits)
                    elif name == "gt":
                        np.greater(src, threshold, out=hits)
                    elif name == "lt":
                        np.less(src, threshold, out=hits)
                    else:
                        np.greater(absolute[lo_ - a0:hi_ - a0], threshold, out=hits)  # type: ignore[index]
                    dst[...] = np.add.reduce(hits.view(np.uint8), axis=1, dtype=np.uint16)  # (at most 256 a chunk)
                elif name in ("min", "max"):
                    if not padded:  # (after this block's sums and counts, which read the zero padding)
                        i0, i1 = np.searchsorted(pos, (b0 * WIDTH, b1 * WIDTH))
                        if i1 > i0:
                            flat = x.reshape(-1)
                            flat[pos[i0:i1]] = flat[first[i0:i1]]
                        padded = True
                    (np.minimum if name == "min" else np.maximum).reduce(src, axis=1, out=dst)
                elif name == "abs_min":
                    i0, i1 = np.searchsorted(pos, (lo_ * WIDTH, hi_ * WIDTH))
                    absolute.reshape(-1)[pos[i0:i1] - a0 * WIDTH] = np.inf  # type: ignore[union-attr]
                    np.minimum.reduce(absolute[lo_ - a0:hi_ - a0], axis=1, out=dst)  # type: ignore[index]
                else:
                    raise ValueError(f"reduce_chunks: unknown statistic {name!r}")


def reduce_tensors(x: Any, sizes: tuple[int, ...], ops: list[tuple[str, int, int, float, int, int]], out: Any,
                   lay: tuple[Any, Any, Any, Any] | None = None, scratch: dict[str, Any] | None = None) -> None:
    """Each op's statistic per *tensor* of the bucket, in float64: op ``j``'s into
    ``out[j * len(sizes):(j + 1) * len(sizes)]`` (0 for the tensors outside ``[k0, k1)``, the tensors
    that need it). An op is ``(name, lo, hi, threshold, k0, k1)``: its per-chunk values
    (:func:`reduce_chunks`) combined over each tensor's chunks (:func:`per_tensor`), as
    ``_Bucket.segment`` does with the per-chunk values of torch. ``lay``: :func:`layout` of ``sizes``."""
    import numpy as np

    if scratch is None:
        scratch = {}
    if lay is None:
        lay = layout(sizes)
    count = len(sizes)
    offsets = np.cumsum([0] + [hi - lo for _, lo, hi, _, _, _ in ops])
    per_chunk = scratch.get("per_chunk")
    if per_chunk is None or per_chunk.dtype != x.dtype or per_chunk.size < offsets[-1]:
        per_chunk = scratch["per_chunk"] = np.empty(max(int(offsets[-1]), 1), dtype=x.dtype)
    reduce_chunks(x, sizes, [(name, lo, hi, thr, int(off)) for (name, lo, hi, thr, _, _), off in zip(ops, offsets)],
                  per_chunk, lay, scratch)
    out[:len(ops) * count] = 0.0
    with np.errstate(all="ignore"):
        for j, ((name, lo, hi, _, k0, k1), off) in enumerate(zip(ops, offsets)):
            per_tensor(per_chunk[off:off + hi - lo], name, lay[1], lo, k0, k1, out[j * count:(j + 1) * count])


#: What the child runs (``python -c BOOT FD tripwire-reduce``, with the training's ``-I``/``-E``/``-s``):
#: this module's source, sent over the socket first (a short command line in ``ps``); the working
#: directory is taken off ``sys.path`` before anything is imported (a ``socket.py`` or ``numpy.py``
#: there is the user's, not the child's).
BOOT = ("import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; import socket; "
        "s = socket.socket(fileno=int(sys.argv[1])); g = {'__name__': 'tripwire_reduce'}; "
        "exec(compile(s.recv(1 << 22), 'tripwire/integrations/_reduce_worker.py', 'exec'), g); g['main'](s)")


def main(sock: Any) -> None:  # pragma: no cover - runs in the child process (tests drive it there)
    """Answer the training process's messages on ``sock`` until it closes (see the protocol above)."""
    import mmap
    import os
    import pickle
    import socket
    import traceback

    try:
        import numpy as np
    except BaseException:  # (the training process says why, and reduces in process)
        sock.send(pickle.dumps(("error", 0, traceback.format_exc())))
        return
    maps: dict[int, Any] = {}
    plans: dict[int, tuple[HostStats, list[tuple[str, float | None]], list[str]]] = {}
    layouts: dict[tuple[int, ...], tuple[Any, Any, Any, Any]] = {}
    work: dict[str, Any] = {}
    sock.send(pickle.dumps(("ready", os.getpid())))
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, 1 << 22, 1)
        except OSError:
            return
        if not data:
            return  # the training process closed its end (or ended)
        msg = pickle.loads(data)
        if msg[0] in ("map", "unmap"):
            old = maps.pop(msg[1], None)
            if old is not None:
                old.close()
            try:
                if msg[0] == "map":
                    maps[msg[1]] = mmap.mmap(fds[0], msg[2])
            finally:
                for f in fds:
                    os.close(f)
            continue
        if msg[0] == "plan":
            if len(plans) >= 1024:  # (plans of programs long gone; a request for one is an error)
                plans.clear()
            plans[msg[1]] = (HostStats(*msg[2:7]), msg[7], msg[8])
            continue
        _, seq, buf_key, dtype, chunks, plan_key, res_key, ops = msg
        try:
            stats, columns, names = plans[plan_key]
            sizes, count = stats.sizes, len(stats.sizes)
            x = np.ndarray((chunks, WIDTH), dtype=dtype, buffer=maps[buf_key])
            out = np.ndarray((count * (len(ops) + len(columns)),), dtype=np.float64, buffer=maps[res_key])
            lay = layouts.get(sizes)
            if lay is None:
                if len(layouts) >= 64:
                    layouts.clear()
                lay = layouts[sizes] = layout(sizes)
            reduce_tensors(x, sizes, ops, out, lay, work)
            host = {name: out[j * count:(j + 1) * count] for j, name in enumerate(names)}
            done = not stats.probe(host) and not stats.finish(host)
            if done and columns:
                out[len(ops) * count:].reshape(count, len(columns))[...] = stats.matrix(host, columns)
            reply: tuple[Any, ...] = ("done", seq, done)
        except Exception:  # the training process computes the step itself, and says why
            reply = ("error", seq, traceback.format_exc())
        sock.send(pickle.dumps(reply))


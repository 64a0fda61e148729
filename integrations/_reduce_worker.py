"""The reduction process: per-chunk statistics of a save step's packed tensors, computed with numpy
in a process of its own (see :class:`tripwire.integrations._torch.ReduceProcess`).

Why a process: on the CPU, a background *thread* that reduces a step beside training takes and
gives back the GIL around each of its torch calls, and every hand-over wakes a thread on the other
core; measured on a 2-core machine, a fit ran 17-37% slower beside such a thread even where the
thread held the GIL for microseconds at a time, and no slower beside a process doing the same work
(docs/benchmarks.md, sessions 23 and 39). The training process copies each step's tensors into
shared memory (as it copied them into a private buffer for the thread); this process computes the
statistics there and writes them into shared memory too; the host assembly stays in the training
process.

This module imports the standard library and numpy only: it is run as the source of ``python -c``
(no tripwire, no torch import in the child), and imported by the tests and by the training process
for :func:`reduce_chunks` (the same arithmetic, in process, for the equivalence tests).

Protocol over a ``SOCK_SEQPACKET`` socket pair, one pickled tuple per message:

* to the worker ``("map", key, nbytes)`` with one file descriptor (a ``memfd``): shared memory that
  later requests name by ``key``; ``("unmap", key)``: no longer used;
* ``("reduce", seq, buf_key, dtype, chunks, sizes, res_key, ops)``: the statistics ``ops`` of the
  ``(chunks, 256)`` buffer at the start of ``buf_key`` per tensor (:func:`reduce_tensors`), float64
  into ``res_key``; answered ``("done", seq)`` or ``("error", seq, traceback)``;
* from the worker, first, ``("ready", pid)`` (or ``("error", 0, traceback)`` where numpy does not
  import).

The worker ends when the other end closes (the training process ended or closed its backend).
"""

from __future__ import annotations

import sys
from typing import Any

WIDTH = 256  # (integrations._torch._WIDTH)


def layout(sizes: tuple[int, ...]) -> tuple[Any, Any]:
    """The padding positions of a bucket whose tensors have ``sizes`` elements (each fills whole
    chunks of ``WIDTH``; the rest of its last chunk is padding): ``(pad_pos, pad_first)``, each
    padding slot's flat index and the flat index of its tensor's first element (as ``_Layout``)."""
    import numpy as np

    n = np.asarray(sizes, dtype=np.int64)
    chunks = -(-n // WIDTH)
    pads = chunks * WIDTH - n
    starts = np.concatenate(([0], np.cumsum(chunks)[:-1])) * WIDTH
    owner = np.repeat(np.arange(len(sizes)), pads)
    within = np.arange(owner.size) - np.repeat(np.cumsum(pads) - pads, pads)
    return starts[owner] + n[owner] + within, starts[owner]


def reduce_chunks(x: Any, sizes: tuple[int, ...], ops: list[tuple[str, int, int, float, int]], out: Any,
                  pads: tuple[Any, Any] | None = None, scratch: dict[str, Any] | None = None) -> None:
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
            buf = scratch[kind] = np.empty((rows, WIDTH), dtype=dtype)
        return buf[:rows]

    absolute = None
    abs_lo = 0
    padded = False
    with np.errstate(all="ignore"):
        for name, lo, hi, threshold, offset in ops:
            dst = out[offset:offset + hi - lo]
            src = x[lo:hi]
            if name == "sum":
                np.einsum("ij->i", src, out=dst)
            elif name == "sq":
                np.einsum("ij,ij->i", src, src, out=dst)
                np.sqrt(dst, out=dst)
            elif name == "abs":
                absolute, abs_lo = np.abs(src, out=temp("abs", x.dtype, hi - lo)), lo
                np.einsum("ij->i", absolute, out=dst)
            elif name in ("nonzero", "positive", "gt", "lt", "abs_gt"):
                hits = temp("hits", np.bool_, hi - lo)
                if name == "nonzero":
                    np.not_equal(src, 0, out=hits)
                elif name == "positive":
                    np.greater(src, 0, out=hits)
                elif name == "gt":
                    np.greater(src, threshold, out=hits)
                elif name == "lt":
                    np.less(src, threshold, out=hits)
                else:
                    np.greater(absolute[lo - abs_lo:hi - abs_lo], threshold, out=hits)  # type: ignore[index]
                dst[...] = np.add.reduce(hits.view(np.uint8), axis=1, dtype=np.uint16)  # (at most 256 a chunk)
            elif name in ("min", "max"):
                if not padded:
                    pos, first = pads if pads is not None else layout(sizes)
                    if pos.size:
                        flat = x.reshape(-1)
                        flat[pos] = flat[first]
                    padded = True
                (np.minimum if name == "min" else np.maximum).reduce(src, axis=1, out=dst)
            elif name == "abs_min":
                pos = (pads if pads is not None else layout(sizes))[0] - abs_lo * WIDTH
                flat = absolute.reshape(-1)  # type: ignore[union-attr]
                flat[pos[(pos >= 0) & (pos < flat.size)]] = np.inf
                np.minimum.reduce(absolute[lo - abs_lo:hi - abs_lo], axis=1, out=dst)  # type: ignore[index]
            else:
                raise ValueError(f"reduce_chunks: unknown statistic {name!r}")


def reduce_tensors(x: Any, sizes: tuple[int, ...], ops: list[tuple[str, int, int, float, int, int]], out: Any,
                   pads: tuple[Any, Any] | None = None, scratch: dict[str, Any] | None = None) -> None:
    """Each op's statistic per *tensor* of the bucket, in float64: op ``j``'s into
    ``out[j * len(sizes):(j + 1) * len(sizes)]`` (0 for the tensors outside ``[k0, k1)``, the tensors
    that need it). An op is ``(name, lo, hi, threshold, k0, k1)``: its per-chunk values
    (:func:`reduce_chunks`) in float64, squared for ``sq`` (a chunk's norm), then combined over each
    tensor's chunks (sums added, ``min``/``abs_min`` the least, ``max`` the greatest), as
    ``_Bucket.segment`` does with the per-chunk values of torch."""
    import numpy as np

    if scratch is None:
        scratch = {}
    count = len(sizes)
    chunk_of = scratch.get(("chunk_of", sizes))
    if chunk_of is None:
        n = np.asarray(sizes, dtype=np.int64)
        chunk_of = np.concatenate(([0], np.cumsum(-(-n // WIDTH))))
        if len(scratch) > 64:  # (layouts of programs gone)
            scratch.clear()
        scratch[("chunk_of", sizes)] = chunk_of
    total = sum(hi - lo for _, lo, hi, _, _, _ in ops)
    per_chunk = scratch.get("per_chunk")
    if per_chunk is None or per_chunk.dtype != x.dtype or per_chunk.size < total:
        per_chunk = scratch["per_chunk"] = np.empty(max(total, 1), dtype=x.dtype)
    offsets = np.cumsum([0] + [hi - lo for _, lo, hi, _, _, _ in ops])
    reduce_chunks(x, sizes, [(name, lo, hi, thr, int(off)) for (name, lo, hi, thr, _, _), off in zip(ops, offsets)],
                  per_chunk, pads, scratch)
    out[:len(ops) * count] = 0.0
    with np.errstate(all="ignore"):
        for j, ((name, lo, hi, _, k0, k1), off) in enumerate(zip(ops, offsets)):
            values = per_chunk[off:off + hi - lo].astype(np.float64)
            if name == "sq":
                values *= values
            how = np.minimum if name in ("min", "abs_min") else np.maximum if name == "max" else np.add
            out[j * count + k0:j * count + k1] = how.reduceat(values, chunk_of[k0:k1] - lo)


def main(fd: int) -> None:  # pragma: no cover - runs in the child process (tests drive it there)
    import mmap
    import os
    import pickle
    import socket
    import traceback

    sock = socket.socket(fileno=fd)
    try:
        import numpy as np
    except BaseException:  # (the training process says why, and reduces in process)
        sock.send(pickle.dumps(("error", 0, traceback.format_exc())))
        return
    maps: dict[int, Any] = {}
    layouts: dict[tuple[int, ...], tuple[Any, Any]] = {}
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
        _, seq, buf_key, dtype, chunks, sizes, res_key, ops = msg
        try:
            x = np.ndarray((chunks, WIDTH), dtype=dtype, buffer=maps[buf_key])
            out = np.ndarray((len(ops) * len(sizes),), dtype=np.float64, buffer=maps[res_key])
            pads = layouts.get(sizes)
            if pads is None:
                if len(layouts) >= 64:
                    layouts.clear()
                pads = layouts[sizes] = layout(sizes)
            reduce_tensors(x, sizes, ops, out, pads, work)
            reply: tuple[Any, ...] = ("done", seq)
        except Exception:  # the training process computes the step itself, and says why
            reply = ("error", seq, traceback.format_exc())
        sock.send(pickle.dumps(reply))


if __name__ == "__main__":  # pragma: no cover - ``python -c <this source> FD``
    sys.path[:] = [p for p in sys.path if p not in ("", ".")]  # (-c puts the working directory first)
    main(int(sys.argv[1]))

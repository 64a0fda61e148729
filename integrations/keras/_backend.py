"""``KerasBackend``: tripwire's reductions computed with ``keras.ops`` on the backend's device.

A step's tensors are reduced together: small tensors are packed as rows of one zero-padded
matrix (one gather), every reduction is one op over the rows, and all results leave the device in
one host copy. Per step the number of ops grows with the number of size buckets, not with the
number of tensors. A first pass runs in float32 with one pass per reduction (variance from the sum
of squares); rows it cannot answer exactly (non-finite values, overflow, a variance small against
the squared mean) are recomputed in float64 where the backend has it (torch, tensorflow; jax with
``jax_enable_x64``) with two-pass variance and exact counts. Results match
:class:`tripwire.NumpyBackend` (the contract test checks every reduction).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from keras import ops

from tripwire._config import parse_reduction
from tripwire._reductions import finite_range

from . import _native

_SMALL = 1 << 12  # tensors with fewer elements are packed with others (larger ones: compute dominates)
_MAX_WASTE = 2.0  # a packed matrix holds at most this many times the elements it pads
_CACHE_SIZE = 64


class KerasBackend:
    """Reductions for Keras tensors (any backend) following :class:`tripwire.ReductionBackend`."""

    name = "keras"

    def __init__(self) -> None:
        self._layouts: dict[tuple[int, ...], tuple[Any, Any, Any]] = {}

    # ------------------------------------------------------------------------------ protocol
    def numel(self, tensor: Any) -> int:
        return int(math.prod(int(d) for d in tensor.shape))

    def to_numpy(self, tensor: Any) -> np.ndarray:
        with _native.no_grad():
            if _dtype(tensor) == "bfloat16":
                tensor = ops.cast(tensor, "float32")
            return np.asarray(ops.convert_to_numpy(tensor))

    def reduce(self, tensors: Sequence[Any], reductions: Sequence[str]) -> np.ndarray:
        out = np.full((len(tensors), len(reductions)), np.nan, dtype=np.float64)
        parsed = [parse_reduction(r) for r in reductions]
        sizes = [self.numel(t) for t in tensors]
        for i, n in enumerate(sizes):
            if n == 0:
                for j, (base, _) in enumerate(parsed):
                    if base in ("numel", "nonfinite_count"):
                        out[i, j] = 0.0
        rows = [i for i, n in enumerate(sizes) if n > 0]
        if not rows:
            return out
        wide = "float64" if _native.float64_supported() else "float32"
        fast = wide if any(_dtype(tensors[i]) == "float64" for i in rows) else "float32"
        values, refine = self._run(tensors, sizes, rows, parsed, fast, exact=False)
        out[rows] = values
        if refine.any():  # rare: non-finite values, overflow, a mean large against the spread
            again = [i for i, r in zip(rows, refine) if r]
            out[again] = self._run(tensors, sizes, again, parsed, wide, exact=True)[0]
        return out

    def _run(self, tensors: Sequence[Any], sizes: list[int], rows: list[int], parsed: list[tuple[str, float | None]],
             dtype: str, exact: bool) -> tuple[np.ndarray, np.ndarray]:
        """Reduce ``tensors[rows]`` in ``dtype``: the values and which rows need an exact pass."""
        order = sorted(rows, key=lambda i: -sizes[i])
        buckets = _buckets(order, sizes)
        with _native.no_grad():
            mats, finishers = [], []
            for bucket in buckets:
                cols, finish = self._bucket_columns([tensors[i] for i in bucket], [sizes[i] for i in bucket], parsed, dtype, exact)
                mats.append(ops.stack(cols, axis=1) if cols else None)
                finishers.append(finish)
            present = [m for m in mats if m is not None]
            host = None
            if present:
                host = np.asarray(ops.convert_to_numpy(ops.concatenate(present, axis=0) if len(present) > 1 else present[0]))
                host = host.astype(np.float64)
        position = {i: r for r, i in enumerate(rows)}
        values = np.empty((len(rows), len(parsed)), dtype=np.float64)
        refine = np.zeros(len(rows), dtype=bool)
        start = 0
        for bucket, mat, finish in zip(buckets, mats, finishers):
            k = len(bucket)
            block = host[start:start + k] if mat is not None and host is not None else np.zeros((k, 0))
            if mat is not None:
                start += k
            where = [position[i] for i in bucket]
            with np.errstate(all="ignore"):
                values[where], refine[where] = finish(block)
        return values, refine

    def histogram(self, tensor: Any, bins: int, value_range: tuple[float, float] | None) -> tuple[np.ndarray, np.ndarray]:
        n = self.numel(tensor)
        # numpy bins in the tensor's own float type (float32 stays float32): so do we
        bin_type = np.result_type(0.0, np.empty(0, dtype=_host_dtype(tensor)))
        if bin_type == np.float64 and not _native.float64_supported():
            bin_type = np.dtype(np.float32)
        dtype = "float64" if bin_type == np.float64 else "float32"
        with _native.no_grad():
            x = ops.cast(ops.reshape(tensor, (-1,)), dtype)
            finite = ops.isfinite(x)
            if value_range is None:
                if n == 0:
                    lo, hi = 0.0, 1.0
                else:
                    mm = ops.convert_to_numpy(ops.stack([ops.min(ops.where(finite, x, np.inf)), ops.max(ops.where(finite, x, -np.inf))]))
                    lo, hi = float(mm[0]), float(mm[1])
                    if not (math.isfinite(lo) and math.isfinite(hi)):
                        lo, hi = finite_range(np.zeros(0))
                    elif lo == hi:
                        lo, hi = lo - 0.5, hi + 0.5
            else:
                lo, hi = float(value_range[0]), float(value_range[1])
            edges = np.linspace(lo, hi, bins + 1, dtype=bin_type)
            if n == 0:
                return np.zeros(bins, dtype=np.int64), edges.astype(np.float64)
            # numpy's rule: index from the scaled value, then corrected against the edges
            keep = ops.logical_and(finite, ops.logical_and(ops.greater_equal(x, lo), ops.less_equal(x, hi)))
            xs = ops.where(keep, x, lo)
            idx = ops.cast(ops.floor((xs - lo) / (hi - lo) * bins), "int32")
            idx = ops.clip(idx, 0, bins - 1)
            e = ops.convert_to_tensor(edges, dtype)
            idx = idx - ops.cast(ops.less(xs, ops.take(e, idx)), "int32")
            up = ops.logical_and(ops.greater_equal(xs, ops.take(e, idx + 1)), ops.not_equal(idx, bins - 1))
            idx = ops.clip(idx + ops.cast(up, "int32"), 0, bins - 1)
            counts = ops.bincount(idx, weights=ops.cast(keep, dtype), minlength=bins)
            counts = np.rint(np.asarray(ops.convert_to_numpy(counts), dtype=np.float64)).astype(np.int64)
        return counts[:bins], edges.astype(np.float64)

    # ------------------------------------------------------------------------------ internals
    def _layout(self, sizes: tuple[int, ...]) -> tuple[Any, Any, Any]:
        """Gather indices, validity mask and a zero pad of a packed matrix (cached on device)."""
        hit = self._layouts.get(sizes)
        if hit is None:
            width, total = sizes[0], sum(sizes)
            gather = np.full((len(sizes), width), total, dtype=np.int64)  # ``total``: the pad zero
            mask = np.arange(width)[None, :] < np.asarray(sizes)[:, None]
            gather[mask] = np.arange(total)
            hit = (ops.convert_to_tensor(gather.reshape(-1), "int64"), ops.convert_to_tensor(mask), ops.zeros((1,), "float32"))
            if len(self._layouts) >= _CACHE_SIZE:
                self._layouts.pop(next(iter(self._layouts)))
            self._layouts[sizes] = hit
        return hit

    def _bucket_columns(self, tensors: list[Any], sizes: list[int], parsed: list[tuple[str, float | None]],
                        dtype: str, exact: bool) -> tuple[list[Any], Any]:
        """Device columns (one value per row) and a host function finishing the reductions.

        ``exact=False``: one pass per column; variance from the sum and the sum of squares, no
        count of non-finite values (zero when the sum is finite); the host function flags rows
        whose result is not reliable that way. ``exact=True``: two-pass variance and counts."""
        k, width = len(tensors), sizes[0]
        if k == 1:
            p = ops.cast(ops.reshape(tensors[0], (1, -1)), dtype)
            mask = None
        else:
            gather, mask, zero = self._layout(tuple(sizes))
            flat = ops.concatenate([ops.reshape(t, (-1,)) for t in tensors] + [zero], axis=0)
            p = ops.reshape(ops.take(ops.cast(flat, dtype), gather), (k, width))
        n = np.asarray(sizes, dtype=np.float64)
        pad = width - n  # zeros added to each row
        cols: list[Any] = []
        index: dict[Any, int] = {}
        memo: dict[str, Any] = {}

        def absolute() -> Any:
            if "abs" not in memo:
                memo["abs"] = ops.abs(p)
            return memo["abs"]

        def masked(x: Any, fill: float) -> Any:
            return x if mask is None else ops.where(mask, x, fill)

        def count(cond: Any) -> Any:
            return ops.cast(ops.sum(cond, axis=1), dtype)  # no float copy of the mask; faster than count_nonzero

        def col(key: Any) -> int:
            if key in index:
                return index[key]
            if key == "sum":
                c = ops.sum(p, axis=1)
            elif key == "abs_sum":
                c = ops.sum(absolute(), axis=1)
            elif key == "sumsq":
                c = ops.sum(ops.square(p), axis=1)
            elif key == "min":
                c = ops.min(masked(p, np.inf), axis=1)
            elif key == "max":
                c = ops.max(masked(p, -np.inf), axis=1)
            elif key == "abs_min":
                c = ops.min(masked(absolute(), np.inf), axis=1)
            elif key == "abs_max":
                c = ops.max(absolute(), axis=1)
            elif key in ("ssd", "abs_ssd"):  # sum of squared deviations from the row mean (two passes)
                x = p if key == "ssd" else absolute()
                mean = ops.sum(x, axis=1, keepdims=True) / ops.convert_to_tensor(n.reshape(-1, 1), dtype)
                c = ops.sum(ops.square(masked(x - mean, 0.0)), axis=1)
            elif key == "nonzero":
                c = count(ops.not_equal(p, 0))
            elif key == "nonfinite":
                c = count(ops.logical_not(ops.isfinite(p)))
            elif key[0] == "gt":
                c = count(ops.greater(p, key[1]))
            elif key[0] == "lt":
                c = count(ops.less(p, key[1]))
            elif key[0] == "abs_gt":
                c = count(ops.greater(absolute(), key[1]))
            else:  # pragma: no cover - guarded by parse_reduction
                raise ValueError(f"reduction: unknown column {key!r}")
            index[key] = len(cols)
            cols.append(c)
            return index[key]

        steps = [_plan_reduction(base, thr, col, n, pad, exact) for base, thr in parsed]

        def finish(block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            refine = np.zeros(k, dtype=bool)
            values = np.empty((k, len(steps)), dtype=np.float64)
            for j, (value, check) in enumerate(steps):
                values[:, j] = value(block)
                if check is not None:
                    refine |= check(block)
            return values, refine

        return cols, finish


def _plan_reduction(base: str, thr: float | None, col: Any, n: np.ndarray, pad: np.ndarray, exact: bool) -> tuple[Any, Any]:
    """Register the device columns a reduction needs; return the host function that finishes it
    and (one-pass mode) the one that flags rows needing the exact pass."""
    if base == "numel":
        return (lambda b: n), None
    if base == "zero_fraction":
        c = col("nonzero")
        return (lambda b: (n - b[:, c]) / n), None
    if base == "positive_fraction":
        c = col(("gt", 0.0))
        return (lambda b: b[:, c] / n), None
    if base in ("fraction_gt", "fraction_lt", "fraction_abs_gt"):
        kind = {"fraction_gt": "gt", "fraction_lt": "lt", "fraction_abs_gt": "abs_gt"}[base]
        c = col((kind, float(thr)))  # type: ignore[arg-type]
        pad_hits = (0.0 < thr) if kind == "lt" else (0.0 > thr)  # type: ignore[operator]
        return (lambda b: (b[:, c] - (pad if pad_hits else 0.0)) / n), None
    if base in ("min", "max", "abs_min", "abs_max"):
        c = col(base)
        return (lambda b: b[:, c]), None
    if base == "nonfinite_count":
        if exact:
            c = col("nonfinite")
            return (lambda b: b[:, c]), None
        c = col("sum")  # a finite sum has no NaN or Inf behind it
        return (lambda b: np.zeros(len(n))), (lambda b: ~np.isfinite(b[:, c]))
    simple = {"sum": ("sum", 1.0), "mean": ("sum", n), "l1": ("abs_sum", 1.0), "abs_sum": ("abs_sum", 1.0),
              "abs_mean": ("abs_sum", n)}
    if base in simple:
        key, div = simple[base]
        c = col(key)
        return (lambda b: b[:, c] / div), (None if exact else (lambda b: ~np.isfinite(b[:, c])))
    if base == "l2":
        c = col("sumsq")
        return (lambda b: np.sqrt(b[:, c])), (None if exact else (lambda b: ~np.isfinite(b[:, c])))
    if base in ("variance", "std", "abs_variance", "abs_std"):
        root = np.sqrt if base.endswith("std") else (lambda v: v)
        if exact:
            c = col("abs_ssd" if base.startswith("abs_") else "ssd")
            return (lambda b: root(b[:, c] / n)), None
        s, q = col("abs_sum" if base.startswith("abs_") else "sum"), col("sumsq")

        def var(b: np.ndarray) -> np.ndarray:
            return b[:, q] / n - (b[:, s] / n) ** 2

        def unreliable(b: np.ndarray) -> np.ndarray:
            # one pass loses the digits of a variance small against the squared mean
            return ~np.isfinite(b[:, q]) | ~np.isfinite(b[:, s]) | ((b[:, s] / n) ** 2 > var(b))

        return (lambda b: root(np.maximum(var(b), 0.0))), unreliable
    raise ValueError(f"reduction: unknown reduction {base!r}")


def _buckets(order: list[int], sizes: list[int]) -> list[list[int]]:
    """Group tensors (largest first) so that padding each to the bucket's largest wastes little."""
    buckets: list[list[int]] = []
    current: list[int] = []
    total = 0
    for i in order:
        n = sizes[i]
        if current and n < _SMALL and sizes[current[0]] < _SMALL and (len(current) + 1) * sizes[current[0]] <= _MAX_WASTE * (total + n):
            current.append(i)
            total += n
            continue
        if current:
            buckets.append(current)
        current, total = [i], n
    if current:
        buckets.append(current)
    return buckets


def _host_dtype(tensor: Any) -> np.dtype:
    """The numpy dtype :meth:`KerasBackend.to_numpy` gives (bfloat16 -> float32)."""
    name = _dtype(tensor)
    return np.dtype("float32" if name == "bfloat16" else name)


def _dtype(tensor: Any) -> str:
    from keras import backend

    return str(backend.standardize_dtype(tensor.dtype))


__all__ = ["KerasBackend"]

"""``KerasBackend``: tripwire's reductions computed on the backend's device.

Each reduction is finished on the host from a few per-tensor *columns* (sum, sum of squares, sum
of squared deviations, min, max, count of non-zeros ...); a step's columns leave the device in
one host copy. On torch every reduction goes to the torch integration's ``TorchBackend`` (the one
Lightning uses: all groups of a step in one fused call, see docs/lightning.md), since a
``keras.ops`` call costs tens of microseconds of Python where a raw torch op costs a few. On other
backends the columns come from ``keras.ops``: small tensors are packed as rows of one zero-padded
matrix (one gather) and every column is one op over the rows, so the number of ops grows with the
number of size buckets, not with the number of tensors.

A first pass runs in float32; rows it cannot answer exactly (non-finite values, overflow, squares
that underflow, a variance small against the squared mean) are recomputed in float64 where the
backend has it (torch, tensorflow; jax with ``jax_enable_x64``) with a corrected two-pass variance
and exact counts. Without float64 (jax's default) that exact pass runs in float32 on each row scaled
by a power of two that brings its largest magnitude into [0.5, 1) (exact: no rounding), the sums
unscaled on the host in float64: a finite tensor of ~1e20 or ~1e-25 keeps its norm and variance
(trial 26e: stored as inf and 0), and a variance small against the squared mean its digits. Results
match :class:`tripwire.NumpyBackend` (the contract test checks every reduction, on both paths).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from keras import ops

from tripwire._config import parse_reduction
from tripwire._reductions import EMPTY_ZERO, bin_thresholds, histogram_edges, numpy_binnable, widened

from . import _native

_SCALED = {"sum": 1, "abs_sum": 1, "sumsq": 2, "ssd": 2, "abs_ssd": 2}
"""Columns an exact float32 pass computes on rows scaled by ``2**-e`` (see :meth:`KerasBackend._scales`),
and the power of the scale each is unscaled by on the host."""
_TINY = 2.0 ** -60
"""A largest magnitude below this: the squares (< 2**-120) fall near float32's subnormals (2**-126)."""
_SMALL = 1 << 12  # tensors with fewer elements are packed with others (larger ones: compute dominates)
_MAX_WASTE = 2.0  # a packed matrix holds at most this many times the elements it pads
_MAX_PACKED = 2 ** 31 - 2
"""Most elements of a packed matrix: its gather indices, the pad's (one past them) included, are
int32 and exact (jax without ``jax_enable_x64`` has no int64: an int64 request is truncated to
int32 with a UserWarning, trial 30i F4); a bucket that would hold more is split in two."""
_CACHE_SIZE = 64

Finish = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]  # (block, n, pad) -> per-row values


class _Plan:
    """How a list of reductions is computed: the columns, and per reduction the host function
    finishing it and (first pass) the one flagging rows for the exact pass."""

    __slots__ = ("parsed", "keys", "steps", "empty")

    def __init__(self, reductions: Sequence[str], exact: bool) -> None:
        self.parsed = [parse_reduction(r) for r in reductions]
        self.keys: list[Any] = []
        index: dict[Any, int] = {}

        def col(key: Any) -> int:
            if key not in index:
                index[key] = len(self.keys)
                self.keys.append(key)
            return index[key]

        self.steps = [_plan_reduction(base, thr, col, exact) for base, thr in self.parsed]
        # what an empty tensor gives: 0 for numel and nonfinite_count, NaN for everything else
        self.empty = np.array([0.0 if base in ("numel", "nonfinite_count") or base in EMPTY_ZERO else np.nan for base, _ in self.parsed])

    def finish(self, block: np.ndarray, n: np.ndarray, pad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values = np.empty((len(n), len(self.steps)), dtype=np.float64)
        refine = np.zeros(len(n), dtype=bool)
        with np.errstate(all="ignore"):
            for j, (value, check) in enumerate(self.steps):
                values[:, j] = value(block, n, pad)
                if check is not None:
                    refine |= check(block, n, pad)
        return values, refine


class KerasBackend:
    """Reductions for Keras tensors (any backend) following :class:`tripwire.ReductionBackend`."""

    name = "keras"

    def __init__(self) -> None:
        self._layouts: dict[tuple[int, ...], tuple[Any, Any, Any]] = {}
        self._plans: dict[tuple[tuple[str, ...], bool], _Plan] = {}
        self._fast = True  # TorchBackend on torch (tests switch it off to check the keras.ops path)
        self._torch: Any = None
        self._converted: tuple[Any, list[tuple[list[Any], Sequence[str]]]] | None = None  # see _as_torch

    def _torch_backend(self) -> Any:
        """This backend's TorchBackend on the torch backend (None elsewhere, or with ``_fast`` off)."""
        if self._torch is None and self._fast:
            self._torch = _native.torch_backend() or False
        return self._torch if self._fast and self._torch else None

    # ------------------------------------------------------------------------------ protocol
    def numel(self, tensor: Any) -> int:
        return int(math.prod(int(d) for d in tensor.shape))

    def to_numpy(self, tensor: Any) -> np.ndarray:
        with _native.no_grad():
            if _dtype(tensor) == "bfloat16":
                tensor = ops.cast(tensor, "float32")
            return np.asarray(ops.convert_to_numpy(tensor))

    def reduce(self, tensors: Sequence[Any], reductions: Sequence[str]) -> np.ndarray:
        fast = self._torch_backend()
        if fast is not None:
            return fast.reduce([_native.as_torch(t) for t in tensors], reductions)
        plan = self._plan(reductions, False)
        sizes = [self.numel(t) for t in tensors]
        out = np.empty((len(tensors), len(reductions)), dtype=np.float64)
        out[:] = plan.empty
        rows = [i for i, n in enumerate(sizes) if n > 0]
        if not rows or not reductions:
            return out
        wide = "float64" if _native.float64_supported() else "float32"
        fast_dtype = wide if any(_is_float64(tensors[i]) for i in rows) else "float32"
        values, refine = self._run(plan, tensors, sizes, rows, fast_dtype)
        out[rows] = values
        if refine.any():  # rare: non-finite values, overflow, underflow, a mean large against the spread
            again = [i for i, r in zip(rows, refine) if r]
            scales = self._scales(tensors, sizes, again) if wide == "float32" else None
            out[again] = self._run(self._plan(reductions, True), tensors, sizes, again, wide, scales)[0]
        return out

    def _scales(self, tensors: Sequence[Any], sizes: list[int], rows: list[int]) -> dict[int, float]:
        """Per row of an exact pass without float64: ``2**-e`` with ``abs_max = m * 2**e``, ``m`` in
        [0.5, 1) (``e`` kept within float32's normal range), 1 where ``abs_max`` is 0 or not finite.
        A power of two scales every element exactly, so a row of ~1e20 or ~1e-25 is summed and
        squared in float32 without overflow or underflow, and its sums are unscaled on the host."""
        amax = self._run(self._plan(["abs_max"], True), tensors, sizes, rows, "float32")[0][:, 0]
        with np.errstate(all="ignore"):
            usable = np.isfinite(amax) & (amax > 0)
            exponent = np.clip(np.frexp(np.where(usable, amax, 1.0))[1], -125, 126)
            scale = np.where(usable, np.ldexp(1.0, -exponent), 1.0)
        return {i: float(f) for i, f in zip(rows, scale)}

    def reduce_groups(self, groups: Sequence[tuple[Sequence[Any], Sequence[str]]]) -> list[np.ndarray]:
        """Every ``(tensors, reductions)`` group of a step: on torch in one fused TorchBackend call
        (a tensor offered under several names reduced once), elsewhere one :meth:`reduce` each."""
        fast = self._torch_backend()
        if fast is not None:
            return fast.reduce_groups(self._as_torch(groups))
        return [self.reduce(ts, rs) for ts, rs in groups]

    def _as_torch(self, groups: Sequence[tuple[Sequence[Any], Sequence[str]]]) -> list[tuple[list[Any], Sequence[str]]]:
        """The groups with torch tensors, converted once per step: the session asks
        :meth:`reduce_groups_async` first and, where it declines, :meth:`reduce_groups` with the same
        groups, which then reuses what TorchBackend worked out for them (not a second conversion
        and program lookup: ~0.1 ms a save step of the default config)."""
        last, self._converted = self._converted, None
        if last is not None and last[0] is groups:
            return last[1]
        return [([_native.as_torch(t) for t in ts], rs) for ts, rs in groups]

    def reduce_groups_async(self, groups: Sequence[tuple[Sequence[Any], Sequence[str]]], live: bool = False) -> Any:
        """On torch, TorchBackend's (the step reduced on a background thread, or None when that
        does not pay; ``live``: see there); None elsewhere."""
        fast = self._torch_backend()
        if fast is None:
            return None
        converted = self._as_torch(groups)
        later = fast.reduce_groups_async(converted, live=live)
        self._converted = None if later is not None else (groups, converted)
        return later

    def fence(self) -> list[tuple[int, int]]:
        """TorchBackend's :meth:`~tripwire.integrations._torch.TorchBackend.fence` (on torch): the
        places of the tensors seen changed in place before the copy was made (the session warns)."""
        return self._torch.fence() if self._torch else []

    def warm_up(self, variables: Sequence[Any], collections: Any) -> bool:
        """TorchBackend's :meth:`~tripwire.integrations._torch.TorchBackend.warm_up` on torch, for the
        model's ``variables`` (nothing elsewhere): the reduction process started at the fit's start."""
        fast = self._torch_backend()
        return bool(fast is not None and fast.warm_up([getattr(v, "value", v) for v in variables], collections))

    def close(self) -> None:
        if self._torch:
            self._torch.close()

    def histogram(self, tensor: Any, bins: int, value_range: tuple[float, float] | None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`tripwire.NumpyBackend.histogram` on the backend's device, with the same counts and
        edges (on torch TorchBackend's): float64 edges (``histogram_edges`` over ``value_range``, or
        over the finite minimum and maximum, ``widened`` where they are equal: those two numbers are
        copied to the host), and each value's bin found as ``numpy.histogram(x, bins, range=(lo,
        hi))`` with a float64 ``lo``/``hi`` finds it: with float64 (torch, tensorflow; jax with
        ``jax_enable_x64``) numpy's own arithmetic in float64 (the index from the scaled value,
        corrected by one either way against the edges); without it (jax's default), and where numpy
        would not bin (equal edges: ``numpy_binnable``), ``keras.ops.searchsorted`` against the
        edges exactly (``bin_thresholds``: float32, bf16 and fp16 values against the edges rounded
        up to float32; integers without float64 are binned as float32). Trial 30a F4: the bin
        arithmetic in float32, with float32-rounded edges, miscounted. The counts leave the device
        in one copy."""
        fast = self._torch_backend()
        if fast is not None:
            return fast.histogram(_native.as_torch(tensor), bins, value_range)
        n = self.numel(tensor)
        wide = _native.float64_supported()
        dtype = "float64" if wide and (_is_float64(tensor) or _host_dtype(tensor).kind in "iub") else "float32"
        with _native.no_grad():
            x = ops.cast(ops.reshape(tensor, (-1,)), dtype)
            if value_range is not None:
                lo, hi = float(value_range[0]), float(value_range[1])
            elif n == 0:
                lo, hi = 0.0, 1.0
            else:
                lo, hi = (float(v) for v in ops.convert_to_numpy(ops.stack([ops.min(x), ops.max(x)])))
                if not (math.isfinite(lo) and math.isfinite(hi)):  # NaN or Inf among them: the finite values'
                    finite = ops.isfinite(x)
                    mm = ops.convert_to_numpy(ops.stack([ops.min(ops.where(finite, x, np.inf)), ops.max(ops.where(finite, x, -np.inf))]))
                    lo, hi = float(mm[0]), float(mm[1])
                lo, hi = (0.0, 1.0) if lo > hi else widened(lo, hi)
            edges = histogram_edges(lo, hi, bins)
            if n == 0:
                return np.zeros(bins, dtype=np.int64), edges
            if wide and numpy_binnable(edges):
                x = ops.cast(x, "float64")
                # (tensors: a Python float would be converted to float32)
                first, last, span = (ops.convert_to_tensor(v, "float64") for v in (edges[0], edges[-1], edges[-1] - edges[0]))
                keep = ops.logical_and(ops.greater_equal(x, first), ops.less_equal(x, last))  # NaN, Inf fail
                x = ops.where(keep, x, first)
                idx = ops.minimum(ops.cast(ops.divide(ops.subtract(x, first), span) * bins, "int32"), bins - 1)
                # the edges, then the upper edges of the bins with the last one +Inf (numpy's last
                # bin is closed)
                e = ops.convert_to_tensor(np.concatenate((edges, edges[1:-1], [np.inf])), "float64")
                idx = idx - ops.cast(ops.less(x, ops.take(e, idx)), "int32")
                idx = idx + ops.cast(ops.greater_equal(x, ops.take(e, idx + (bins + 1))), "int32")
            else:
                inner, bounds = bin_thresholds(edges, np.dtype(dtype))
                keep = ops.logical_and(ops.greater_equal(x, ops.convert_to_tensor(bounds[0], dtype)),
                                       ops.less_equal(x, ops.convert_to_tensor(bounds[1], dtype)))
                if bins == 1:
                    idx = ops.zeros_like(x, "int32")
                else:  # the number of inner edges at or below each value
                    idx = ops.cast(ops.searchsorted(ops.convert_to_tensor(inner, dtype), x, side="right"), "int32")
            idx = ops.where(keep, idx, bins)  # (values not counted: bin `bins`, dropped below)
            counts = np.asarray(ops.convert_to_numpy(ops.bincount(idx, minlength=bins + 1)), dtype=np.int64)
        return counts[:bins], edges

    # ------------------------------------------------------------------------------ internals
    def _plan(self, reductions: Sequence[str], exact: bool) -> _Plan:
        key = (tuple(reductions), exact)
        plan = self._plans.get(key)
        if plan is None:
            if len(self._plans) >= _CACHE_SIZE:
                self._plans.pop(next(iter(self._plans)))
            plan = self._plans[key] = _Plan(reductions, exact)
        return plan

    def _run(self, plan: _Plan, tensors: Sequence[Any], sizes: list[int], rows: list[int], dtype: str,
             scales: dict[int, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Reduce ``tensors[rows]`` in ``dtype``: the values and which rows need an exact pass.
        ``scales`` (an exact pass without float64): each row's power-of-two scale, see :meth:`_scales`."""
        order = sorted(rows, key=lambda i: -sizes[i])
        buckets = _buckets(order, sizes)
        with _native.no_grad():
            mats = []
            for bucket in buckets:
                scale = None if scales is None else np.asarray([scales[i] for i in bucket], dtype=np.float64)
                cols = self._bucket_columns([tensors[i] for i in bucket], [sizes[i] for i in bucket], plan.keys, dtype,
                                            scale)
                mats.append(ops.stack(cols, axis=1) if cols else None)
            present = [m for m in mats if m is not None]
            host = None
            if present:
                host = np.asarray(ops.convert_to_numpy(ops.concatenate(present, axis=0) if len(present) > 1 else present[0]))
                host = host.astype(np.float64)
        position = {i: r for r, i in enumerate(rows)}
        values = np.empty((len(rows), len(plan.steps)), dtype=np.float64)
        refine = np.zeros(len(rows), dtype=bool)
        start = 0
        for bucket, mat in zip(buckets, mats):
            k = len(bucket)
            block = host[start:start + k] if mat is not None and host is not None else np.zeros((k, 0))
            if mat is not None:
                start += k
            if scales is not None and block.shape[1]:
                scale = np.asarray([scales[i] for i in bucket], dtype=np.float64)
                for j, key in enumerate(plan.keys):
                    if key in _SCALED:  # (float64 on the host: 1e40 and 1e-50 fit)
                        block[:, j] = block[:, j] / scale ** _SCALED[key]
            n = np.asarray([sizes[i] for i in bucket], dtype=np.float64)
            where = [position[i] for i in bucket]
            values[where], refine[where] = plan.finish(block, n, n.max() - n)  # pad: zeros added to each row
        return values, refine

    def _layout(self, sizes: tuple[int, ...]) -> tuple[Any, Any, Any]:
        """Gather indices, validity mask and a zero pad of a packed matrix (cached on device)."""
        hit = self._layouts.get(sizes)
        if hit is None:
            width, total = sizes[0], sum(sizes)
            # int32 indices: exact, a packed matrix holds at most _MAX_PACKED elements (see _buckets)
            gather = np.full((len(sizes), width), total, dtype=np.int32)  # ``total``: the pad zero
            mask = np.arange(width)[None, :] < np.asarray(sizes)[:, None]
            gather[mask] = np.arange(total, dtype=np.int32)
            hit = (ops.convert_to_tensor(gather.reshape(-1), "int32"), ops.convert_to_tensor(mask), ops.zeros((1,), "float32"))
            if len(self._layouts) >= _CACHE_SIZE:
                self._layouts.pop(next(iter(self._layouts)))
            self._layouts[sizes] = hit
        return hit

    def _bucket_columns(self, tensors: list[Any], sizes: list[int], keys: list[Any], dtype: str,
                        scale: np.ndarray | None = None) -> list[Any]:
        """``keys`` as device columns (one value per tensor) with ``keras.ops``: one tensor as a row,
        several as the rows of a zero-padded matrix. ``scale`` (one power of two per row): the
        :data:`_SCALED` columns are of the rows times it (the caller unscales them)."""
        k, width = len(tensors), sizes[0]
        if k == 1:
            p = ops.cast(ops.reshape(tensors[0], (1, -1)), dtype)
            mask = None
        else:
            gather, mask, zero = self._layout(tuple(sizes))
            flat = ops.concatenate([ops.reshape(t, (-1,)) for t in tensors] + [zero], axis=0)
            p = ops.reshape(ops.take(ops.cast(flat, dtype), gather), (k, width))
        n = np.asarray(sizes, dtype=np.float64)
        memo: dict[str, Any] = {}
        ps = p if scale is None else p * ops.convert_to_tensor(scale.reshape(-1, 1), dtype)  # (exact: powers of two)

        def absolute() -> Any:
            if "abs" not in memo:
                memo["abs"] = ops.abs(p)
            return memo["abs"]

        def scaled_absolute() -> Any:
            if scale is None:
                return absolute()
            if "sabs" not in memo:
                memo["sabs"] = ops.abs(ps)
            return memo["sabs"]

        def masked(x: Any, fill: float) -> Any:
            return x if mask is None else ops.where(mask, x, fill)

        def count(cond: Any) -> Any:
            return ops.cast(ops.sum(cond, axis=1), dtype)  # no float copy of the mask; faster than count_nonzero

        cols: list[Any] = []
        for key in keys:
            if key == "sum":
                c = ops.sum(ps, axis=1)
            elif key == "abs_sum":
                c = ops.sum(scaled_absolute(), axis=1)
            elif key == "sumsq":
                c = ops.sum(ops.square(ps), axis=1)
            elif key == "min":
                c = ops.min(masked(p, np.inf), axis=1)
            elif key == "max":
                c = ops.max(masked(p, -np.inf), axis=1)
            elif key == "abs_min":
                c = ops.min(masked(absolute(), np.inf), axis=1)
            elif key == "abs_max":
                c = ops.max(absolute(), axis=1)
            elif key in ("ssd", "abs_ssd"):
                # sum of squared deviations from the row mean, two passes with the correction of the
                # rounded mean's error (sum(d)**2 / n, Chan, Golub & LeVeque): a float32 mean of values
                # ~1e4 is off by ~1e-3, which a spread of 1e-2 reads as a 1% larger variance (trial 26e)
                x = ps if key == "ssd" else scaled_absolute()
                size = ops.convert_to_tensor(n.reshape(-1), dtype)
                mean = ops.sum(x, axis=1, keepdims=True) / ops.reshape(size, (-1, 1))
                d = masked(x - mean, 0.0)
                c = ops.sum(ops.square(d), axis=1) - ops.square(ops.sum(d, axis=1)) / size
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
            cols.append(c)
        return cols


def _plan_reduction(base: str, thr: float | None, col: Callable[[Any], int], exact: bool) -> tuple[Finish, Finish | None]:
    """Register the columns a reduction needs; return the host function that finishes it and
    (first pass) the one that flags rows needing the exact pass. Both take ``(block, n, pad)``:
    the columns, the element counts and the zeros a packed row has beyond its tensor.

    First pass: variance from the sum and the sum of squares (one pass; refined where the squared
    mean exceeds the variance, or where the largest magnitude is below :data:`_TINY`, as the l2 is);
    no count of non-finite values (zero when the sum is finite). Exact pass: corrected two-pass
    variance and exact counts."""
    if base == "numel":
        return (lambda b, n, pad: n), None
    if base == "zero_fraction":
        c = col("nonzero")
        return (lambda b, n, pad: (n - b[:, c]) / n), None
    if base == "positive_fraction":
        c = col(("gt", 0.0))
        return (lambda b, n, pad: b[:, c] / n), None
    if base in ("fraction_gt", "fraction_lt", "fraction_abs_gt"):
        kind = {"fraction_gt": "gt", "fraction_lt": "lt", "fraction_abs_gt": "abs_gt"}[base]
        c = col((kind, float(thr)))  # type: ignore[arg-type]
        pad_hits = (0.0 < thr) if kind == "lt" else (0.0 > thr)  # type: ignore[operator]
        if pad_hits:
            return (lambda b, n, pad: (b[:, c] - pad) / n), None
        return (lambda b, n, pad: b[:, c] / n), None
    if base in ("min", "max", "abs_min", "abs_max"):
        c = col(base)
        return (lambda b, n, pad: b[:, c]), None
    if base == "nonfinite_count":
        if exact:
            c = col("nonfinite")
            return (lambda b, n, pad: b[:, c]), None
        c = col("sum")  # a finite sum has no NaN or Inf behind it
        return (lambda b, n, pad: np.zeros(len(n))), (lambda b, n, pad: ~np.isfinite(b[:, c]))
    simple = {"sum": ("sum", False), "mean": ("sum", True), "l1": ("abs_sum", False), "abs_sum": ("abs_sum", False),
              "abs_mean": ("abs_sum", True)}
    if base in simple or base == "l2":
        key, per_element = simple.get(base, ("sumsq", False))
        c = col(key)
        check = None if exact else (lambda b, n, pad: ~np.isfinite(b[:, c]))
        if base == "l2":
            if not exact:  # (squares that underflow float32: a norm of 0, or of a few digits)
                m = col("abs_max")
                check = (lambda b, n, pad: ~np.isfinite(b[:, c]) | ((b[:, m] > 0) & (b[:, m] < _TINY)))
            return (lambda b, n, pad: np.sqrt(b[:, c])), check
        if per_element:
            return (lambda b, n, pad: b[:, c] / n), check
        return (lambda b, n, pad: b[:, c]), check
    if base in ("variance", "std", "abs_variance", "abs_std"):
        root: Callable[[np.ndarray], np.ndarray] = np.sqrt if base.endswith("std") else (lambda v: v)
        ab = base.startswith("abs_")
        if exact:
            d = col("abs_ssd" if ab else "ssd")
            return (lambda b, n, pad: root(np.maximum(b[:, d], 0.0) / n)), None  # (the correction's rounding: >= 0)
        s, q, m = col("abs_sum" if ab else "sum"), col("sumsq"), col("abs_max")

        def var(b: np.ndarray, n: np.ndarray) -> np.ndarray:
            return b[:, q] / n - (b[:, s] / n) ** 2

        def unreliable(b: np.ndarray, n: np.ndarray, pad: np.ndarray) -> np.ndarray:
            # one pass loses the digits of a variance small against the squared mean, and of
            # squares that underflow float32
            return (~np.isfinite(b[:, q]) | ~np.isfinite(b[:, s]) | ((b[:, s] / n) ** 2 > var(b, n))
                    | ((b[:, m] > 0) & (b[:, m] < _TINY)))

        return (lambda b, n, pad: root(np.maximum(var(b, n), 0.0))), unreliable
    raise ValueError(f"reduction: unknown reduction {base!r}")


def _buckets(order: list[int], sizes: list[int]) -> list[list[int]]:
    """Group tensors (largest first) so that padding each to the bucket's largest wastes little, a
    packed bucket (more than one tensor) at most :data:`_MAX_PACKED` elements once padded (its
    int32 gather indices exact); a bucket of one tensor is not gathered, whatever its size."""
    buckets: list[list[int]] = []
    current: list[int] = []
    total = 0
    for i in order:
        n = sizes[i]
        padded = (len(current) + 1) * sizes[current[0]] if current else 0
        if current and n < _SMALL and sizes[current[0]] < _SMALL and padded <= _MAX_WASTE * (total + n) and padded <= _MAX_PACKED:
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


def _is_float64(tensor: Any) -> bool:
    return str(getattr(tensor, "dtype", "")).endswith("float64")  # torch.float64, float64, <dtype: 'float64'>


def _dtype(tensor: Any) -> str:
    from keras import backend

    return str(backend.standardize_dtype(tensor.dtype))


__all__ = ["KerasBackend"]

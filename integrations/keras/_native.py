"""The only backend-specific code of the Keras integration (torch, jax, tensorflow).

Everything else goes through ``keras.ops`` and public Keras APIs. Each function degrades to the
backend-independent answer for a backend it does not know (``None`` from the fast paths below
means: use the ``keras.ops`` path).

Fast paths on torch: a ``keras.ops`` call costs tens of microseconds of Python (argument
conversion, symbolic checks) where the raw torch op costs a few, so the reduction columns
(:func:`torch_columns`), the weight snapshots and the weight deltas of the update ratios
(:func:`copy_values`, :func:`subtract_values`) call torch directly there.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Sequence
from typing import Any

import keras
import numpy as np


def backend_name() -> str:
    return str(keras.backend.backend())


@functools.lru_cache(maxsize=None)
def _float64_supported(name: str) -> bool:
    if name == "jax":
        import jax

        return bool(jax.config.jax_enable_x64)
    return name in ("torch", "tensorflow", "numpy")


def float64_supported() -> bool:
    """Can reductions run in float64 on the device? (jax only with ``jax_enable_x64``.)"""
    return _float64_supported(backend_name())


def is_concrete(tensor: Any) -> bool:
    """False for symbolic values (a ``KerasTensor``, a jax tracer, a tf graph tensor): what a
    compiled (``jit_compile``) train step passes around while it is traced."""
    if isinstance(tensor, keras.KerasTensor):
        return False
    name = backend_name()
    if name == "jax":
        import jax

        return not isinstance(tensor, jax.core.Tracer)
    if name == "tensorflow":
        import tensorflow as tf

        return not tf.is_symbolic_tensor(tensor)
    return True


def no_grad() -> contextlib.AbstractContextManager[Any]:
    """Keep reductions out of autograd (torch records every op on a parameter otherwise)."""
    if backend_name() == "torch":
        import torch

        return torch.no_grad()
    return contextlib.nullcontext()


def sync_variables(model: Any) -> None:
    """Make ``variable.value`` current: jax's trainer keeps the training state outside the model's
    variables between epochs unless a callback asks for it (Keras's ``jax_state_sync``)."""
    sync = getattr(model, "jax_state_sync", None)
    if callable(sync):
        sync()


def optimizer_capture_supported() -> bool:
    """Gradients, update ratios and the learning rate are read around the optimizer step; jax's
    trainer keeps that state outside the model's variables (purged), and reading it there breaks
    the fit, so on jax they are not captured."""
    return backend_name() != "jax"


# ---------------------------------------------------------------------------------- torch fast paths
_EXACT_COUNT = 1 << 24  # a float32 sum of 0/1 values is exact below this many elements
_HOST = 1 << 13  # tensors with fewer elements travel to the host and are reduced there in float64

Slot = tuple[int, int]  # (index, second index or -1) in the joined host results


def has_torch_columns() -> bool:
    """Does :func:`torch_columns` work here (the torch backend)?"""
    return backend_name() == "torch"


def torch_columns(tensors: Sequence[Any], wanted: Sequence[Sequence[Any]], dtype: str) -> list[np.ndarray] | None:
    """Per tensor, the values of its ``wanted`` columns (float64 host arrays), or None off torch.

    Column keys are those of ``KerasBackend``: ``"sum"``, ``"abs_sum"``, ``"sumsq"``, ``"min"``,
    ``"max"``, ``"abs_min"``, ``"abs_max"``, ``"ssd"``/``"abs_ssd"`` (sum of squared deviations
    from the mean, two passes), ``"nonzero"``, ``"nonzero_finite"`` (NaN may count as zero),
    ``"nonfinite"`` and ``("gt"|"lt"|"abs_gt", t)`` (counts); tensors must not be empty.

    A tensor of ``_HOST`` elements or more is reduced on its device in ``dtype`` (``"float32"``
    or ``"float64"``), a few raw ops per column, with no copy when it is a permuted view (conv
    outputs): ``min``/``max``/``abs_max`` from one ``aminmax``, sums cascaded (float32 results
    match numpy's float64 to ~1e-7 of the sum of magnitudes), counts as float sums of 0/1 values
    from ``sign`` arithmetic (bool comparisons and ``count_nonzero`` are up to 20x slower on CPU),
    exact. Smaller tensors are joined and copied to the host, where numpy reduces them in float64
    (exact; a handful of numpy calls for all of them instead of a few torch ops each). Their data
    and the device results leave the device in one host copy."""
    if backend_name() != "torch":
        return None
    import torch

    target = torch.float64 if dtype == "float64" else torch.float32
    results: list[Any] = []  # 0-d device results in ``target``
    wide: list[Any] = []  # 0-d device results in float64 (counts over many elements)
    slots: list[list[Slot]] = [[] for _ in tensors]
    small: list[int] = []
    with torch.no_grad():
        for i, (t, keys) in enumerate(zip(tensors, wanted)):
            x = t.detach() if isinstance(t, torch.Tensor) else keras.ops.convert_to_tensor(t)
            if x.numel() < _HOST:
                small.append(i)
            else:
                slots[i] = _tensor_columns(torch, _dense(torch, x, target), keys, results, wide)
        parts = []
        if results:
            parts.append(torch.stack(results).to(torch.float64))
        if wide:
            parts.append(torch.stack(wide))
        raw = [_host_ready(torch, tensors[i]) for i in small]
        if raw and all(r.dtype == raw[0].dtype for r in raw):
            parts.append(torch.cat([r.reshape(-1) for r in raw]).to(torch.float64))
        else:
            parts += [r.reshape(-1).to(torch.float64) for r in raw]
        joined = (torch.cat(parts) if len(parts) > 1 else parts[0]).cpu().numpy() if parts else np.zeros(0)
    n_dev = len(results)
    out: list[np.ndarray] = []
    for slot in slots:
        row = np.empty(len(slot), dtype=np.float64)
        for j, (a, b) in enumerate(slot):
            ia = a if a >= 0 else n_dev + ~a  # negative: an index into ``wide``
            row[j] = np.maximum(abs(joined[ia]), abs(joined[b])) if b >= 0 else joined[ia]  # abs_max; NaN stays NaN
        out.append(row)
    if small:
        sizes = [int(r.numel()) for r in raw]
        values = joined[n_dev + len(wide):]
        host = _host_columns(values, sizes, [wanted[i] for i in small], [_host_float(torch, r.dtype) for r in raw])
        for i, row in zip(small, host):
            out[i] = row
    return out


def _host_ready(torch: Any, t: Any) -> Any:
    x = t.detach() if isinstance(t, torch.Tensor) else keras.ops.convert_to_tensor(t)
    return x.to(torch.float32) if x.dtype == torch.bfloat16 else x


def _host_float(torch: Any, dtype: Any) -> Any:
    """The numpy float type numpy compares an array of ``dtype`` in (NEP 50: a Python threshold
    takes a float array's type; integer and bool arrays compare in float64)."""
    return {torch.float16: np.float16, torch.float32: np.float32}.get(dtype, np.float64)


def _host_columns(values: np.ndarray, sizes: list[int], wanted: list[Sequence[Any]], floats: list[Any]) -> list[np.ndarray]:
    """Columns of tensors laid end to end in ``values`` (float64), with numpy, per segment."""
    n = np.asarray(sizes, dtype=np.float64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)
    keys: list[Any] = list(dict.fromkeys(k for ks in wanted for k in ks))  # every column any of them wants
    memo: dict[str, np.ndarray] = {}

    def seg(x: np.ndarray, ufunc: Any = np.add) -> np.ndarray:
        return ufunc.reduceat(x, starts)

    def absolute() -> np.ndarray:
        if "abs" not in memo:
            memo["abs"] = np.abs(values)
        return memo["abs"]

    def thresholds(t: float) -> np.ndarray:  # per element: t as numpy compares it with that tensor
        per = np.array([float(f(t)) if f is not np.float64 else t for f in floats])
        return np.repeat(per, sizes)

    cols: dict[Any, np.ndarray] = {}
    with np.errstate(all="ignore"):
        for key in keys:
            if key == "sum":
                cols[key] = seg(values)
            elif key == "abs_sum":
                cols[key] = seg(absolute())
            elif key == "sumsq":
                cols[key] = seg(values * values)
            elif key == "min":
                cols[key] = seg(values, np.minimum)
            elif key == "max":
                cols[key] = seg(values, np.maximum)
            elif key == "abs_min":
                cols[key] = seg(absolute(), np.minimum)
            elif key == "abs_max":
                cols[key] = seg(absolute(), np.maximum)
            elif key in ("ssd", "abs_ssd"):
                v = values if key == "ssd" else absolute()
                d = v - np.repeat(seg(v) / n, sizes)
                cols[key] = seg(d * d)
            elif key in ("nonzero", "nonzero_finite"):
                cols[key] = seg((values != 0).astype(np.float64))
            elif key == "nonfinite":
                cols[key] = seg((~np.isfinite(values)).astype(np.float64))
            elif isinstance(key, tuple) and key[0] in ("gt", "lt", "abs_gt"):
                v = absolute() if key[0] == "abs_gt" else values
                hit = v < thresholds(key[1]) if key[0] == "lt" else v > thresholds(key[1])
                cols[key] = seg(hit.astype(np.float64))
            else:
                raise ValueError(f"reduction: unknown column {key!r}")
    return [np.array([cols[k][r] for k in ks], dtype=np.float64) for r, ks in enumerate(wanted)]


def _dense(torch: Any, t: Any, target: Any) -> Any:
    """``t`` (detached) contiguous (a permuted view is permuted back, not copied), in ``target``."""
    x = t
    if not x.is_contiguous():
        y = x.permute(sorted(range(x.dim()), key=x.stride, reverse=True))
        x = y if y.is_contiguous() else x.contiguous()
    return x if x.dtype == target else x.to(target)


def _tensor_columns(torch: Any, x: Any, keys: Sequence[Any], results: list[Any], wide: list[Any]) -> list[Slot]:
    """Queue the device ops of one tensor's columns; return where each lands on the host
    (``~i``: index ``i`` of ``wide``)."""
    n = x.numel()
    memo: dict[str, Any] = {}

    def absolute() -> Any:
        if "abs" not in memo:
            memo["abs"] = x.abs()
        return memo["abs"]

    def total(name: str) -> Any:  # sum of x or |x| (kept: the deviations need it)
        if name not in memo:
            memo[name] = (x if name == "sum" else absolute()).sum()
        return memo[name]

    def put(v: Any) -> int:
        results.append(v)
        return len(results) - 1

    def value(v: Any) -> Slot:
        return (put(v), -1)

    def count(ones: Any) -> Slot:
        """Sum of a 0/1 tensor, exactly."""
        if n >= _EXACT_COUNT and ones.dtype != torch.float64:
            wide.append(ones.sum(dtype=torch.float64))
            return (~(len(wide) - 1), -1)
        return value(ones.sum())

    out: list[Slot] = []
    for key in keys:
        if key in ("min", "max", "abs_max"):
            if "minmax" not in memo:
                lo, hi = torch.aminmax(x)
                memo["minmax"] = (put(lo), put(hi))
            lo_i, hi_i = memo["minmax"]
            out.append((lo_i, -1) if key == "min" else (hi_i, -1) if key == "max" else (lo_i, hi_i))
        elif key in ("sum", "abs_sum"):
            out.append(value(total(key)))
        elif key == "sumsq":
            out.append(value(x.square().sum()))  # cascaded, like every sum here (torch.dot is not)
        elif key == "abs_min":
            out.append(value(absolute().amin()))
        elif key in ("ssd", "abs_ssd"):
            v = x if key == "ssd" else absolute()
            out.append(value(torch.sub(v, total("sum" if key == "ssd" else "abs_sum"), alpha=1.0 / n).square_().sum()))
        elif key == "nonzero":  # |sign(x)| is 1 where x != 0; torch's sign(NaN) is 0, so NaN -> 1 first
            out.append(count(torch.nan_to_num(x, nan=1.0).sign_().abs_()))
        elif key == "nonzero_finite":  # the same, one pass less, NaN counted as zero (for finite tensors)
            out.append(count(torch.sign(x).abs_()))
        elif key == "nonfinite":  # x * 0 is 0 where finite, NaN at NaN and +-Inf
            out.append(count((x * 0).nan_to_num_(nan=1.0)))
        elif isinstance(key, tuple) and key[0] in ("gt", "lt", "abs_gt"):
            # x > t  <=>  sign(x - t) == 1 (the threshold rounded to x's type, as numpy compares):
            # with gradual underflow x - t is never 0 for x != t; NaN gives sign 0, never counted
            sign = ((absolute() if key[0] == "abs_gt" else x) - key[1]).sign_()
            out.append(count(sign.neg_().clamp_min_(0) if key[0] == "lt" else sign.clamp_min_(0)))
        else:
            raise ValueError(f"reduction: unknown column {key!r}")
    return out


def copy_values(values: Sequence[Any]) -> list[Any]:
    """Copies of tensors (weights before an optimizer step), outside autograd (one call on torch)."""
    if backend_name() == "torch":
        import torch

        with torch.no_grad():
            return list(torch._foreach_mul([v.detach() for v in values], 1.0))
    return [keras.ops.copy(v) for v in values]


def subtract_values(after: Sequence[Any], before: Sequence[Any]) -> list[Any]:
    """``after[i] - before[i]`` for every pair, outside autograd (one call on torch)."""
    if backend_name() == "torch":
        import torch

        with torch.no_grad():
            return list(torch._foreach_sub([a.detach() for a in after], list(before)))
    return [keras.ops.subtract(a, b) for a, b in zip(after, before)]


def update_norms(before: Sequence[Any], after: Sequence[Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """``(||after[i] - before[i]||, ||before[i]||)`` as float64 host arrays from three fused calls;
    None off torch or when a norm is not finite (the caller then takes the exact path). Norms
    accumulate in the tensors' float type: ~1e-6 relative, plenty for the update ratio, whose
    thresholds span orders of magnitude."""
    if backend_name() != "torch" or not before:
        return None
    import torch

    with torch.no_grad():
        if any(b.dtype not in (torch.float32, torch.float64) for b in before):
            return None
        norm_before = torch._foreach_norm(list(before))
        norm_delta = torch._foreach_norm(torch._foreach_sub([a.detach() for a in after], list(before)))
        host = torch.stack([*norm_delta, *norm_before]).to(torch.float64).cpu().numpy()
    if not np.isfinite(host).all():
        return None
    return host[: len(before)], host[len(before):]

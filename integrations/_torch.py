"""Torch helpers shared by the torch-based integrations: the reduction backend and the capture
helpers (parameters, gradients, learning rates, update ratios, activation hooks).

Everything here runs on the tensors' own device. The backend reduces *all tensors due at a step in
one call*: one-element tensors (losses, learning rates, metrics) as one stacked vector, larger ones
with fused norms (``torch._foreach_norm``) and one pass per statistic; all results are stacked on
the device and copied to the host once. Nothing here is called on steps that are not saved.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from tripwire._errors import missing_extra

try:
    import torch
    from torch import nn
except ImportError as exc:  # pragma: no cover - exercised only without torch
    raise missing_extra("torch", "lightning", exc) from exc

from tripwire._config import parse_reduction

__all__ = [
    "ActivationCapture",
    "TorchBackend",
    "clean_name",
    "learning_rates",
    "param_kind",
    "snapshot",
    "update_ratios",
]

_ORIG_MOD = re.compile(r"(^|\.)_orig_mod\.")


def clean_name(name: str) -> str:
    """A parameter or module name without the ``_orig_mod.`` that ``torch.compile`` inserts."""
    return _ORIG_MOD.sub(r"\1", name)


def param_kind(name: str) -> str:
    """``biases`` for a parameter whose last name component is ``bias``, else ``weights``."""
    return "biases" if name.rsplit(".", 1)[-1] == "bias" else "weights"


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
    host copy per call. Matches :class:`tripwire.NumpyBackend` on every reduction (computed in
    float64; on MPS, which has no float64, in float32)."""

    name = "torch"

    # -- protocol -----------------------------------------------------------------------------
    def numel(self, tensor: Any) -> int:
        return int(tensor.numel())

    def to_numpy(self, tensor: Any) -> np.ndarray:
        t = tensor.detach()
        if t.dtype == torch.bfloat16:
            t = t.float()
        return t.cpu().numpy()

    def reduce(self, tensors: Sequence[Any], reductions: Sequence[str]) -> np.ndarray:
        out = np.empty((len(tensors), len(reductions)), dtype=np.float64)
        if not tensors or not reductions:
            return out
        by_device: dict[Any, list[int]] = {}
        for i, t in enumerate(tensors):
            by_device.setdefault(t.device, []).append(i)
        for device, idx in by_device.items():
            out[idx] = self._reduce_device([tensors[i] for i in idx], list(reductions), device)
        return out

    def histogram(self, tensor: Any, bins: int, value_range: tuple[float, float] | None) -> tuple[np.ndarray, np.ndarray]:
        """``numpy.histogram`` over the finite values, reproduced step by step on the device (same
        bin dtype, same edge arithmetic, same boundary corrections), so counts match exactly."""
        x = tensor.detach().reshape(-1)
        if x.dtype == torch.bfloat16:
            x = x.float()
        if not x.dtype.is_floating_point:
            x = x.to(torch.float64 if x.device.type != "mps" else torch.float32)
        x = x[torch.isfinite(x)]
        if value_range is None:
            if x.numel() == 0:
                lo, hi = 0.0, 1.0
            else:
                mn, mx = torch.aminmax(x)
                lo, hi = (float(v) for v in torch.stack((mn, mx)).tolist())
                if lo == hi:
                    lo, hi = lo - 0.5, hi + 0.5
        else:
            lo, hi = float(value_range[0]), float(value_range[1])
        dtype = x.dtype
        step = (hi - lo) / bins
        edges64 = torch.arange(bins + 1, dtype=torch.float64) * step + lo
        edges64[-1] = hi
        edges = edges64.to(dtype).to(x.device)
        lo_t = _threshold_for(lo, dtype)
        hi_t = _threshold_for(hi, dtype)
        x = x[(x >= lo_t) & (x <= hi_t)]
        if x.numel() == 0:
            return np.zeros(bins, dtype=np.int64), edges.to(torch.float64).cpu().numpy()
        # f_indices = float32(x - float32(lo)) / float64(hi - lo) * bins  (numpy's promotion rules)
        diff = (x - lo_t).to(torch.float64 if x.device.type != "mps" else torch.float32)
        idx = (diff / (hi - lo) * bins).to(torch.int64)
        idx = torch.where(idx == bins, idx - 1, idx)
        idx = idx - (x < edges[idx]).to(torch.int64)
        idx = idx + ((x >= edges[idx + 1]) & (idx != bins - 1)).to(torch.int64)
        counts = torch.bincount(idx, minlength=bins)
        return counts.cpu().numpy().astype(np.int64), edges.to(torch.float64).cpu().numpy()

    # -- batched reductions -------------------------------------------------------------------
    def _reduce_device(self, tensors: list[Any], reductions: list[str], device: Any) -> np.ndarray:
        """One device's tensors: one-element tensors as one stacked vector, larger ones per tensor
        with fused norms (``torch._foreach_norm``) and one pass per statistic (mean, two-pass variance,
        ``aminmax``, ``count_nonzero``, comparisons); every result is stacked on the device and
        copied to the host once. Non-finite counts are computed exactly only for tensors whose
        L2 norm is not finite (a second, rare copy)."""
        parsed = [parse_reduction(r) for r in reductions]
        out = np.full((len(tensors), len(reductions)), np.nan, dtype=np.float64)
        numels = [int(t.numel()) for t in tensors]
        for j, (base, _) in enumerate(parsed):
            if base == "numel":
                out[:, j] = numels
            elif base == "nonfinite_count":
                out[:, j] = 0.0
        scalars = [i for i, n in enumerate(numels) if n == 1]
        large = [i for i, n in enumerate(numels) if n > 1]
        with torch.no_grad():
            rows: list[tuple[list[int], torch.Tensor]] = []
            if scalars:
                rows.append((scalars, self._reduce_scalars([tensors[i] for i in scalars], parsed)))
            flagged: list[int] = []
            if large:
                values, probe = self._reduce_large([tensors[i] for i in large], parsed)
                rows.append((large, values))
            host = [r.to("cpu", torch.float64).numpy() if r.numel() else None for _, r in rows]
            for (idx, _), vals in zip(rows, host):
                if vals is not None:
                    out[idx] = vals
            for j, (base, _) in enumerate(parsed):
                if base == "numel":
                    out[:, j] = numels
                elif base == "nonfinite_count" and large:
                    out[large, j] = 0.0
            if large and probe is not None:
                finite = probe.cpu().numpy()
                flagged = [large[k] for k in np.flatnonzero(~finite)]
            nf_cols = [j for j, (b, _) in enumerate(parsed) if b == "nonfinite_count"]
            if flagged and nf_cols:
                counts = torch.stack([(~torch.isfinite(tensors[i].detach())).sum() for i in flagged]).cpu().numpy()
                for j in nf_cols:
                    out[flagged, j] = counts
        return out

    @staticmethod
    def _work(t: torch.Tensor) -> torch.Tensor:
        """Float32 for float32/bf16/fp16, float64 for float64 and integers (exact)."""
        t = t.detach()
        if t.dtype in (torch.float32, torch.float64):
            return t
        if t.dtype in (torch.bfloat16, torch.float16):
            return t.float()
        return t.to(torch.float64 if t.device.type != "mps" else torch.float32)

    def _reduce_scalars(self, tensors: list[torch.Tensor], parsed: list[tuple[str, float | None]]) -> torch.Tensor:
        if len({t.dtype for t in tensors}) == 1:
            v = self._work(torch.stack([t.detach().reshape(()) for t in tensors]))
        else:
            ws = [self._work(t).reshape(()) for t in tensors]
            wdt = torch.float64 if any(w.dtype == torch.float64 for w in ws) else torch.float32
            v = torch.stack([w.to(wdt) for w in ws])
        finite = torch.isfinite(v)
        zero = torch.zeros_like(v)
        nan = torch.full_like(v, float("nan"))
        cols: list[torch.Tensor] = []
        for base, thr in parsed:
            if base in ("numel", "nonfinite_count"):
                col = zero  # filled on the host / below
                if base == "nonfinite_count":
                    col = (~finite).to(v.dtype)
            elif base in ("min", "max", "mean", "sum"):
                col = v
            elif base in ("std", "variance", "abs_std", "abs_variance"):
                col = torch.where(finite, zero, nan)
            elif base in ("l1", "l2", "abs_min", "abs_max", "abs_mean", "abs_sum"):
                col = v.abs()
            elif base == "zero_fraction":
                col = (v == 0).to(v.dtype)
            elif base == "positive_fraction":
                col = (v > 0).to(v.dtype)
            elif thr is not None:
                t = self._thresholds(tensors, thr, v)
                x = v.abs() if base == "fraction_abs_gt" else v
                col = ((x < t) if base == "fraction_lt" else (x > t)).to(v.dtype)
            else:
                raise ValueError(f"reduction: unknown reduction {base!r}")
            cols.append(col)
        return torch.stack(cols, dim=1)

    @staticmethod
    def _thresholds(tensors: list[torch.Tensor], thr: float, like: torch.Tensor) -> torch.Tensor | float:
        per = [_threshold_for(thr, t.dtype) for t in tensors]
        if len(set(per)) == 1:
            return per[0]
        return torch.tensor(per, dtype=like.dtype, device=like.device)

    def _reduce_large(self, tensors: list[torch.Tensor], parsed: list[tuple[str, float | None]]) -> tuple[torch.Tensor, torch.Tensor | None]:
        bases = {b for b, _ in parsed}
        xs = [self._work(t).reshape(-1) for t in tensors]
        l1 = _l1_norms(xs) if bases & {"l1", "abs_sum", "abs_mean"} else None
        # the L2 norm is also the probe for non-finite values (NaN/Inf make it non-finite)
        l2 = _foreach_norms(xs, 2) if bases & {"l2", "nonfinite_count"} else None
        need_mean = bool(bases & {"mean", "sum", "std", "variance"})
        need_var = bool(bases & {"std", "variance"})
        need_mm = bool(bases & {"min", "max", "abs_max"})
        need_abs = bool(bases & {"abs_min", "abs_std", "abs_variance"}) or any(b == "fraction_abs_gt" for b, _ in parsed)
        rows: list[torch.Tensor] = []
        for k, (t, x) in enumerate(zip(tensors, xs)):
            n = x.numel()
            acc = torch.float64 if x.device.type != "mps" else torch.float32

            zero = torch.zeros((), dtype=acc, device=x.device)

            def frac(count: torch.Tensor) -> torch.Tensor:
                return count.to(acc) / n

            stats: dict[str, torch.Tensor] = {}
            if need_mean:
                stats["mean"] = x.mean(dtype=acc)
            if need_var:
                stats["variance"] = _variance(x, stats["mean"], acc)
            if need_mm:
                stats["min"], stats["max"] = torch.aminmax(x)
            ax = x.abs() if need_abs else None
            cols: list[torch.Tensor] = []
            for base, thr in parsed:
                if base in ("numel", "nonfinite_count"):
                    col = zero  # filled on the host
                elif base == "mean":
                    col = stats["mean"]
                elif base == "sum":
                    col = stats["mean"] * n
                elif base == "variance":
                    col = stats["variance"]
                elif base == "std":
                    col = stats["variance"].sqrt()
                elif base in ("min", "max"):
                    col = stats[base]
                elif base == "l1" or base == "abs_sum":
                    col = l1[k]  # type: ignore[index]
                elif base == "l2":
                    col = l2[k]  # type: ignore[index]
                elif base == "abs_mean":
                    col = l1[k] / n  # type: ignore[index]  (float64 vector)
                elif base == "abs_max":
                    col = torch.maximum(stats["max"], -stats["min"])  # NaN propagates
                elif base == "abs_min":
                    col = ax.min()  # type: ignore[union-attr]
                elif base in ("abs_variance", "abs_std"):
                    var = _variance(ax, ax.mean(dtype=acc), acc)  # type: ignore[union-attr]
                    col = var if base == "abs_variance" else var.sqrt()
                elif base == "zero_fraction":
                    col = frac(n - torch.count_nonzero(x))
                elif base == "positive_fraction":
                    col = frac((x > 0).sum())
                elif thr is not None:
                    tt = _threshold_for(thr, t.dtype)
                    if base == "fraction_gt":
                        col = frac((x > tt).sum())
                    elif base == "fraction_lt":
                        col = frac((x < tt).sum())
                    else:
                        col = frac((ax > tt).sum())  # type: ignore[operator]
                else:
                    raise ValueError(f"reduction: unknown reduction {base!r}")
                cols.append(col if col.dtype == acc else col.to(acc))
            rows.append(torch.stack(cols))
        probe = torch.isfinite(l2) if (l2 is not None and "nonfinite_count" in bases) else None
        return torch.stack(rows), probe


def _variance(x: torch.Tensor, mean: torch.Tensor, acc: torch.dtype) -> torch.Tensor:
    """Two-pass population variance ``mean((x - mean)^2)``, as numpy computes it (NaN when the
    mean is not finite)."""
    d = x - mean.to(x.dtype)
    return torch.dot(d, d).to(acc) / x.numel()


def _l1_norms(xs: list[torch.Tensor]) -> torch.Tensor:
    if xs and xs[0].device.type == "cpu":  # torch's CPU L1 norm kernel is slower than abs + sum
        return torch.stack([x.abs().sum(dtype=torch.float64) for x in xs])
    return _foreach_norms(xs, 1)


def _foreach_norms(xs: list[torch.Tensor], ord: int) -> torch.Tensor:
    """Norms of many tensors in one fused call, as one float64 vector."""
    by_dtype: dict[torch.dtype, list[int]] = {}
    for i, x in enumerate(xs):
        by_dtype.setdefault(x.dtype, []).append(i)
    out: list[torch.Tensor | None] = [None] * len(xs)
    for idx in by_dtype.values():
        norms = torch._foreach_norm([xs[i] for i in idx], ord)
        for i, v in zip(idx, norms):
            out[i] = v
    return torch.stack([v.to(torch.float64 if v.device.type != "mps" else torch.float32) for v in out])  # type: ignore[union-attr]


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


def snapshot(params: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Copies of ``params`` on their device (one fused call)."""
    if not params:
        return []
    with torch.no_grad():
        return list(torch._foreach_mul([p.detach() for p in params], 1.0))


def update_ratios(before: Sequence[torch.Tensor], after: Sequence[torch.Tensor]) -> torch.Tensor:
    """``||after - before|| / ||before||`` per parameter, as one device vector (fused norms)."""
    with torch.no_grad():
        after = [a.detach() for a in after]
        delta = torch._foreach_sub(after, list(before))
        num = torch.stack(torch._foreach_norm(delta))
        den = torch.stack(torch._foreach_norm(list(before)))
        return num / den


_ACT_INPUT_TYPES: tuple[type, ...] = (nn.ReLU, nn.Tanh, nn.Sigmoid)


class ActivationCapture:
    """Forward hooks that exist only while a save step runs.

    ``attach(module, want_outputs, want_inputs, want_relu)`` registers hooks on the module's leaf
    submodules; each hook keeps (detached, by reference) the layer output as ``<layer>/output``
    and, for ReLU/Tanh/Sigmoid layers, the input as ``<layer>/input``. ``detach()`` removes the
    hooks. Only the first call of each layer per attachment is kept (gradient accumulation,
    layers called twice). Modules compiled with ``torch.compile`` run their compiled graph and do
    not call Python hooks: nothing is captured for them.
    """

    def __init__(self) -> None:
        self._handles: list[Any] = []
        self.outputs: dict[str, torch.Tensor] = {}
        self.relu_outputs: dict[str, torch.Tensor] = {}
        self.inputs: dict[str, torch.Tensor] = {}

    @property
    def attached(self) -> bool:
        return bool(self._handles)

    def attach(self, module: nn.Module, *, outputs: bool, inputs: bool, relu: bool,
               select: Callable[[str, str], bool] | None = None) -> None:
        self.detach()
        self.outputs, self.relu_outputs, self.inputs = {}, {}, {}
        for raw_name, sub in module.named_modules():
            if raw_name == "" or any(True for _ in sub.children()):
                continue
            name = clean_name(raw_name)
            is_act = isinstance(sub, _ACT_INPUT_TYPES)
            want_out = outputs and (select is None or select(f"{name}/output", "activations"))
            want_relu = relu and isinstance(sub, nn.ReLU) and (select is None or select(f"{name}/output", "relu_outputs"))
            want_in = inputs and is_act and (select is None or select(f"{name}/input", "activation_inputs"))
            if want_out or want_relu or want_in:
                self._handles.append(sub.register_forward_hook(self._hook(name, want_out, want_relu, want_in)))

    def _hook(self, name: str, want_out: bool, want_relu: bool, want_in: bool) -> Callable[..., None]:
        key_out, key_in = f"{name}/output", f"{name}/input"

        def hook(_module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
            if isinstance(output, torch.Tensor):
                if want_out and key_out not in self.outputs:
                    self.outputs[key_out] = output.detach()
                if want_relu and key_out not in self.relu_outputs:
                    self.relu_outputs[key_out] = output.detach()
            if want_in and args and isinstance(args[0], torch.Tensor) and key_in not in self.inputs:
                self.inputs[key_in] = args[0].detach()

        return hook

    def detach(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def take(self) -> Iterator[tuple[str, torch.Tensor, tuple[str, ...]]]:
        """What was captured: ``(name, tensor, kinds)``; a ReLU output is one tensor offered under
        ``activations`` and ``relu_outputs``. Clears the buffers."""
        for name, t in self.outputs.items():
            kinds = ("activations", "relu_outputs") if name in self.relu_outputs else ("activations",)
            yield name, t, kinds
        for name, t in self.relu_outputs.items():
            if name not in self.outputs:
                yield name, t, ("relu_outputs",)
        for name, t in self.inputs.items():
            yield name, t, ("activation_inputs",)
        self.outputs, self.relu_outputs, self.inputs = {}, {}, {}


def offer(plan: Any, name: str, tensor: Any, kinds: Iterable[str]) -> bool:
    """Offer one tensor under several kinds at once (one pending entry, the union of the
    collections), so a ReLU output is reduced once for ``activations`` and ``relu_outputs``."""
    kinds = tuple(kinds)
    if len(kinds) == 1:
        return bool(plan.add(name, tensor, kinds[0]))
    cols: list[Any] = []
    for kind in kinds:
        for c in plan.select(name, kind):
            if all(c is not d for d in cols):
                cols.append(c)
    if cols:
        plan._pending.append((name, tensor, tuple(cols)))
    return bool(cols)

"""The only backend-specific code of the Keras integration (torch, jax, tensorflow).

Everything else goes through ``keras.ops`` and public Keras APIs. Each function degrades to the
backend-independent answer for a backend it does not know (``None`` from the fast paths below
means: use the ``keras.ops`` path).

Fast paths on torch: a ``keras.ops`` call costs tens of microseconds of Python (argument
conversion, symbolic checks) where the raw torch op costs a few, so the weight snapshots and the
weight deltas of the update ratios (:func:`copy_values`, :func:`subtract_values`,
:func:`update_norms`) call torch directly there, and reductions go to the torch integration's
``TorchBackend`` (:func:`torch_backend`), the one Lightning uses.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
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


def detach(tensor: Any) -> Any:
    """``tensor`` outside autograd, sharing its memory (no copy, no device synchronisation): a
    loss kept past its step must not keep that step's graph alive."""
    if backend_name() == "torch":
        return tensor.detach()
    return keras.ops.stop_gradient(tensor)


def step_compiled(model: Any) -> bool:
    """Does ``model``'s train or test step run compiled, handing tripwire's wrappers symbolic values
    (or, once traced, running no Python at all)? jax: ``jit_compile`` (Keras's default there) unless
    ``run_eagerly``; tensorflow: unless ``run_eagerly`` (a ``tf.function``); torch: never (its
    ``jit_compile`` traces the wrappers with TorchDynamo, which keeps their captures)."""
    name = backend_name()
    eager = bool(getattr(model, "run_eagerly", False))
    if name == "jax":
        return bool(getattr(model, "jit_compile", False)) and not eager
    if name == "tensorflow":
        return not eager
    return False


def loss_tracker(model: Any) -> Any:
    """The ``Mean`` that makes ``model``'s ``loss`` log: Keras's own loss tracker
    (``model._loss_tracker``) where it is among ``model.metrics``; else a ``keras.metrics.Mean`` named
    ``loss`` among them, a custom ``train_step``'s own (Keras's "customizing fit()" guides keep one,
    ``self.loss_tracker = keras.metrics.Mean(name="loss")``, list it in a ``metrics`` property of their
    own and log its result as ``loss``; trial 31a F5: Keras's, which that step never updates, was read);
    else Keras's own as it is (None where the model has none). Which one makes the log is checked at
    each step against the log itself (the callback's ``_same_mean``)."""
    own = getattr(model, "_loss_tracker", None)
    try:
        metrics = list(getattr(model, "metrics", None) or [])
    except Exception:  # noqa: BLE001 - (a metrics property of the user's that raises: Keras's own tracker)
        return own
    if own is not None and any(m is own for m in metrics):
        return own
    named = [m for m in metrics if isinstance(m, keras.metrics.Mean) and getattr(m, "name", None) == "loss"
             and getattr(m, "total", None) is not None and getattr(m, "count", None) is not None]
    return named[0] if len(named) == 1 else own


def loss_tracker_reader(model: Any) -> Callable[[], tuple[float, float] | None] | None:
    """A function reading ``(total, count)`` of the loss tracker (:func:`loss_tracker`: the ``Mean``
    that makes the ``loss`` log: ``total`` the sum of each batch's loss times its weight, ``count``
    the sum of the weights, reset at each epoch's start) as the step that just ended left them, as
    host floats; None where the model has no such tracker (compiled without a loss). On jax the
    trainer keeps the metrics' state outside their variables during an epoch (purged) and hands
    callbacks the current one in ``model._jax_state``: read there (two scalars, one host read per
    step), else from the variables. The function returns None where neither can be read."""
    tracker = loss_tracker(model)
    total, count = getattr(tracker, "total", None), getattr(tracker, "count", None)
    if total is None or count is None:
        return None
    variables = list(getattr(model, "metrics_variables", None) or [])
    where = [next((i for i, v in enumerate(variables) if v is w), None) for w in (total, count)]
    jax = backend_name() == "jax"

    def read() -> tuple[float, float] | None:
        state = getattr(model, "_jax_state", None) if jax else None
        values = state.get("metrics_variables") if isinstance(state, dict) else None
        try:
            if values is not None and len(values) == len(variables) and None not in where:
                return float(values[where[0]]), float(values[where[1]])  # type: ignore[index]
            return to_float(total), to_float(count)
        except Exception:  # noqa: BLE001 - (a variable purged by the trainer, a state of another layout): None, said by the caller
            return None

    return read


def optimizer_capture_supported() -> bool:
    """Gradients, update ratios, the learning rate and the batch loss are read around the optimizer
    step (the batch loss where the train step hands it to ``optimizer.scale_loss``); jax's
    trainer keeps that state outside the model's variables (purged), and reading it there breaks
    the fit, so on jax they are not captured (the batch loss is recovered from the loss tracker
    there instead: :func:`loss_tracker_reader`)."""
    return backend_name() != "jax"


# ---------------------------------------------------------------------------------- torch fast paths
def torch_backend() -> Any:
    """A new :class:`tripwire.integrations._torch.TorchBackend` on the torch backend, else None."""
    if backend_name() != "torch":
        return None
    from .._torch import TorchBackend

    return TorchBackend()


def as_torch(tensor: Any) -> Any:
    """The torch tensor behind a Keras tensor or variable on the torch backend."""
    import torch

    return tensor if isinstance(tensor, torch.Tensor) else keras.ops.convert_to_tensor(tensor)


def to_float(value: Any) -> float:
    """A scalar tensor or variable as a Python float: one host read (on torch without Keras's
    conversion, which costs tens of microseconds)."""
    if backend_name() == "torch":
        import torch

        tensor = getattr(value, "value", value)  # a Keras variable's torch tensor
        if isinstance(tensor, torch.Tensor):
            return float(tensor.detach())
    return float(keras.ops.convert_to_numpy(value))


def copy_values(values: Sequence[Any], into: Sequence[Any] | None = None) -> list[Any]:
    """Copies of tensors (weights before an optimizer step), outside autograd. On torch one fused
    call, into ``into`` (the copies of the last step) when the shapes match: a fresh
    multi-megabyte buffer on CPU page-faults at every step."""
    if backend_name() == "torch":
        from .._torch import snapshot

        return snapshot(list(values), into=into)
    return [keras.ops.copy(v) for v in values]


def subtract_values(after: Sequence[Any], before: Sequence[Any]) -> list[Any]:
    """``after[i] - before[i]`` for every pair, outside autograd (one call on torch)."""
    if backend_name() == "torch":
        import torch

        with torch.no_grad():
            return list(torch._foreach_sub([a.detach() for a in after], list(before)))
    return [keras.ops.subtract(a, b) for a, b in zip(after, before)]


def update_norms(before: Sequence[Any], after: Sequence[Any],
                 exact: Callable[[list[Any]], np.ndarray]) -> np.ndarray:
    """``[||after[i] - before[i]|| ..., ||before[i]|| ...]`` (float64, ``2 * len(before)`` values).
    On torch from fused calls that overwrite ``before`` (the caller's own copies) with ``before -
    after``: no new buffer (a fresh multi-megabyte one page-faults on CPU at every step). Norms
    accumulate in the tensors' float type (~1e-6 relative, plenty for the update ratio, whose
    thresholds span orders of magnitude); where one is not finite, or off torch, ``exact`` (the
    backend's l2 of a list of tensors) computes them all."""
    if backend_name() != "torch" or not before:
        return exact(subtract_values(after, before) + list(before))
    import torch

    with torch.no_grad():
        before = list(before)
        after = [a.detach() for a in after]
        if any(b.dtype not in (torch.float32, torch.float64) for b in before):
            return exact(subtract_values(after, before) + before)
        norm_before = torch._foreach_norm(before)
        torch._foreach_sub_(before, after)  # before - after: the delta's norm
        norm_delta = torch._foreach_norm(before)
        host = torch.stack([*norm_delta, *norm_before]).to(torch.float64).cpu().numpy()
        if np.isfinite(host).all():
            return host
        return exact(before + list(torch._foreach_add(after, before)))  # (after + (before - after): before)


def value_fingerprint(values: Sequence[Any]) -> np.ndarray:
    """Two statistics of each tensor, ``[l2 ..., sum ...]`` (float64 on the host, ``2 * len(values)``
    values: one small host copy, no copy of the tensors): the weights' fingerprint that tells whether
    a later fit continues the model. The norm alone took other weights with the same norms (every
    weight's sign flipped, two layers of one shape swapped) for the same (trial 25h); the sum
    changes with a sign flip or a swap. On torch one fused ``_foreach_norm`` and a sum per tensor
    accumulated in float64 (a tensor that is not float, an integer counter, is read as float64);
    elsewhere ``keras.ops`` in float32. Taken at a fit's start and end only, never per step."""
    if backend_name() == "torch":
        import torch

        with torch.no_grad():
            tensors = [as_torch(v).detach() for v in values]
            tensors = [t if t.is_floating_point() else t.to(torch.float64) for t in tensors]
            if not tensors:
                return np.zeros(0, dtype=np.float64)
            norms = [n.to(torch.float64) for n in torch._foreach_norm(tensors)]
            sums = [t.sum(dtype=torch.float64) for t in tensors]
            return torch.stack([*norms, *sums]).cpu().numpy()
    if not values:
        return np.zeros(0, dtype=np.float64)
    ops = keras.ops
    cast = [ops.cast(v, "float32") for v in values]
    stats = [ops.sqrt(ops.sum(ops.square(v))) for v in cast] + [ops.sum(v) for v in cast]
    return np.asarray(ops.convert_to_numpy(ops.stack(stats)), dtype=np.float64)

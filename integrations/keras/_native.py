"""The only backend-specific code of the Keras integration (torch, jax, tensorflow).

Everything else goes through ``keras.ops`` and public Keras APIs. Each function degrades to the
backend-independent answer for a backend it does not know.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

import keras


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

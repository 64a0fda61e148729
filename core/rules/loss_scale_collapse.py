"""Loss scale collapse: fp16 mixed precision's loss scale has fallen below ``min_scale``.

Condition: ``loss_scale < min_scale`` at a save step (a NaN scale counts as below it), on ``patience``
consecutive saves, where ``loss_scale`` is the ``optimizer`` tensor ``loss_scale``: the loss scale of
fp16 mixed precision at that step, as the integrations record it (the Lightning callback:
``scaler.get_scale()`` of the precision plugin's ``torch.amp.GradScaler``; the Keras callback: a
``LossScaleOptimizer``'s ``dynamic_scale``; a hand-written loop offers ``scaler.get_scale()`` as
``loss_scale``, kind ``optimizer``).

A dynamic loss scaler skips every step whose unscaled gradients are not finite and halves its scale
there (GradScaler's default ``backoff_factor`` 0.5; Keras's ``LossScaleOptimizer`` always halves);
after a run of finite steps it doubles it (GradScaler: every 2000 steps, Keras:
``dynamic_growth_steps``, 2000). A healthy run overflows on a few steps at the initial scale (2^16 in
PyTorch, 2^15 in Keras) and settles far above 1. A scale below 1 scales the loss down, not up: the
scaler got there by skipping step after step, because the gradients were not finite (or overflowed
fp16) even unscaled. A skipped step applies no update. tripwire captures no gradient and no update
ratio at a step the scaler skips (they are never applied), so the gradient rules have nothing to
read, and the loss stays flat where every step is skipped: without this rule such a run was only
named by ``loss_not_decreasing``, 50 steps in, blaming the learning rate (trial 30a: a
``torch.where(w > 10, torch.sqrt(w), 0)`` whose gradient is NaN at every step, the scale at 2.9e-11
after 51 steps).

The message gives the scale and, where this training's first recorded scale is above it by a whole
power of 2, ``k`` (where the scaler halves it at each skip, at least ``k`` steps were skipped since
then: each halves the scale, each growth doubles it), and says that the weights have not moved since
only where every step since was skipped (``k`` at least the steps between the two records); else it
says at least ``k`` of them were, no more (trial 30i F2: it said "every step" and "the weights do not
move" where 3 of 21 steps were applied). It names no framework's function or option (the rule does
not know which framework recorded the scale): the causes are given as operations (sqrt, log, a
division at 0, a ``where`` whose untaken branch has a NaN gradient). Its requirement is optional: a
run without a loss scaler (fp32, bf16) records none, and the rule is not named as having had nothing
to read.

Defaults: ``min_scale=1.0`` (finite, > 0), ``patience=1``, mode ``train``, severity ``critical``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._errors import ConfigError
from .._history import History
from .._validate import check_float
from ._base import Requirement
from ._common import NO_DATA, BuiltinRule, fmt, value_at
from ._registry import register_rule

#: The name of the loss scale in the ``optimizer`` collection (every integration records it so).
LOSS_SCALE = "loss_scale"


def scale_text(scale: float) -> str:
    """A loss scale for messages: a whole number as it is (``65536``), another with 3 significant
    digits, and ``(2^k)`` where it is a power of 2 (``65536 (2^16)``, ``0.0625 (2^-4)``)."""
    if not math.isfinite(scale) or scale <= 0:
        return fmt(scale)
    shown = str(int(scale)) if scale == int(scale) and scale < 1e15 else fmt(scale)
    k = math.log2(scale)
    return f"{shown} (2^{int(k)})" if k == int(k) else shown


@register_rule
class LossScaleCollapse(BuiltinRule):
    """fp16's dynamic loss scale below ``min_scale`` (see the module docstring)."""

    name = "loss_scale_collapse"
    summary = "fp16 mixed precision's loss scale collapsed: the scaler skipped step after step (non-finite gradients)"
    default_modes = ("train",)
    default_severity = "critical"

    def __init__(self, min_scale: float = 1.0, patience: int = 1, **common: Any) -> None:
        super().__init__(patience=patience, **common)
        # (> 0: a scale is above 0, so min_scale 0 would never fire; finite: inf would fire on every scale)
        self.min_scale = check_float(min_scale, f"{self.name}.min_scale", minimum=0.0, min_inclusive=False)
        if math.isinf(self.min_scale):
            raise ConfigError(f"{self.name}.min_scale: got {min_scale!r}; accepted: a finite number > 0 (an infinite "
                              f"limit holds whatever the scale)")

    def requirements(self) -> list[Requirement]:
        # optional: a run without a loss scaler records none, and the rule had nothing to read there by design
        return [Requirement("optimizer", reductions=("raw",), modes=("train",), optional=True)]

    def check(self, history: History, step: int, mode: str) -> Any:
        if not history.has_tensor(LOSS_SCALE):
            return NO_DATA
        seen = False
        for worker in self.workers(history):
            scale = value_at(history, LOSS_SCALE, "raw", step, mode, worker)
            if scale is None:
                continue
            seen = True
            if scale >= self.min_scale:
                continue
            return self.finding(
                step, mode, self._message(history, step, mode, worker, float(scale)),
                tensors=[LOSS_SCALE], scale=float(scale), worker=worker, **self._skipped(history, step, mode, worker,
                                                                                          float(scale)),
            )
        return None if seen else NO_DATA

    def _skipped(self, history: History, step: int, mode: str, worker: int, scale: float) -> dict[str, Any]:
        """``{"skipped": k, "since": s0, "first_scale": x0}`` where this training's first recorded
        scale ``x0`` (at step ``s0``, before ``step``) is ``2^k`` times ``scale`` (``k`` a whole
        number >= 1): with the default backoff 0.5 at least ``k`` steps were skipped since ``s0``; else {}."""
        steps, values = self.this_training(*history.finite_series(LOSS_SCALE, "raw", mode, worker), mode)
        earlier = np.flatnonzero(steps < step)
        if not len(earlier) or not math.isfinite(scale) or scale <= 0:
            return {}
        first, at = float(values[earlier[0]]), int(steps[earlier[0]])
        if first <= scale:
            return {}
        k = math.log2(first / scale)
        if abs(k - round(k)) > 1e-9:
            return {}
        return {"skipped": int(round(k)), "since": at, "first_scale": first}

    def _message(self, history: History, step: int, mode: str, worker: int, scale: float) -> str:
        known = self._skipped(history, step, mode, worker, scale)
        if known:
            k, since, first = known["skipped"], known["since"], known["first_scale"]
            counted = (f"every one of the {step - since} optimizer steps since then was skipped: the weights have not "
                       f"moved since" if k >= step - since else
                       f"at least {k} of the {step - since} optimizer steps since then were skipped")
            skips = (f"; it was {scale_text(first)} at step {since}: the loss scaler halves it (by default) at "
                     f"each step it skips, so {counted}")
        else:
            skips = ""
        low = ("A scale below 1 is reached only by skipping step after step: the gradients were not finite, or "
               "overflowed fp16, even unscaled." if not scale >= 1 else
               "The scaler lowers its scale only at steps it skips: their gradients were not finite or overflowed fp16.")
        return (f"the loss scale of fp16 mixed precision is {scale_text(scale)} (loss_scale; limit "
                f"min_scale={fmt(self.min_scale)}){skips}. {low} A skipped step applies no "
                "update, and tripwire captures no gradient and no update ratio there, so the gradient rules have "
                "nothing to read. Usual causes: a NaN or an infinity in the backward pass (sqrt, log or a division "
                "at 0, even in the branch a where(...) does not take: its gradient is NaN and reaches the weights "
                "through the where), values beyond fp16's range (65504) in the forward or backward pass (an "
                "unnormalised input, a sum over many elements, a softmax or exp computed in fp16), or a learning "
                "rate far too high. Train a few steps in float32 (without the scaler) to see the non-finite "
                "gradients: exploding_tensor names the first.")

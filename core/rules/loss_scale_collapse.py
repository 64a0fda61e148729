"""Loss scale collapse: fp16 mixed precision's loss scaler skips step after step, its scale below ``min_scale``.

Condition: ``s_t < min_scale`` and ``s_t <= s_p * 2^-(t - p)`` at a save step ``t`` (a NaN scale counts
as below the limit), on ``patience`` consecutive saves, where ``s`` is the ``optimizer`` tensor
``loss_scale`` (the loss scale of fp16 mixed precision at that step, as the integrations record it: the
Lightning callback ``scaler.get_scale()`` of the precision plugin's ``torch.amp.GradScaler``, the Keras
callback a ``LossScaleOptimizer``'s scale; a hand-written loop offers ``scaler.get_scale()`` as
``loss_scale``, kind ``optimizer``) and ``p`` the save before ``t`` in this training: the scale is below
the limit and the scaler skipped every one of the ``t - p`` steps since the save before (it halves its
scale at each step it skips). Where the training holds no earlier save, the first part alone.

A dynamic loss scaler skips every step whose unscaled gradients are not finite and halves its scale
there (GradScaler's default ``backoff_factor`` 0.5; Keras's ``LossScaleOptimizer`` always halves);
after a run of finite steps it doubles it (GradScaler: every 2000 steps, Keras:
``dynamic_growth_steps``, 2000). A healthy run overflows on a few steps at the initial scale (2^16 in
PyTorch, 2^15 in Keras) and settles far above 1. A NaN or an infinity in the backward pass makes the
scaler skip every step: its scale falls by half a step, without end, and the weights never move.
tripwire captures no gradient and no update ratio at a step the scaler skips, so the gradient rules
have nothing to read: without this rule such a run was only named by ``loss_not_decreasing``, 50 steps
in, blaming the learning rate (trial 30a: a ``torch.where(w > 10, torch.sqrt(w), 0)`` whose gradient is
NaN at every step, the scale at 2.9e-11 after 51 steps). A model whose gradients are finite but beyond
fp16's range (a loss in the thousands, unnormalised targets) skips step after step too, until the scale
is low enough for them, and then trains with the scale below 1 (trial 30g: 23 steps skipped, the scale
settled at 2^-7, the run converged); the default ``min_scale`` 0.001 (about 2^-10: gradients beyond 6.5e7
once unscaled) lets such a descent end before it, and the second part of the condition keeps a scale that
has settled low (no step skipped since the save before) from firing. With PyTorch's initial scale and
saves 10 steps apart, a NaN gradient from the first step is named at step 30 (2^-14).

The message gives the scale and the steps since which the scaler skipped every step (the earliest
save from which every interval to this one halved the scale at each step), with the scale there: the
weights have not moved since. It names no framework's function or option (the rule does not know which
framework recorded the scale): the causes are given as operations (sqrt, log, a division at 0, a
``where`` whose untaken branch has a NaN gradient). Its requirement is optional: a run without a loss
scaler (fp32, bf16) records none, and the rule is not named as having had nothing to read.

Defaults: ``min_scale=0.001`` (finite, > 0), ``patience=1``, mode ``train``, severity ``critical``.
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
    """fp16's dynamic loss scale below ``min_scale``, every step since the save before skipped (see the
    module docstring)."""

    name = "loss_scale_collapse"
    summary = "fp16 mixed precision's loss scale collapsed: the scaler skipped step after step (non-finite gradients)"
    default_modes = ("train",)
    default_severity = "critical"

    def __init__(self, min_scale: float = 0.001, patience: int = 1, **common: Any) -> None:
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
            scale = float(scale)
            if scale >= self.min_scale:
                continue
            streak = self._skipping_since(history, step, mode, worker, scale)
            if streak is None:
                continue  # (a step applied since the save before: a scale that settled low, not a collapse)
            return self.finding(
                step, mode, self._message(step, scale, streak), tensors=[LOSS_SCALE], scale=scale, worker=worker,
                **({"skipped_since": streak[0], "scale_then": streak[1]} if streak else {}),
            )
        return None if seen else NO_DATA

    def _skipping_since(self, history: History, step: int, mode: str, worker: int,
                scale: float) -> tuple[int, float] | tuple[()] | None:
        """``(s0, x0)``: the earliest save of this training from which the scale halved (at least) at
        every step up to ``step``, and its scale there; ``()`` where the training holds no save
        before ``step`` (or the scale is not a positive finite number: nothing to compare); None where
        a step was applied since the save before (the scale fell by less than ``2^-(t - p)``)."""
        steps, values = self.this_training(*history.finite_series(LOSS_SCALE, "raw", mode, worker), mode)
        earlier = np.flatnonzero(steps < step)
        if not len(earlier) or not math.isfinite(scale) or scale <= 0:
            return ()
        at, now = step, scale
        found: tuple[int, float] | None = None
        for i in earlier[::-1]:
            before, then = int(steps[i]), float(values[i])
            if not (now <= then * 2.0 ** -(at - before) * (1 + 1e-9)):
                break
            found, at, now = (before, then), before, then
        return found

    def _message(self, step: int, scale: float, streak: tuple[int, float] | tuple[()]) -> str:
        if streak:
            since, first = streak
            skips = (f"; it was {scale_text(first)} at step {since}, and the scaler, which halves it at each step it "
                     f"skips, skipped every one of the {step - since} optimizer steps since then: the weights have "
                     f"not moved since")
        else:
            skips = ""
        low = ("The scaler lowers its scale only at steps it skips, and this low only by skipping step after step: "
               "the gradients were not finite, or overflowed fp16, even scaled down." if not scale >= 1 else
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

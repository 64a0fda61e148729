"""Poor weight initialization: weights start constant, tiny or huge, or activations start out of scale.

Condition, at the first save of the weights: ``std(w) < min_std`` (unless ``|mean(w) - 1| <= 0.05``, 0.95
and 1.05 included whatever their float rounding: a
scale vector of a normalisation layer, initialised to ones, which the first update moves a little:
the first save is taken after the first step's update; or ``w`` holds one value, whose spread is 0: a
learnable scalar, the slope of a default ``nn.PReLU()``) or
``std(w) > max_std`` for a weight tensor ``w``; or, when layer outputs (``activations``) are captured at
that step, ``max_l var(a_l) / min_l var(a_l) > max_activation_ratio`` (smdebug's clause) over the layers
``l`` whose output variance is above 0: a layer whose output is constant at the start (a
zero-initialised layer, on purpose in ControlNet's zero convolutions or LoRA's ``B``, or one fed only
zeros) has no scale to compare: its constant weights are this rule's first clause, dead ReLUs
before it ``dead_relu``'s.

An ``include`` and ``exclude`` that leave out every weight the run captured leave the rule nothing to
read: the run's end says so ("rule 'poor_weight_initialization' had nothing to read: include=... and
exclude=... leave out every ... captured (<names>), so the rule never judged"), and ``tripwire watch``
counts the rule unjudged (exit 3).

Defaults: ``min_std=1e-3``, ``max_std=2.0``, ``max_activation_ratio=1e4``, ``include=".*"``,
``exclude`` = biases, normalisation, embedding, scale and token parameters (LayerScale, a ViT's ``cls_token``:
zero or 1e-6 on purpose), PReLU slopes (0.25 each on purpose: ``prelu``, Keras's ``p_re_lu``, ``alpha``;
a torch ``nn.PReLU(C)`` named otherwise, ``act.weight``, needs its name in ``exclude``, trial 43c) and the
weights zero-initialised on purpose of LoRA's ``B`` (``lora_B``) and
ControlNet's zero convolutions (``zero_conv``) (the whole regex in ``tripwire rules
poor_weight_initialization``), mode ``train``.
"""

from __future__ import annotations

import math
from typing import Any

from .._history import History
from .._validate import check_float
from ._base import Requirement
from ._common import (
    NO_DATA, BuiltinRule, check_ordered, check_regex, filtered_out, fmt, fmt_vs, in_capture_order, names_in,
    value_at
)
from ._registry import register_rule

ONES_TOLERANCE = 0.05
"""A near-constant tensor whose mean is within this of 1 is a normalisation layer's scale vector."""
_ROUNDING = 1e-9
"""Float rounding allowed on :data:`ONES_TOLERANCE`: weights of 1.05 or 0.95 are within it, as the docs
say (trial 32e F9: ``1.05 - 1`` is ``0.05000000000000004`` in float64, and such weights fired)."""
DEFAULT_EXCLUDE = r"(?i)(norm|(^|[./_])bn\d*([./_]|$)|gamma|beta|embed|scale|bias|token|lora_b|zero_conv|p_?re_?lu|alpha)"


@register_rule
class PoorWeightInitialization(BuiltinRule):
    """Bad initial weights (see the module docstring)."""

    name = "poor_weight_initialization"
    summary = "weights start constant, tiny or huge, or layer outputs start on very different scales"
    default_modes = ("train",)

    def __init__(self, min_std: float = 1e-3, max_std: float = 2.0, max_activation_ratio: float = 1e4,
                 include: str = ".*", exclude: str = DEFAULT_EXCLUDE, **common: Any) -> None:
        super().__init__(**common)
        self.min_std = check_float(min_std, f"{self.name}.min_std", minimum=0.0)
        self.max_std = check_float(max_std, f"{self.name}.max_std", minimum=0.0, min_inclusive=False)
        # (trial 23m: the error named max_std where only min_std was set)
        check_ordered(self.name, "min_std", self.min_std, "max_std", self.max_std, 2.0)
        self.max_activation_ratio = check_float(max_activation_ratio, f"{self.name}.max_activation_ratio", minimum=1.0, min_inclusive=False)
        self.include = check_regex(include, f"{self.name}.include")
        self.exclude = check_regex(exclude, f"{self.name}.exclude")
        self._done: list[int] = []

    def requirements(self) -> list[Requirement]:
        return [Requirement("weights", reductions=("std", "mean", "numel"), modes=("train",))]

    def nothing_read(self, history: History) -> str | None:
        """Where ``include`` and ``exclude`` leave out every weight captured (:func:`filtered_out`)."""
        return filtered_out(self, history, "weights", "weight", self.include, self.exclude)

    def check(self, history: History, step: int, mode: str) -> Any:
        names = names_in(history, "weights", self.include, self.exclude)
        if not names:
            return NO_DATA
        found = []
        for worker in self.workers(history):
            if worker in self._done:
                continue
            stds = [(n, value_at(history, n, "std", step, mode, worker)) for n in in_capture_order(history, names)]
            stds = [(n, s) for n, s in stds if s is not None]
            if not stds:
                continue
            self._done.append(worker)
            bad_low = []
            bad_high = []
            for n, s in stds:
                if s < self.min_std:
                    if (value_at(history, n, "numel", step, mode, worker) or 2) <= 1:
                        continue  # (one value has no spread: a learnable scalar, a temperature; trial 43c)
                    mean = value_at(history, n, "mean", step, mode, worker)
                    if mean is not None and abs(mean - 1.0) <= ONES_TOLERANCE + _ROUNDING:
                        continue  # an all-ones scale (normalisation layer), maybe moved by the first update
                    bad_low.append((n, s, mean))
                elif s > self.max_std:
                    bad_high.append((n, s))
            if bad_low:
                n, s, mean = bad_low[0]
                shown, limit = fmt_vs(s, self.min_std)
                # (a std that is the rounding of a constant's mean, 4.4e-16 of 1.06: constant too; trial 37k)
                if mean is not None and (s == 0 or s <= 1e-6 * abs(mean)):  # (apart from the all-ones exemption's edge)
                    what = f"constant (every value {fmt_vs(mean, 1.0 + math.copysign(ONES_TOLERANCE, mean - 1.0))[0]})"
                else:
                    what = f"tiny (std {shown})"
                found.append(self.finding(
                    step, mode,
                    f"{len(bad_low)} weight tensor(s) start {what}, e.g. {n} (limit std >= {limit}; as saved "
                    f"at step {step}): "
                    "identical or near-zero weights keep units symmetric and gradients vanishing. Use the framework's "
                    "default (He/Xavier/Glorot) initialisation.",
                    tensors=[b[0] for b in bad_low], std=s, worker=worker,
                ))
                continue
            if bad_high:
                n, s = bad_high[0]
                shown, limit = fmt_vs(s, self.max_std)
                found.append(self.finding(
                    step, mode,
                    f"{len(bad_high)} weight tensor(s) start with std above {limit}, e.g. {n} (std {shown}, "
                    f"as saved at step {step}): activations and gradients will explode. Use He/Xavier "
                    "initialisation (std ~ 1/sqrt(fan_in)); if the initialisation was already that, the first update "
                    "blew the weights up (a learning rate far too high, unscaled regression targets: see "
                    "weight_update_ratio).",
                    tensors=[b[0] for b in bad_high], std=s, worker=worker,
                ))
                continue
            acts = []
            for a in in_capture_order(history, names_in(history, "activations")):
                sd = value_at(history, a, "std", step, mode, worker)
                # layers with a constant output are left out, not the ratio (trial 23m: one such
                # layer silenced the clause for all: variances 0, 1e-6 and 1 gave no finding)
                if sd is not None and sd == sd and sd * sd > 0:
                    acts.append((a, sd * sd))
            if len(acts) >= 2:
                lo = min(acts, key=lambda kv: kv[1])
                hi = max(acts, key=lambda kv: kv[1])
                if hi[1] / lo[1] > self.max_activation_ratio:
                    shown, limit = fmt_vs(hi[1] / lo[1], self.max_activation_ratio)
                    highest = fmt_vs(hi[1], lo[1] * self.max_activation_ratio)[0]
                    found.append(self.finding(
                        step, mode,
                        f"at the start, the variance of the layer outputs ranges from {fmt(lo[1])} ({lo[0]}) to "
                        f"{highest} ({hi[0]}), a ratio of {shown} (limit {limit}): "
                        "the initialisation does not preserve the signal's scale. Use He (ReLU) or Xavier (tanh) "
                        "initialisation, or normalisation layers.",
                        tensors=[lo[0], hi[0]], ratio=hi[1] / lo[1], worker=worker,
                    ))
        return found

    def restart(self) -> None:
        super().restart()
        self._done = []  # (a later training's first weights are judged: a fresh model's, as a fresh rule would)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "done": list(self._done)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self._done = [int(w) for w in state.get("done", [])]

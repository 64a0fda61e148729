"""Weight update ratio: parameters move far too much, or not at all, per step.

Condition: ``max_p r_p > max_ratio`` on ``patience`` consecutive evaluations, or ``max_p r_p < min_ratio``
on ``low_saves`` consecutive evaluations (a schedule that touches 0 for a moment is fine; the rule
evaluates at every save step, or every ``every`` steps when that is set), where
``r_p = ||w_p(t) - w_p(t-1)|| / ||w_p(t-1)||`` is the ``optimizer`` tensor ``update_ratio/<param>``
(parameters matching ``include`` and not ``exclude``). A healthy ratio is around 1e-3.

Defaults: ``min_ratio=1e-8``, ``max_ratio=1.0``, ``low_saves=5``, ``include=".*"``,
``exclude="(?i)(bias|gamma|layer_?scale|token)"`` (parameters that start at or near zero on purpose
have huge ratios at first: zero-initialised biases, LayerScale ``gamma`` at 1e-6 (ConvNeXt, timm), a
ViT's ``cls_token``), ``patience=1``, mode ``train``; a non-finite ratio is skipped (+inf: the
weight was all zeros; NaN: the weights are NaN, which ``exploding_tensor`` reports on ``weights``).
"""

from __future__ import annotations

import math
from typing import Any

from .._history import History
from .._validate import check_float, check_int
from ._base import Requirement
from ._common import NO_DATA, BuiltinRule, check_ordered, check_regex, fmt, names_in, value_at
from ._registry import register_rule


@register_rule
class WeightUpdateRatio(BuiltinRule):
    """Update/weight ratio outside [min_ratio, max_ratio] (see the module docstring)."""

    name = "weight_update_ratio"
    summary = "parameters move far too much, or not at all, per step (|update| / |weight|)"
    default_modes = ("train",)

    def __init__(self, min_ratio: float = 1e-8, max_ratio: float = 1.0, low_saves: int = 5, include: str = ".*",
                 exclude: str = "(?i)(bias|gamma|layer_?scale|token)",
                 patience: int = 1, **common: Any) -> None:
        super().__init__(patience=patience, **common)
        self.min_ratio = check_float(min_ratio, f"{self.name}.min_ratio", minimum=0.0)
        self.max_ratio = check_float(max_ratio, f"{self.name}.max_ratio", minimum=0.0, min_inclusive=False)
        # (trial 23m: the error named max_ratio where only min_ratio was set)
        check_ordered(self.name, "min_ratio", self.min_ratio, "max_ratio", self.max_ratio, 1.0)
        self.low_saves = check_int(low_saves, f"{self.name}.low_saves", minimum=1)
        self._low: dict[str, int] = {}
        self.include = check_regex(include, f"{self.name}.include")
        self.exclude = check_regex(exclude, f"{self.name}.exclude")

    def requirements(self) -> list[Requirement]:
        return [Requirement("optimizer", reductions=("raw",), modes=("train",))]

    def check(self, history: History, step: int, mode: str) -> Any:
        names = [n for n in names_in(history, "optimizer", self.include, self.exclude) if n.startswith("update_ratio/")]
        if not names:
            return NO_DATA
        seen = False
        for worker in self.workers(history):
            ratios = []
            for n in names:
                r = value_at(history, n, "raw", step, mode, worker)
                if r is not None and math.isfinite(r):  # +inf: the tensor was all zeros before
                    ratios.append((n, r))
            if not ratios:
                continue
            seen = True
            top_name, top = max(ratios, key=lambda kv: kv[1])
            if top > self.max_ratio:
                return self.finding(
                    step, mode,
                    f"the update of {top_name.removeprefix('update_ratio/')} is {fmt(top)} times its size "
                    f"(limit {fmt(self.max_ratio)}; healthy ~1e-3): the learning rate is far too high. Lower it, or "
                    "add warm-up or gradient clipping.",
                    tensors=[top_name], ratio=top, worker=worker,
                )
            low = self._low[str(worker)] = self._low.get(str(worker), 0) + 1 if top < self.min_ratio else 0
            if low >= self.low_saves:
                return self.finding(
                    step, mode,
                    f"the largest update/weight ratio is {fmt(top)} ({top_name}; limit {fmt(self.min_ratio)}) for "
                    f"{low} saves in a row: the "
                    "parameters do not move. Usual causes: a learning rate of ~0, parameters frozen or not given "
                    "to the optimizer, or gradients that vanish.",
                    tensors=[top_name], ratio=top, worker=worker,
                )
        return None if seen else NO_DATA

    def restart(self) -> None:
        super().restart()
        self._low = {}  # (saves in a row with too low a ratio: this training's)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "low": dict(self._low)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self._low = {str(k): int(v) for k, v in state.get("low", {}).items()}

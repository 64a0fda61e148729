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
                head = (f"the largest update/weight ratio is {fmt(top)} ({top_name}; limit {fmt(self.min_ratio)}) for "
                        f"{low} saves in a row")
                dead = self._stopped_moving(history, names, top, step, mode, worker)
                return self.finding(
                    step, mode,
                    f"{head}{dead}" if dead else
                    f"{head}: the parameters do not move. Usual causes: a learning rate of ~0, parameters frozen or "
                    "not given to the optimizer, or gradients that vanish.",
                    tensors=[top_name], ratio=top, worker=worker,
                )
        return None if seen else NO_DATA

    def _stopped_moving(self, history: History, names: list[str], top: float, step: int, mode: str,
                        worker: int) -> str:
        """The rest of the low-ratio message where no parameter moved at all (``top`` exactly 0) with
        a learning rate that is not 0 (``lr/*`` at ``step`` above 0, or not recorded) and either an
        earlier ratio above ``min_ratio`` in this training or every recorded gradient norm exactly 0
        at ``step``: gradients that became exactly 0 (dead units, often after a learning rate far
        too high), not "a learning rate of ~0" (trial 27e: SGD at lr=3 killed the ReLUs within 10
        steps, and the message named a learning rate of ~0). Empty otherwise (the usual message)."""
        if top != 0.0:
            return ""
        rates = [value_at(history, n, "raw", step, mode, worker)
                 for n in names_in(history, "optimizer") if n.startswith("lr/")]
        rates = [r for r in rates if r is not None and math.isfinite(r)]
        if rates and max(rates) <= 0.0:
            return ""  # (a learning rate of exactly 0 here: the usual message names it)
        moved = 0.0
        for n in names:
            steps, values = self.this_training(*history.finite_series(n, "raw", mode, worker), mode)
            earlier = values[steps < step]
            if len(earlier):
                moved = max(moved, float(earlier.max()))
        norms = [value_at(history, n, "l2", step, mode, worker) for n in names_in(history, "gradients")]
        norms = [g for g in norms if g is not None]
        zero_grads = bool(norms) and all(g == 0.0 for g in norms)
        if moved <= self.min_ratio and not zero_grads:
            return ""
        lr = f" (learning rate {fmt(max(rates))})" if rates else ""
        since = f", after updates of up to {fmt(moved)} times their size earlier in training" if moved > self.min_ratio else ""
        grads = ("every recorded gradient norm is exactly 0 here" if zero_grads else
                 "with a learning rate above 0, their gradients have become exactly 0")
        return (f"{since}: no parameter moves at all{lr}; {grads}. Usual causes: dead units (ReLUs that output 0 "
                f"for every input, often after a learning rate far too high blew the weights up in the first steps: "
                f"look for a spike in the loss there; dead_relu names the layers), or a loss that no longer depends "
                f"on the parameters. Lower the learning rate, or add warm-up or gradient clipping.")

    def restart(self) -> None:
        super().restart()
        self._low = {}  # (saves in a row with too low a ratio: this training's)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "low": dict(self._low)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self._low = {str(k): int(v) for k, v in state.get("low", {}).items()}

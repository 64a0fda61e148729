"""Loss not decreasing: the loss has not gone down since training started.

Condition: ``s - s_0 >= num_steps and median(last window values) > (1 - min_decrease) * median(first window values)``,
for each loss matching ``loss`` (``s_0``: the step of its first value). A loss that went down and then
plateaued (converged) does not fire: only runs that never made progress, or lost it all.

Defaults: ``loss="loss"`` (a tensor name, or a regular expression matched in full against the
``losses`` and ``metrics`` collections), ``num_steps=200``, ``min_decrease=0.05``, ``window=10``
(saved values), mode ``train``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._history import History
from .._validate import check_float, check_int
from ._base import Requirement
from ._common import NO_DATA, BuiltinRule, check_regex, fmt
from ._loss import loss_series
from ._registry import register_rule


@register_rule
class LossNotDecreasing(BuiltinRule):
    """The loss made no progress over the first ``num_steps`` steps (see the module docstring)."""

    name = "loss_not_decreasing"
    summary = "the loss has not decreased since training started"
    default_modes = ("train",)

    def __init__(self, loss: str = "loss", num_steps: int = 200, min_decrease: float = 0.05, window: int = 10, **common: Any) -> None:
        super().__init__(**common)
        self.loss = check_regex(loss, f"{self.name}.loss")
        self.num_steps = check_int(num_steps, f"{self.name}.num_steps", minimum=1)
        self.min_decrease = check_float(min_decrease, f"{self.name}.min_decrease", minimum=0.0, maximum=1.0, max_inclusive=False)
        self.window = check_int(window, f"{self.name}.window", minimum=1, maximum=10_000)

    def requirements(self) -> list[Requirement]:
        return [Requirement("losses", reductions=("raw",), modes=self.modes)]

    def check(self, history: History, step: int, mode: str) -> Any:
        found = []
        seen = False
        for worker in self.workers(history):
            for name, steps, values in loss_series(history, self.loss, mode, worker):
                if not len(steps) or steps[-1] != step:
                    continue
                seen = True
                if step - steps[0] < self.num_steps or len(values) < 2 * self.window:
                    continue
                start = float(np.median(values[: self.window]))
                now = float(np.median(values[-self.window :]))
                if now > (1.0 - self.min_decrease) * start:
                    change = (now - start) / abs(start) if start else float("inf")
                    trend = "risen" if now > start else "fallen only"
                    found.append(self.finding(
                        step, mode,
                        f"{name} has {trend} {fmt(abs(change) * 100)}% in {int(step - steps[0])} steps "
                        f"(median of the first {self.window} values {fmt(start)}, of the last {self.window} {fmt(now)}; "
                        f"expected a decrease of at least {fmt(self.min_decrease * 100)}%). Usual causes: a learning rate "
                        "far too low or too high, parameters not passed to the optimizer or frozen, a missing "
                        "optimizer.step(), labels not matching inputs, or a wrong output activation for the loss.",
                        tensors=[name], start=start, now=now, worker=worker,
                    ))
        if not seen:
            return NO_DATA
        return found

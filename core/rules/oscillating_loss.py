"""Oscillating loss: the loss jumps up and down by more than its initial value.

Condition: within ``window`` consecutive values of the loss ending at a value new since the last
save (the last value when only save steps are recorded; each of the last ``I`` when the loss is kept
at every step, ``I`` the train save interval), ``#{i: d_i > swing * L0} >= min_swings``
and ``#{i: d_i < -swing * L0} >= min_swings``, with ``d_i = l_i - l_(i-1)`` the change between
consecutive values and the initial level ``L0 = |l_first|``, the loss at initialisation (not a median
of the first window: a run that blows up in its first steps, as Adam with far too high a learning
rate does, would inflate that reference and hide its own swings). Mini-batch noise and schedule
restarts stay well below the initial loss. With the loss kept at every step (``every_step``, the
default) the rule sees a swing that lasts a few steps, not only those that happen to land on save
steps.

Defaults: ``loss="loss"`` (tensor name or full-match regex), ``window=10`` (consecutive values),
``swing=1.0``, ``min_swings=2``, mode ``train``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._errors import ConfigError
from .._history import History
from .._validate import check_float, check_int
from ._base import Requirement
from ._common import NO_DATA, BuiltinRule, check_regex, fmt
from ._loss import loss_series, value_interval
from ._registry import register_rule


@register_rule
class OscillatingLoss(BuiltinRule):
    """Large rises and falls of the loss (see the module docstring)."""

    name = "oscillating_loss"
    summary = "the loss swings up and down by more than its initial value"
    default_modes = ("train",)

    def __init__(self, loss: str = "loss", window: int = 10, swing: float = 1.0, min_swings: int = 2, **common: Any) -> None:
        super().__init__(**common)
        self.loss = check_regex(loss, f"{self.name}.loss")
        self.window = check_int(window, f"{self.name}.window", minimum=3, maximum=10_000)
        self.swing = check_float(swing, f"{self.name}.swing", minimum=0.0, min_inclusive=False)
        self.min_swings = check_int(min_swings, f"{self.name}.min_swings", minimum=1)
        if self.min_swings * 2 > self.window - 1:
            raise ConfigError(
                f"{self.name}.min_swings: got {self.min_swings!r} with window {self.window!r}; accepted: an integer "
                f">= 1 with 2 * min_swings <= window - 1"
            )

    def named_inputs(self) -> dict[str, str]:
        return {"loss": self.loss}

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
                if len(values) < self.window:
                    continue
                l0 = abs(float(values[0]))
                if l0 == 0:
                    continue
                # the windows ending at each value new since the last save step
                every = value_interval(history, name)
                new = 1 if every <= 1 else max(1, int(np.count_nonzero(steps > steps[-1] - every)))
                tail = values[-(self.window + new - 1):]
                d = np.diff(tail)
                up = np.concatenate(([0], np.cumsum(d > self.swing * l0)))
                down = np.concatenate(([0], np.cumsum(d < -self.swing * l0)))
                span = self.window - 1  # changes within a window
                ends = np.arange(span, len(d) + 1)
                ups_at, downs_at = up[ends] - up[ends - span], down[ends] - down[ends - span]
                hit = np.flatnonzero((ups_at >= self.min_swings) & (downs_at >= self.min_swings))
                if len(hit):
                    e = int(ends[hit[0]])
                    ups, downs = int(ups_at[hit[0]]), int(downs_at[hit[0]])
                    last = tail[e - span : e + 1]
                    found.append(self.finding(
                        step, mode,
                        f"{name} oscillates: in {self.window} consecutive values it rose {ups} times and fell {downs} times "
                        f"by more than {fmt(self.swing)}x its initial level {fmt(l0)} (range {fmt(float(last.min()))} "
                        f"to {fmt(float(last.max()))}). Usual causes: a learning rate too high for the optimizer, "
                        "a missing optimizer.zero_grad() (gradients accumulate), or a batch size too small; "
                        "lower the learning rate, add warm-up or gradient clipping.",
                        tensors=[name], ups=ups, downs=downs, initial=l0, worker=worker,
                    ))
        if not seen:
            return NO_DATA
        return found


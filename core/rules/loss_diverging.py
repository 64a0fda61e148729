"""Loss diverging: after it fell, the loss has climbed back a large part of the way to its start.

Condition: ``L_0 - L* >= learned * |L_0| and L_t - L* > regain * (L_0 - L*)``, on ``patience``
consecutive saves, for each loss matching ``loss``, with ``L_t = median(l[t - (k-1)*I .. t])`` the
loss's level now (``t``: the step evaluated), ``L* = min_u median(l[u - (k-1)*I .. u])`` over the
steps ``u >= s_0 + w*I`` holding a value, the lowest level it held over ``k`` consecutive save steps,
the last of them after its first ``w``, and ``L_0 = median(l[s_0 .. s_0 + (w-1)*I])`` its level over
the first ``w`` saves (``s_0``: the step of its first value; ``l[a .. b]``: its values at steps ``a``
to ``b``; ``I``: the train save interval; ``n``: the save steps so far, ``w = min(window, n // 2)``,
``k = 5``; with one value per save step, ``I`` is 1 here and the steps are its values, as in
``loss_not_decreasing``). (Ending after them, as in ``loss_not_decreasing``: the first ``k`` values
of a loss rising from its first value sit below the median of the first ``w``, and a booster's
train-rmse that rose at every round from round 0, 217 to 1.7e5, read as one that "fell from 973.3
(its level over its first 10 saves) to 403.2" and climbed back, trial 31d; a window that ends after
the first ``w`` has its middle after theirs. A loss that rose from its first value never fell:
``loss_not_decreasing`` judges it.) The run learned (its loss fell by ``learned`` of its start) and
then lost ``regain`` of what it had gained: a learning rate that grew too high (a warm-up to too high a peak, a
schedule stepped per batch instead of per epoch, a factor of 10 where 0.1 was meant), Adam unstable at
a high learning rate, a loss scale that went wrong. Medians of ``k`` saves leave single spikes alone
(a heavy-tailed class-weighted batch, one unlucky step); a loss that jumps and comes straight back
down (a warm restart of the schedule) meets the condition for fewer saves than ``patience`` only when
it falls back within them.

Blind spot: a fall and a climb back within the first saves. ``L_0``, the median over the first
``w`` saves (``w`` grows with the saves, to ``window``: 91 steps with saves 10 steps apart), holds a
fall that came in the first half of them, and ``L*``, a median over the span of ``k`` saves (41
steps) ending after them, is not lowered by a dip lasting less than about half that span: such a
run never looks as if it had learned ``learned`` of its start (so too Adam at a learning rate far
too high, whose loss halves in its first 100 steps, docs/rules.md). Trial 27g: an ``ExponentialLR(gamma=1.05)`` meant per
epoch and stepped per batch took a digits MLP's loss (SGD, lr 0.05, saves 10 steps apart) from 2.31
to 0.29-0.8 over steps 16-32, back to 2.76 (steps 70-110) and to NaN at step 128; ``L_0`` was
1.15-1.65 and ``L*`` 1.01 (steps 10-50), a fall of 12-39%, under ``learned``, and the rule stayed
silent. The default set found that run (``oscillating_loss`` at step 70, ``loss_not_decreasing`` at
110, ``exploding_tensor`` at the NaN). Levels of fewer steps would see such a dip, and batch noise
as one too (on healthy runs the median of a few steps' values dips far below the level), so they
were not taken. A loss that held its start for the first half of those saves, fell, held its low
level for a few saves and then climbed is seen (the detection suite's
``diverging_step_lr_gamma_typo``, a learning rate x30 at step 800 of 2000, 50 steps after it).

A loss that never fell by ``learned`` is not judged here (``loss_not_decreasing``'s business); one
that turns NaN is ``exploding_tensor``'s, and one that swings wildly ``oscillating_loss``'s. Not a
fault, and told apart by nothing in the loss: a planned restart (SGDR) whose loss stays up for
``patience`` saves, a curriculum that adds harder data later, regularisation or augmentation
switched on mid-training, and mixup, whose batch losses swing around a level that a lucky low
``L*`` makes look like a climb (give ``regain`` more room, or the ``record`` action). Opt-in, not in
the ``default`` set: it fired on 16 of 45 such healthy runs (docs/rules.md).

Defaults: ``loss="loss"`` (a tensor name, or a regular expression matched in full against the
``losses`` and ``metrics`` collections), ``learned=0.5``, ``regain=0.25``, ``window=10`` (saves),
``patience=3``, mode ``train``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._finding import Finding
from .._history import History
from .._validate import check_float, check_int
from ._common import check_regex, fmt
from ._loss import LossRule, first_values, lowest_level, lowest_window_median, recent_values, value_interval
from ._registry import register_rule

#: The level of the loss: the median over this many consecutive saves.
LEVEL_SAVES = 5


@register_rule
class LossDiverging(LossRule):
    """The loss fell, then climbed back a large part of the way (see the module docstring)."""

    name = "loss_diverging"
    summary = "after falling, the loss has climbed back a large part of the way to its start"
    default_modes = ("train",)

    def __init__(self, loss: str = "loss", learned: float = 0.5, regain: float = 0.25, window: int = 10,
                 patience: int = 3, **common: Any) -> None:
        super().__init__(patience=patience, **common)
        self.loss = check_regex(loss, f"{self.name}.loss")
        self.learned = check_float(learned, f"{self.name}.learned", minimum=0.0, maximum=1.0, min_inclusive=False,
                                   max_inclusive=False)
        self.regain = check_float(regain, f"{self.name}.regain", minimum=0.0, min_inclusive=False)
        self.window = check_int(window, f"{self.name}.window", minimum=1, maximum=10_000)
        self._held: dict[str, tuple[int, int, float]] = {}  # series -> (span, last window end, lowest median)
        self._windows: dict[str, tuple[int, int, float]] = {}  # series -> (k, values read, lowest median)

    def restart(self) -> None:
        super().restart()
        self._held, self._windows = {}, {}  # (the lowest levels of the earlier trainings' values)

    def judge(self, history: History, name: str, steps: np.ndarray, values: np.ndarray, step: int, mode: str,
              worker: int) -> Finding | None:
        """A finding for one loss series ending at ``step`` (see the module docstring), or None."""
        every = value_interval(history, name)
        n = len(values) if every <= 1 else int(steps[-1] - steps[0]) // every + 1
        w = min(self.window, n // 2)
        if w < 1 or n < w + LEVEL_SAVES:  # the start, and one level after it
            return None
        k = LEVEL_SAVES
        # the lowest level: in windows that end after the first w saves (trial 31d, see the module
        # docstring); the cache is per w, as w grows with the first saves
        if every <= 1:
            start = float(np.median(values[:w]))
            lowest = lowest_window_median(self._windows, f"{worker}:{name}:{w}", values[max(0, w - k + 1):], k)
            now = float(np.median(values[-k:]))
        else:
            span = (k - 1) * every + 1
            start = float(np.median(first_values(steps, values, w, every)))
            after = int(np.searchsorted(steps, steps[0] + (w - k + 1) * every, side="left"))
            lowest = lowest_level(self._held, f"{worker}:{name}:{w}", steps[after:], values[after:], span)
            now = float(np.median(recent_values(steps, values, k, every)))
        if not np.isfinite(lowest):  # no complete window after the first w saves yet
            return None
        gained = start - lowest
        if gained < self.learned * abs(start) or now - lowest <= self.regain * gained:
            return None
        back = (now - lowest) / gained * 100
        over = f"{k} saves" if every > 1 else f"{k} values"
        return self.finding(
            step, mode,
            f"{name} fell from {fmt(start)} (its level over its first {w} saves) to {fmt(lowest)} and has "
            f"climbed back to {fmt(now)} (levels: medians over {over}, the lowest in windows ending after the "
            f"first {w}): {fmt(back)}% of the way back to its start, so the training is diverging. Usual causes: "
            "a learning rate that grew too high (a warm-up to too high a peak, a schedule stepped per batch instead of per epoch, a factor of 10 where "
            "0.1 was meant), Adam unstable at a high learning rate, a loss scale gone wrong. Lower the learning "
            "rate or its peak, check the scheduler, clip gradients. Not a fault: a planned restart of the "
            "schedule (SGDR), or a curriculum that adds harder data.",
            tensors=[name], start=start, lowest=lowest, now=now, worker=worker,
        )

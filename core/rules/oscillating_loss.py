"""Oscillating loss: the loss jumps up and down by more than its initial level.

Condition: within ``window`` consecutive values of the loss ending at a value new since the last
save (the last value when only save steps are recorded; each of the last ``I`` when the loss is kept
at every step, ``I`` the train save interval), ``#{i: d_i > swing * L0} >= min_swings`` and
``#{i: d_i < -swing * L0} >= min_swings`` and ``median(window) >= F`` and
``median(last 2 * window values up to the window's end) >= F``, with ``d_i = l_i - l_(i-1)`` the change between
consecutive values, the initial level ``L0 = max(|l_1|, ..., |l_m|)``, the largest magnitude of the values
before the window among the first ``initial`` (``m = min(s, initial)``, ``s`` values before the
window; a window with ``s < window`` is not judged), and ``F = H0 - (1 - min_level) * L0`` with
``H0 = max(l_1, ..., l_m)`` (``F = min_level * L0`` where ``H0 = L0``, as for any loss at or above 0: the
loss's typical level is at least ``min_level`` of its initial one); or ``L0 = |l_1|`` and ``H0 = l_1`` for
every window when ``median(|l_1|, ..., |l_k|) > blowup * |l_1|`` over the first ``k = min(n, initial)`` of
the ``n`` values so far (the loss left its starting level at once, as Adam with far too high a learning rate
makes it do: its own swings would inflate the reference). A loss below 0 (a Gaussian NLL, an
ELBO-type loss) is judged by the same swings against the magnitude ``L0``, and its typical level must
stay within ``(1 - min_level) * L0`` of the highest of its first values (an NLL that starts at -2 and
swings up to 0.5 fires as its twin shifted above 0 does, one that has fallen from -2 to -10 does
not); such a loss has no natural 0, so ``L0``, and with it the swing a finding needs, depends on how
far from 0 it started (give ``swing`` for the loss's own scale).

Why the largest of the first values, not the first alone: a class-weighted loss (or a very small
batch) is heavy-tailed from the start, a batch with a few minority samples costing 5 to 15 times one
without, and those spikes are not oscillation. Mini-batch noise and schedule restarts stay below
that level; a learning rate too high makes the swings outgrow it. Once a weighted loss has fallen
well below its start, a few minority-heavy batches still spike to it and back (two such in a window
are two rises and two falls): the loss's typical level in the window, its median, tells them from
an oscillation, which keeps the loss around its initial level or above it, and keeps it there over
the two windows up to this one (trial 23q: four such batches in one window of a 95:5 fit, batches of
32, lifted its median just over half the level while the loss around it sat at a fifth of it). With the loss kept at every step
(``every_step``, the default) the rule sees a swing that lasts a few steps, not only those that
happen to land on save steps.

The message lists the usual causes; where the loss's first value is above 100 (far from unit scale)
it first names a loss summed over the batch (PyTorch's ``reduction="sum"``: a cross-entropy summed
over a batch of 512 starts near 512 x ln 10 = 1179) or targets far from unit scale. Where the swings
ride on a level far above the loss's start, the window's median at least ``DIVERGED`` (10) times the
initial level ``L0`` (``median(window) >= H0 + (DIVERGED - 1) * L0``: ``DIVERGED * L0`` for a loss at or
above 0), the loss diverged rather than swung around its level (trial 32d: an LSTM at SGD lr 200 went
0.7, 17.5, 26, 94, 202, 456, 175, a window median 190x its start): the message says so and leads with
a learning rate too high for the optimizer, before the other causes. Where the run records the
optimizer's gradient clipping (``clip/global_norm``, ``clip/norm``, ``clip/value`` of the
``optimizer`` collection, as ``exploding_gradient`` reads them: the Lightning callback records the
Trainer's ``gradient_clip_val``, the Keras callback the optimizer's ``clipnorm``), the message says the
updates are clipped already instead of advising clipping. Neither changes when the rule fires.

Defaults: ``loss="loss"`` (tensor name or full-match regex), ``window=10`` (consecutive values),
``swing=1.0``, ``min_swings=2``, ``initial=20`` (values), ``blowup=4.0``, ``min_level=0.5``, mode ``train``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._errors import ConfigError
from .._finding import Finding
from .._history import History
from .._validate import check_float, check_int
from ._base import Requirement
from ._common import check_regex, fmt
from ._gradients import clipping_limits
from ._loss import LossRule, value_interval
from ._registry import register_rule


#: A first value above this: the message names a loss summed over the batch (or targets far from unit
#: scale) first (trial 29f: F.cross_entropy(reduction="sum") over batches of 512 started at 1179,
#: 512 x ln 10; the same threshold as exploding_gradient's hint).
LARGE_FIRST = 100.0

#: A window whose median lies this many times the initial level above the loss's start (``median >= H0 +
#: (DIVERGED - 1) * L0``; ``DIVERGED * L0`` for a loss at or above 0): the swings ride on a loss that
#: diverged, and the message leads with a learning rate too high (trial 32d: SGD at lr 200 on an LSTM,
#: a window median 190x the first loss, was told "oscillates", zero_grad and MXNet's grad_req first).
#: The message only: when the rule fires does not depend on it.
DIVERGED = 10.0

#: Windows of values whose median must stay at the level too (an oscillation keeps the loss there;
#: minority-heavy batches of a weighted loss lift one window's median only).
_SETTLE = 2


@register_rule
class OscillatingLoss(LossRule):
    """Large rises and falls of the loss (see the module docstring)."""

    name = "oscillating_loss"
    summary = "the loss swings up and down by more than its initial value"
    default_modes = ("train",)

    def __init__(self, loss: str = "loss", window: int = 10, swing: float = 1.0, min_swings: int = 2,
                 initial: int = 20, blowup: float = 4.0, min_level: float = 0.5, **common: Any) -> None:
        super().__init__(**common)
        self.loss = check_regex(loss, f"{self.name}.loss")
        self.window = check_int(window, f"{self.name}.window", minimum=3, maximum=10_000)
        self.swing = check_float(swing, f"{self.name}.swing", minimum=0.0, min_inclusive=False)
        self.min_swings = check_int(min_swings, f"{self.name}.min_swings", minimum=1)
        self.initial = check_int(initial, f"{self.name}.initial", minimum=1, maximum=10_000)
        self.blowup = check_float(blowup, f"{self.name}.blowup", minimum=1.0)
        self.min_level = check_float(min_level, f"{self.name}.min_level", minimum=0.0)
        if self.min_swings * 2 > self.window - 1:
            if min_swings == 2:  # (the default: the window was set too small for it; trial 23m's twin)
                raise ConfigError(
                    f"{self.name}.window: got {self.window!r} with min_swings {self.min_swings!r} (its default); "
                    f"accepted: an integer >= 2 * min_swings + 1 ({2 * self.min_swings + 1}), or set min_swings too"
                )
            raise ConfigError(
                f"{self.name}.min_swings: got {self.min_swings!r} with window {self.window!r}; accepted: an integer "
                f">= 1 with 2 * min_swings <= window - 1"
            )

    def requirements(self) -> list[Requirement]:
        """The losses; the optimizer's gradient clipping too, optional (the message reads it: a fit that
        clips is not told to clip; the decisions never read it)."""
        return [*super().requirements(),
                Requirement("optimizer", reductions=("raw",), modes=("train",), optional=True)]

    def judge(self, history: History, name: str, steps: np.ndarray, values: np.ndarray, step: int, mode: str,
              worker: int) -> Finding | None:
        """A finding for one loss series ending at ``step`` (see the module docstring), or None."""
        if len(values) < self.window:
            return None
        signed = np.asarray(values[: self.initial], dtype=np.float64)
        first = np.abs(signed)
        l0 = float(first[0])
        if l0 == 0:
            return None
        blown_up = not np.all(np.isfinite(first)) or float(np.median(first)) > self.blowup * l0
        # the windows ending at each value new since the last save step, each against its L0
        every = value_interval(history, name)
        # (the last `every` values hold them: steps are unique within a training; not the whole run, trial 24e)
        new = 1 if every <= 1 else max(1, int(np.count_nonzero(steps[-every:] > steps[-1] - every)))
        tail = values[-(self.window + new - 1):]
        d = np.diff(tail)
        span = self.window - 1  # changes within a window
        start = len(values) - len(tail)  # index in values of tail[0]
        hit = []
        for e in range(span, len(d) + 1):
            before = start + e - span  # values before the window
            if blown_up:
                level, top = l0, float(signed[0])
            elif before < self.window:
                continue
            else:
                level = float(first[: min(before, self.initial)].max())
                top = float(signed[: min(before, self.initial)].max())
            w = d[e - span : e]
            ups, downs = int(np.count_nonzero(w > self.swing * level)), int(np.count_nonzero(w < -self.swing * level))
            end = start + e + 1  # (index in values after the window's last)
            floor = self._floor(top, level)
            if (ups >= self.min_swings and downs >= self.min_swings
                    and float(np.median(tail[e - span: e + 1])) >= floor
                    # (trial 23q: a class-weighted 95:5 fit, four minority-heavy batches in one window lifted
                    # its median over the level while the loss around it sat at a fifth of it)
                    and float(np.median(values[max(0, end - _SETTLE * self.window): end])) >= floor):
                hit.append((e, ups, downs, level, top))
                break
        if hit:
            e, ups, downs, l0, top = hit[0]
            last = tail[e - span : e + 1]
            # (a loss below 0: its initial level is a magnitude, which is none of its values; trial 32e)
            plain = top == l0
            if blown_up:
                level = (f"{'its first value' if plain else 'the magnitude of its first value'}: the median of "
                         f"{'its' if plain else 'the magnitudes of its'} first {len(first)} is more than "
                         f"{fmt(self.blowup)}x it, the loss left its starting level at once")
            else:
                level = (f"the {'largest' if plain else 'largest magnitude'} of its first "
                         f"{min(start + e - span, self.initial)} values")
            median = float(np.median(last))
            diverged = median >= top + (DIVERGED - 1.0) * l0
            return self.finding(
                step, mode,
                f"{name} oscillates: in {self.window} consecutive values it rose {ups} times and fell {downs} times "
                f"by more than {fmt(self.swing)}x its initial level {fmt(l0)} ({level}; range {fmt(float(last.min()))} "
                f"to {fmt(float(last.max()))}). {_scale_said(name, float(values[0]))}"
                + _causes(_diverged_said(median, top, l0, plain) if diverged else "",
                          clipping_limits(history, step, mode, worker)),
                tensors=[name], ups=ups, downs=downs, initial=l0, diverged=diverged, worker=worker,
            )
        return None

    def _floor(self, top: float, level: float) -> float:
        """The lowest median a window (and the two windows up to it) may hold and still count as an
        oscillation: at most ``(1 - min_level) * level`` below ``top``, the highest of the values the
        initial level ``level`` (the largest magnitude among them) was taken from. Where ``top`` is that
        magnitude (values at or above 0) this is ``min_level * level``, computed so, as it always was;
        for a loss below 0 (a Gaussian NLL, an ELBO-type loss) ``min_level * level`` is a positive bound
        that no median of the loss meets (trial 32e: the rule could never fire on such a loss)."""
        if top == level:
            return self.min_level * level
        return top - (1.0 - self.min_level) * level


def _scale_said(name: str, first: float) -> str:
    """The sentence naming a summed loss as the likely cause where the loss's first value ``first`` is
    above ``LARGE_FIRST`` (far from unit scale), else ""."""
    if not abs(first) > LARGE_FIRST:
        return ""
    return (f"{name} started at {fmt(first)}, far from unit scale: most likely a loss summed over the batch "
            "(PyTorch: reduction='sum'; a cross-entropy summed over a batch of B starts near B x ln(classes), "
            "512 x ln 10 = 1179) or regression targets far from unit scale. ")


#: The usual causes after a learning rate too high, in the order the message gives them.
_OTHER_CAUSES = (
    "gradients accumulated over steps (PyTorch: a missing optimizer.zero_grad(); MXNet: grad_req='add' without "
    "zero_grad()), a loss summed over the batch instead of averaged, which scales every update by the batch size "
    "(PyTorch: reduction='sum', a cross-entropy's first value then about the batch size x ln(classes); MXNet: "
    "trainer.step(1) on a loss summed over the batch, where trainer.step(batch_size) divides); less often a batch so "
    "small that single batches swing the loss"
)


def _diverged_said(median: float, top: float, level: float, plain: bool) -> str:
    """The sentence that leads the causes of an oscillation riding on a level far above the loss's start
    (:data:`DIVERGED`): the window's median against the initial level ``level`` (for a loss below 0, how
    far above ``top``, the highest of its first values, in multiples of ``level``, its largest magnitude)."""
    if plain:
        where = f"its median over the window, {fmt(median)}, is {fmt(median / level)}x its initial level {fmt(level)}"
    else:
        where = (f"its median over the window, {fmt(median)}, lies {fmt((median - top) / level)}x the magnitude of "
                 f"its initial level {fmt(level)} above the highest of its first values, {fmt(top)}")
    return (f"The swings ride on a level far above the loss's start ({where}; at least {fmt(DIVERGED)}x: "
            "training diverged): most likely a learning rate too high for the optimizer; lower it first (by 10x, "
            "say). ")


def _causes(diverged: str, clips: list[str]) -> str:
    """The causes and fixes of a finding: ``diverged`` (:func:`_diverged_said`, or "") leads with a
    learning rate too high, before the other causes; ``clips`` (:func:`clipping_limits`) replaces the
    advice to clip by saying the optimizer clips already."""
    causes = (f"{diverged}Other causes: {_OTHER_CAUSES}" if diverged
              else f"Usual causes: a learning rate too high for the optimizer, {_OTHER_CAUSES}")
    if not clips:
        return f"{causes}; lower the learning rate (or average the loss), add warm-up or gradient clipping."
    return (f"{causes}; lower the learning rate (or average the loss), add warm-up. The optimizer clips the gradients "
            f"it applies already (to a {', '.join(clips)}): the updates are clipped, and more clipping is not the "
            "fix.")

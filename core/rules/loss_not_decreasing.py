"""Loss not decreasing: the loss has not gone down since training started, and is not going down.

Condition: ``s - s_0 >= N and (L_low > L_0 - min_decrease * |L_0| or (L_0 - L_low <= 3 * 1.2533 * sigma_0 * sqrt(1/m_0 + 1/m) and z_all > -1 and not few))
and not (slope < 0 and L_low + H * slope < L_0 - min_decrease * |L_0|)
and not (L_low < l[s_0] - min_decrease * |l[s_0]| and (l[s_0] - L_low > 10 * sigma or l[s_0] - h >= h - g))``
with ``L_low = min_t median(l[t - (k-1)*I .. t])`` and ``L_0 = median(l[s_0 .. s_0 + (w-1)*I])``,
for each loss matching ``loss`` (``s_0``: the step of its first value; ``l[a .. b]``: its values at
steps ``a`` to ``b``; ``few``: it holds 3 values or fewer, its last ``min_decrease`` below its first; ``I``: the train save interval; ``n``: the save steps so far,
``w = min(window, n // 2)``, ``k = min(w, 5)``; ``t`` over the steps holding a value with
``t >= s_0 + w*I``): the lowest level the loss has held over ``k`` consecutive save steps, the last
of them after its first ``w``, has not gone ``min_decrease`` below its level over those first ``w``.
(Ending after them: the first ``k`` values of a loss rising from its first step sit below the median
of the first ``w``, and read as a fall, a booster's metric rising 4% a round, trial 26d; a window
that ends after the first ``w`` has its middle after theirs.) With one value per save step (a loss not
kept at every step: ``I`` is then 1 in this formula and the steps are its values) these are the
first ``w`` values and windows of ``k`` consecutive values; with every step's value (``every_step``,
the default for the training loss) the same spans of steps hold ``I`` times as many values, so a
denser series is no likelier to dip below the threshold by chance. Nor is a fall within the noise
progress: the lowest of many window medians of noisy values dips below the start by chance (per-step
losses of batches of 16 sit 20% apart, and a frozen model's lowest median fell 6-11% below its start,
trial 21c), so the fall must also exceed 3 standard errors of the difference of two medians
(``sigma_0``: the noise of one value over the first span, as ``sigma`` below; ``m_0`` and ``m``: the
values in the first span and in a window), or the whole series must show some sign of a fall
(``z_all``: its Mann-Kendall statistic, below -1; a loss falling steadily from its first step with
that much noise fell 10-26% by an early verdict, when the spans are short, trial 21d; three values
or fewer hold no measure of their noise apart from the fall: there a fall counts where the last
value is ``min_decrease`` below the first, ``few``). A flat loss spared by chance at one save is
judged again at the next. A run that made progress once (beyond its noise: the last clause below; a run that fell early and then diverged wildly may not show it, and is stopped here as not learning) never fires (a loss that fell and plateaued, or a slow starter that
has just begun to fall: judged on its last few values, a heavy-tailed noisy loss such as a
class-weighted one would fire sooner or later); a run that learned and then lost it all is for
the divergence rules (``exploding_tensor``, ``oscillating_loss``; the opt-in ``loss_diverging``). The last part spares a slow starter
that is on its way down when the verdict is due: ``slope`` is the loss's trend over the last half of
its steps so far (``D = (s - s_0) / 2`` steps: the Theil-Sen slope of the loss against the step there;
0 unless a Mann-Kendall test finds the fall there significant, ``z < -2.33``, so batch noise does not
delay a verdict); a loss that, going on at that pace for
another ``H`` steps, would have cut ``min_decrease`` is judged again at the next save (plain SGD on a
small ReLU network can hold its initial loss for a sixth of training and then learn well; a loss that
is flat, or creeps down at a learning rate far too low, has no such trend). ``H = D``, or, with the
planned training length ``P`` known and ``num_steps`` not given, ``H = max(D, 0.4 * P - (s - s_0))``: the
pace would cut it by 40% of training (plain SGD at lr 0.05 on a digits MLP cut its loss 1-2% by 10%
of training and 5% by 15-26%, then reached 0.86 accuracy, trial 22c; a loss learning a shuffled
task's label prior with a significant trend is then judged when that trend has flattened, later). The last clause spares
a loss that fell fast and then held (XGBoost's train metric, saved every 10 rounds, at its floor
from round 20 on: the first ``w`` saves are the plateau already): a loss now ``min_decrease`` below
its very first value, by more than 10 times its noise, made progress; ``sigma`` is the noise of one
value, from the step-to-step differences of its last ``NOISE_POINTS`` values (``1.4826 *
MAD(diff) / sqrt(2)``), so a noisy flat loss whose first value happened to be high does not count;
or the first value stands above every later one by more than those spread among themselves (``h``
and ``g``: the highest and the lowest later value; 4 values or more): a noise estimated from a dozen
values is too uncertain to weigh a fall against (a loss saved once a save step with 20% noise, which
fell 70% at its first save and held, was stopped, trial 42i), while a flat noisy loss's first value
stands so high with chance 6.5% at 4 values, 1.5% at 6 and 0.06% at 12 (Gaussian noise), and is
judged again at the next save.

``N`` (steps) is ``num_steps`` when given; by default it scales with the planned training length
``P`` when the integration knows it (Lightning, Keras, XGBoost's ``num_boost_round=`` or a trial, or ``Session.set_planned_steps``):
``N = max(50, floor(0.1 * P) - I + 1)``, with ``I`` the save interval (for a loss not kept at every
step: the spacing of its last two values). The rule can only fire at a save step, and the first save at least ``N`` steps
in comes up to ``I - 1`` steps later, at ``floor(0.1 * P)`` at the latest: the window ends where the
verdict still lands within 10% of the planned training (a run that has not cut its loss by 5% in its first 10% is
not learning; healthy runs with a slow start, a long learning-rate warm-up or an LSTM's early
plateau, can sit at their initial loss for 5-9% of training; the floor leaves the first optimiser
steps alone), and ``N = 200`` when ``P`` is unknown. A training that ends before ``N`` steps after the loss's
first value gets no verdict, and nothing says so (a short run: give ``num_steps`` to judge it).

``min_decrease`` is a fraction of the level's magnitude (``L_0 - min_decrease * |L_0|``, which is
``(1 - min_decrease) * L_0`` for a loss at or above 0): a loss below 0 (a Gaussian NLL, an ELBO-type
objective) that starts at -1 has to reach -1.05. Such a loss has no natural 0, so the same fall is a
larger or smaller percentage as the loss sits nearer to 0 or farther from it (give ``min_decrease``
for the loss's own scale). ``min_decrease=0.05``: any learning run cuts more, a slowly learning one
with a noisy class-weighted loss included (-12% at 10% of training); a run that learns only the label
prior may cut less or more (shuffled labels on a 63:37 binary task: ln 2 -> 0.66, 5%), which this
rule cannot tell from slow learning.

The finding's ``details``: ``start`` (``L_0``), ``lowest`` (``L_low``), ``now`` (the loss's level
now: the median of its values over its last ``k`` saves, the level the message names) and
``num_steps`` (``N``).

Defaults: ``loss="loss"`` (a tensor name, or a regular expression matched in full against the
``losses`` and ``metrics`` collections), ``num_steps=None`` (the formula above), ``min_decrease=0.05``,
``window=10`` (saves), mode ``train``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._errors import TripwireError
from .._finding import Finding
from .._history import History
from .._validate import check_float, check_int
from ._common import check_regex, fmt, fmt_vs, names_in, planned_steps, scaled_steps
from ._loss import LossRule, first_values, lowered, lowest_level, lowest_window_median, value_interval
from .overfit import mann_kendall_z
from ._registry import register_rule

#: Default window when the planned training length is known:
#: max(FLOOR, floor(FRACTION * planned) - save interval + 1).
FRACTION = 0.1
FLOOR = 50
#: Default window when it is not known.
FALLBACK = 200
#: The level reached: the lowest median of this many consecutive saved values.
BEST_OF = 5
#: A falling trend counts when its Mann-Kendall statistic is below -TREND_Z (one-sided p < 0.01)...
TREND_Z = 2.33
#: ... computed over at most this many points (block medians of a longer series).
TREND_POINTS = 200
#: A fall from the very first value counts as progress beyond this many noise standard deviations...
NOISE_SDS = 10.0
#: ... or beyond this many where the first value is above every later one, of at least
#: ``FIRST_MAX_VALUES`` values.
FIRST_MAX_VALUES = 4
#: ... the noise estimated from the differences of at most this many last values.
NOISE_POINTS = 2000
#: A fall counts as progress beyond this many standard errors of the difference of the two medians
#: (``1.2533 * sigma * sqrt(1/m_0 + 1/m)``, ``sigma`` the noise of one value over the first span, ``m_0``
#: and ``m`` the values in the first span and in a window): the lowest of many window medians dips
#: below the start by chance.
PROGRESS_Z = 3.0
#: ... unless the whole series falls with a Mann-Kendall statistic below -PROGRESS_TREND_Z (one-sided
#: p < 0.16: some sign of a fall; a flat loss spared by chance at one save is judged at the next).
PROGRESS_TREND_Z = 1.0
#: With the planned training length ``P`` known (and ``num_steps`` not given), a significant fall is
#: projected up to this fraction of ``P`` (trial 22c: plain SGD at lr 0.05 on a digits MLP cut its loss
#: 1-2% by 10% of training, 5% by 15-26%, and reached 0.86-0.87 accuracy; stopped at 9% in 6 of 6 seeds).
HORIZON_FRACTION = 0.4
#: A starting level below this: the message names a degenerate task (one class, a leaked target).
NEAR_ZERO = 1e-4
#: The message says the loss fell at first and then rose where the lowest median of this many
#: consecutive values lies ``min_decrease`` below its first value, beyond ``DIP_SDS`` times the noise
#: of one value (a single first value high by chance and the lowest of many medians low by chance
#: make up some 4-5), and the loss has since climbed back at least ``RISEN_BACK`` of that fall
#: (trial 27g). The message only: the verdict does not read it.
DIP_VALUES = 5
DIP_SDS = 6.0
RISEN_BACK = 0.25


def _unchanged_weights(history: History, worker: int, since: int) -> str:
    """What the run shows of parameters not trained, or ``""``: the weights (the ``weights``
    collection's ``l2``, where captured) whose every saved train value since step ``since`` (two at
    least) is the same, named beside the count of those that changed (a frozen backbone, a layer
    left out of the optimizer). Nothing is said where no weight was saved twice with its ``l2``."""
    still: list[tuple[str, float]] = []
    moved = 0
    for name in names_in(history, "weights"):
        try:
            steps, values = history.series(name, "l2", "train", worker)
        except (TripwireError, KeyError, ValueError):  # (no l2 kept, no train record of this worker)
            continue
        values = np.asarray(values, dtype=np.float64)[np.asarray(steps) >= since]
        if len(values) < 2 or not np.all(np.isfinite(values)):
            continue
        if np.all(values == values[0]):
            still.append((name, float(values[0])))
        else:
            moved += 1
    if not still:
        return ""
    shown = ", ".join(f"{n} (l2 {fmt(v)})" for n, v in still[:3]) + (f" and {len(still) - 3} more" if len(still) > 3 else "")
    # (every weight still: "all 3 weights", not "none of the model's weights ... did not change", 37)
    whole = (f"{len(still)} of the {len(still) + moved} weights" if moved
             else f"all {len(still)} weights" if len(still) > 1 else "the one weight")
    return (f"Here: {whole} saved since step {since} did not change at all ({shown}): parameters not trained "
            f"(frozen: requires_grad=False, a Keras layer with trainable=False; or left out of the optimizer), "
            f"{'while the others train' if moved else 'or no optimizer step taken'}.")


@register_rule
class LossNotDecreasing(LossRule):
    """The loss made no progress over the first ``num_steps`` steps (see the module docstring)."""

    name = "loss_not_decreasing"
    summary = "the loss has not decreased since training started"
    default_modes = ("train",)

    def __init__(self, loss: str = "loss", num_steps: int | None = None, min_decrease: float = 0.05, window: int = 10,
                 **common: Any) -> None:
        super().__init__(**common)
        self.loss = check_regex(loss, f"{self.name}.loss")
        self.num_steps = check_int(num_steps, f"{self.name}.num_steps", minimum=1, allow_none=True)
        self.min_decrease = check_float(min_decrease, f"{self.name}.min_decrease", minimum=0.0, maximum=1.0, max_inclusive=False)
        self.window = check_int(window, f"{self.name}.window", minimum=1, maximum=10_000)
        self._held: dict[str, tuple[int, int, float]] = {}  # series -> (span, last window end, lowest median)
        self._windows: dict[str, tuple[int, int, float]] = {}  # series -> (k, values read, lowest median)

    def restart(self) -> None:
        super().restart()
        self._held, self._windows = {}, {}  # (the lowest levels of the earlier trainings' values)

    def steps_needed(self, history: History, interval: int = 0) -> int:
        """``N``: ``num_steps``, or the default scaled by the planned training length, one save
        ``interval`` (steps between saved values) shorter so that the verdict lands inside it."""
        planned = planned_steps(history)
        if self.num_steps is not None or planned is None:
            return scaled_steps(history, self.num_steps, FRACTION, FLOOR, FALLBACK)
        return max(FLOOR, int(np.floor(FRACTION * planned + 1e-9)) - max(1, int(interval)) + 1)

    def _horizon(self, history: History, elapsed: float, span: float) -> float:
        """``H``: the steps over which a significant fall is projected (see the module docstring);
        ``elapsed``: the steps since the loss's first value (a continued training's steps start past 0:
        trial 24a)."""
        planned = planned_steps(history) if self.num_steps is None else None
        if planned is None:
            return span
        return max(span, HORIZON_FRACTION * planned - elapsed)

    def judge(self, history: History, name: str, steps: np.ndarray, values: np.ndarray, step: int, mode: str,
              worker: int) -> Finding | None:
        """A finding for one loss series ending at ``step`` (see the module docstring), or None."""
        every = value_interval(history, name)
        spacing = every if every > 1 else (int(steps[-1] - steps[-2]) if len(steps) >= 2 else 0)
        needed = self.steps_needed(history, spacing)
        if step - steps[0] < needed:
            return None
        # n: saves so far (values when one is saved per save step, else save steps spanned)
        n = len(values) if every <= 1 else int(steps[-1] - steps[0]) // every + 1
        w = min(self.window, n // 2)
        if w < 1:
            return None
        k = min(w, BEST_OF)
        # the lowest level reached: the median of k consecutive saved values, in a window that ends
        # after the first w (a heavy-tailed, noisy loss judged on its last few values alone would fire
        # sooner or later). Ending after them (trial 26d): the first k values of a loss rising from
        # its first value sit below the median of the first w, and a booster whose metric rose at
        # every round, 220 to 1.7e9, read as one that had fallen 11%; a window ending after the first
        # w has its middle after theirs. (The cache is per w: w grows with the first saves, and the
        # windows that then end inside the first span leave the minimum.)
        if every <= 1:
            start = float(np.median(values[:w]))
            now = lowest_window_median(self._windows, f"{worker}:{name}:{w}", values[w - k + 1:], k)
        else:  # every step's value: the spans of w and of k consecutive save steps
            start = float(np.median(first_values(steps, values, w, every)))
            after = int(np.searchsorted(steps, steps[0] + (w - k + 1) * every, side="left"))
            now = lowest_level(self._held, f"{worker}:{name}:{w}", steps[after:], values[after:], (k - 1) * every + 1)
        if not np.isfinite(now):  # no complete window yet
            return None
        # the lowest of many window medians dips below the start by chance alone: with small
        # batches (per-step losses 20% apart) a frozen model's dipped 6-11% (trial 21c); a fall
        # counts as progress only beyond PROGRESS_Z standard errors of the two medians' difference,
        # or with a significant downward trend over the whole series
        m0 = w if every <= 1 else len(first_values(steps, values, w, every))
        m1 = k if every <= 1 else (k - 1) * every + 1
        # (the noise of the start's values: a loss that fell and then grew spiky, a class-weighted one,
        # made its progress in calm)
        start_sd = _noise_sd(values[:m0])
        noise_bound = PROGRESS_Z * 1.2533 * start_sd * np.sqrt(1.0 / max(m0, 1) + 1.0 / m1)
        fell = now <= lowered(start, self.min_decrease)
        # (and no sign of a fall in the whole series either, PROGRESS_TREND_Z: a loss falling steadily
        # from its first step with noise as large had fallen 10-26% at a verdict due early, when the
        # spans are short, trial 21d; a flat one not judged now, by chance, is judged at each save)
        z_all = _falls_z(values) if fell and start - now <= noise_bound else 0.0
        # (three values or fewer hold no measure of their noise apart from the fall: a fall counts where
        # the last value is min_decrease below the first, and the next save judges again; trial 42e: a
        # booster saved every 50 rounds, its logloss down 92% at round 50, was stopped as "within the
        # noise", as one saved every 10 rounds and judged at round 20 on three values was; trial 42i:
        # 1.408, 0.193, 0.339, a noisy loss that fell and held; trial 42l: 1.0, 1.0, 0.1, a slow starter)
        few = len(values) <= 3 and float(values[-1]) <= lowered(float(values[0]), self.min_decrease)
        within_noise = fell and not few and start - now <= noise_bound and z_all > -PROGRESS_TREND_Z
        if not fell or within_noise:
            first = float(values[0])
            if now < lowered(first, self.min_decrease) and _fell_from_first(values, first - now):
                return None  # fell from its first value beyond its noise, then held: progress
            span = (step - float(steps[0])) / 2
            # (the trend of the last half only: that of the whole window too spared slow
            # steady learners, trial 17h, but also shuffled labels learning the label prior)
            slope = _trend(steps, values, step - span)
            if slope < 0 and now + self._horizon(history, step - steps[0], span) * slope < lowered(start, self.min_decrease):
                return None  # on its way down (a significant trend): judged again at the next save
            # (trial 23m: a loss held at 0 read "fallen inf%", "beyond nan%", with numpy's RuntimeWarning;
            # a flat loss at -1 read "risen 0%")
            steps_said = f"in {int(step - steps[0])} steps"
            # (trial 25d: with few saves, "median over its first 1 saves", "lowest median over 1
            # consecutive saves": one value each)
            them = "after it" if w == 1 else "ending after them"
            lowest = f"lowest value {them} {fmt(now)}" if k == 1 else None
            # (trial 27g: with every step's value kept, "the median of its last 3 values" was the median
            # of 21 values, steps 30-50: each level names the values it is the median of)
            latest = float(np.median(values[-m1:]))  # (a window's values: with every step's, not its last k)
            if every <= 1:
                levels = (f"first value {fmt(start)}" if w == 1 else f"median of the first {w} values {fmt(start)}") + \
                    f", {lowest or f'lowest median of {k} consecutive values {them} {fmt(now)}'}"
                latest_said = "its last value" if k == 1 else f"the median of its last {k} values"
                first_span = "its first value" if w == 1 else f"its first {w} values"
            else:
                levels = (f"its first value {fmt(start)}" if w == 1 else
                          f"median of its {m0} values at steps {int(steps[0])}-{int(steps[m0 - 1])} (its first {w} "
                          f"saves) {fmt(start)}") + \
                    f", {lowest or f'lowest median of {m1} consecutive values ({k} consecutive saves) {them} {fmt(now)}'}" \
                    f": every step's value, saves {every} steps apart"
                held = steps[-m1:]  # (fewer than m1 where the values are not kept at every step after all)
                latest_said = ("its last value" if len(held) == 1 else
                               f"the median of its {len(held)} values at steps {int(held[0])}-{int(held[-1])}, its "
                               f"last {k} saves")
                first_span = "its first value" if w == 1 else f"its first {w} saves"
            causes = (
                "Usual causes: a learning rate (or a booster's eta) far too low or too high, parameters not trained "
                "(frozen, not passed to the optimizer, a missing optimizer.step()), updates held near 0 (gradients "
                "clipped to a tiny max_norm, a weight decay far too large: 1.0 where 1e-4 was meant holds the "
                "weights at 0), labels not matching inputs, "
                "a loss that does not fit the output (its activation, a booster's objective), or a target whose "
                "shape differs from the output's so that the loss broadcasts (MSE of predictions (B, 1) against "
                "targets (B,) compares every prediction with every target, (B, B), and holds near the targets' "
                "variance; PyTorch warns 'Using a target size ... that is different to the input size'). "
                "Not a fault: a "
                "fine-tune of an already trained model (little left to lose), a learning-rate warm-up still "
                "running (give num_steps beyond it), or the plateau some models sit on before they pick up a "
                "task (transformers, sequence models: the loss near its first value for 10-50% of training, then "
                "falling; give num_steps beyond it, or use record to watch before stopping), a heavy-tailed loss "
                "judged early in a short training (class weights with small batches: batch losses 5-15x apart hide "
                "a fall over the first 50 steps; give num_steps a few hundred steps), or a loss that is no "
                "measure of progress: an adversarial loss (a GAN's discriminator holds about ln 2 = 0.69 at its "
                "equilibrium, and its generator's loss does not fall either), a policy-gradient surrogate without "
                "a baseline (REINFORCE: its sign and scale follow the rewards, and it rises as the policy earns "
                "more): point loss= at a loss that should fall (a validation error), or leave the rule out."
                if abs(start) >= NEAR_ZERO else
                f"It was near 0 from its first values (below {fmt(NEAR_ZERO)}): nothing is left to learn, as "
                "with a label column that holds one class only, or the target copied into the inputs."
            )
            if now == start:
                # (trial 29a: "has not changed in 59 steps (it holds 2.326)" of a loss moving 2.310-2.359 at
                # every step: what has not changed is its level, a median)
                said = (f"{name}'s level has not changed {steps_said} (its start level and its lowest level since, "
                        f"each a median of its values, are both {fmt(now)})")
            else:
                said = (f"{name} has {'risen' if now > start else 'fallen only'} "
                        f"{_change(start, now, None if now > start else self.min_decrease * 100)} {steps_said}")
            noise_said = ""
            # (fell enough, but within the noise: trial 21c; a negative start's threshold is above it)
            if within_noise and now < start and now <= start - self.min_decrease * abs(start):
                trend = (f"a falling trend over all its values, a Mann-Kendall z below {fmt(-PROGRESS_TREND_Z)} "
                         f"(here {fmt(z_all)})")
                if np.isfinite(noise_bound):
                    # (trial 28g: the noise figures themselves, so that a large fall judged to be noise reads as one)
                    beyond = (f"a fall counts beyond {_change(start, start - float(noise_bound))} ({fmt(noise_bound)}), "
                              f"{fmt(PROGRESS_Z)} standard errors of the difference of two medians, from the noise of "
                              f"one value over {first_span} (sd {fmt(start_sd)}), or with {trend}: the lowest of many "
                              "medians of noisy values dips below the start by chance")
                elif len(values) <= 3:  # (trial 42m: the trend and "many noisy values" were said of three values)
                    beyond = (f"{len(values)} values give no measure of their noise apart from the fall, so a fall counts "
                              f"where the last value is {fmt(self.min_decrease * 100)}% below the first; here it is "
                              f"{fmt(float(values[-1]))}, against {fmt(float(values[0]))}")
                else:  # (trial 25d: "a fall counts beyond by inf": one value at the start measures no noise)
                    beyond = ("its start is one value, which gives no measure of its noise, so a fall counts only with "
                              f"{trend}: the lowest of many noisy values dips below the start by chance")
                noise_said = f"within the noise of its values ({beyond})"
                said = f"{name} has fallen {_change(start, now)} {steps_said}, {noise_said}"
            risen = latest > start + self.min_decrease * abs(start)
            if risen:  # (trial 17d: a loss up 30% read "has fallen
                # only 1.2%"; a rise within the batch noise is not told as one, trial 17h)
                # (trial 27g: "it fell at most 3.8% below its start" of a loss that had fallen 87% from its
                # first value within the start span: the start level is named as what it is)
                lowest_said = (f"its lowest level after {first_span} was {_change(start, now)} below that start level"
                               if now <= start else f"it has stayed above its start level since {first_span}")
                if noise_said:  # (trial 28g: "58.22% below that start level", and then "expected a decrease of 5%")
                    lowest_said += f", a fall that does not count: it is {noise_said}"
                said = (f"{name} has risen {_change(start, latest)} {steps_said}, from its start level {fmt(start)} to "
                        f"{fmt(latest)} ({latest_said}); {lowest_said}")
            first = float(values[0])
            dip = _fell_first(steps, values, self.min_decrease) if abs(start) >= NEAR_ZERO else None
            if dip is not None and latest - dip[0] >= RISEN_BACK * (first - dip[0]):
                # (trial 27g: a loss that fell 87% from its first value within the start span and then
                # climbed was told as one that never fell; a missing zero_grad's loss fell 39% first)
                low, a, b = dip
                versus = f"{_change(first, latest)} {'above' if latest > first else 'below'} its first value"
                now_said = f"; its level now is {versus}" if risen else f", to {fmt(latest)} ({latest_said}), {versus}"
                said = (f"{said}; it had first fallen from its first value {fmt(first)} to {fmt(low)} (the "
                        f"median of its values at steps {a}-{b}, its lowest over {DIP_VALUES} consecutive values) and "
                        f"then rose again{now_said}")
                causes = ("A loss that fell at first and then rose most often has a learning rate far too high, or one "
                          "that grew too high (a warm-up to too high a peak, a learning-rate scheduler stepped at every "
                          "batch where it was meant once per epoch), or gradients that add up over steps (PyTorch: a "
                          "missing optimizer.zero_grad(); MXNet: grad_req='add' without zero_grad()), or data fed in "
                          "order, not shuffled, whose loss rises at each class boundary as the batches move on to a "
                          "class not seen for a while (data sorted by label with shuffle=False: pass shuffle=True); "
                          "the opt-in loss_diverging judges such a climb back. " + causes)
            elif (abs(start) >= NEAR_ZERO and now - first > self.min_decrease * abs(first)
                    and now - first > NOISE_SDS * _noise_sd(values)):
                # (trial 27f: a booster at eta 5 went 0.137 -> 9.05 in two rounds and held; the start level,
                # the median of its first values, was the blown-up one, and the message said "has not changed")
                if risen:  # (still rising: said so above)
                    said = f"{said}, from its first value {fmt(first)}"
                else:
                    said = (f"{name} rose from its first value {fmt(first)} to {fmt(start)} within {first_span} "
                            f"and has not come back down {steps_said} (its lowest level since: {fmt(now)})")
                causes = ("A loss that rises from its first value and stays up most often has a learning rate (or a "
                          "booster's eta) far too high. " + causes)
            frozen = _unchanged_weights(history, worker, int(steps[0]))
            if frozen:  # (trial 33e F2: a frozen backbone read the same dozen causes as shuffled labels)
                causes = f"{frozen} {causes}"
            return self.finding(
                step, mode,
                f"{said} (start level: {levels}; "
                f"expected a decrease of at least {fmt(self.min_decrease * 100)}%"
                f"{', beyond the noise' if noise_said else ''}). {causes}",
                tensors=[name], start=start, now=latest, lowest=now, worker=worker, num_steps=needed,
            )
        return None


def _change(start: float, now: float, limit: float | None = None) -> str:
    """How far ``now`` is from ``start``, for messages: a percentage of ``|start|``, or (a start at 0,
    where there is none) the difference itself (trial 23m: "fallen inf%"). ``limit``: the percentage it
    is compared with, beside which it is written with the digits that tell them apart (trial 37j: a fall
    of 4.99999% read "fallen only 5% ... expected a decrease of at least 5%")."""
    diff = abs(now - start)
    if start == 0 or not np.isfinite(diff):
        return f"by {fmt(diff)}" + (" (from 0)" if start == 0 else "")
    pct = diff / abs(start) * 100
    return f"{fmt_vs(pct, limit)[0] if limit is not None else fmt(pct)}%"


def _fell_first(steps: np.ndarray, values: np.ndarray, min_decrease: float) -> tuple[float, int, int] | None:
    """``(level, first step, last step)`` of the lowest median of ``DIP_VALUES`` consecutive values
    where it lies ``min_decrease`` below the first value and beyond ``DIP_SDS`` times the noise of
    the values up to it (:func:`_curve_noise_sd`: a fall from the first value, not a chance dip of
    noisy values), else None."""
    if len(values) < DIP_VALUES + 1:
        return None
    medians = np.median(np.lib.stride_tricks.sliding_window_view(values, DIP_VALUES), axis=1)
    i = int(np.argmin(medians))
    first, low = float(values[0]), float(medians[i])
    fall = first - low
    if fall < min_decrease * abs(first) or fall <= DIP_SDS * _curve_noise_sd(values[: i + DIP_VALUES]):
        return None
    return low, int(steps[i]), int(steps[i + DIP_VALUES - 1])


def _curve_noise_sd(values: np.ndarray) -> float:
    """The standard deviation of one value's noise around a curve, from the second differences of
    the values (``1.4826 * MAD / sqrt(6)``): a steady fall leaves them at 0, where the first
    differences of a fall over a few saved values read as noise (inf for fewer than 3 values)."""
    d2 = np.diff(values[-NOISE_POINTS:], 2)
    if not len(d2):
        return float("inf")
    return float(1.4826 * np.median(np.abs(d2 - np.median(d2))) / np.sqrt(6.0))


def _noise_sd(values: np.ndarray) -> float:
    """The standard deviation of one value's noise, from the step-to-step differences of the last
    ``NOISE_POINTS`` values (robust: ``1.4826 * MAD / sqrt(2)``; a trend or one jump hardly moves it)."""
    d = np.diff(values[-NOISE_POINTS:])
    if not len(d):
        return float("inf")
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / np.sqrt(2.0))


def _fell_from_first(values: np.ndarray, fall: float) -> bool:
    """Whether ``fall`` (the first value less the level now) lies beyond the noise: ``NOISE_SDS``
    times the noise of one value, or the first value stands above every later one by more than those
    spread among themselves (``l_1 - max(rest) >= max(rest) - min(rest)``, of ``FIRST_MAX_VALUES``
    values or more). A flat noisy loss's first value stands so high with chance 6.5% at 4 values,
    1.5% at 6 and 0.06% at 12 (Gaussian noise; 7.4%, 2.4% and 0.6% with Student-t noise of 3
    degrees of freedom), and is judged again at the next save; the noise of one value, estimated from
    a dozen values, is too uncertain for that test (trial 42i: a loss saved once a save step with 20%
    noise fell 70% at its first save and was stopped at 4 to 12 values, its fall 9-10 times its noise)."""
    if fall > NOISE_SDS * _noise_sd(values):
        return True
    if len(values) < FIRST_MAX_VALUES:
        return False
    rest = values[1:]
    high, low = float(np.max(rest)), float(np.min(rest))
    return bool(values[0] > high and values[0] - high >= high - low)


def _falls_z(values: np.ndarray) -> float:
    """The Mann-Kendall statistic of the whole series (over at most ``TREND_POINTS`` block medians)."""
    va = values
    if len(va) > TREND_POINTS:
        va = np.array([np.median(b) for b in np.array_split(va, TREND_POINTS)])
    return float(mann_kendall_z(va)) if len(va) >= 3 else 0.0


def _trend(steps: np.ndarray, values: np.ndarray, since: float) -> float:
    """The loss per step over the steps from ``since`` on (the Theil-Sen slope: the median of the
    slopes between pairs of values) when it falls significantly there (a Mann-Kendall statistic
    below ``-TREND_Z``), else 0; over at most ``TREND_POINTS`` block medians."""
    # (an int: a float searched in the int64 steps made numpy convert them all, trial 24i)
    first = int(np.searchsorted(steps, math.ceil(since), side="left"))
    st, va = steps[first:].astype(np.float64), values[first:]
    if len(st) < 4:
        return 0.0
    if len(st) > TREND_POINTS:  # block medians
        st = np.array([np.median(b) for b in np.array_split(st, TREND_POINTS)])
        va = np.array([np.median(b) for b in np.array_split(va, TREND_POINTS)])
    if mann_kendall_z(va) > -TREND_Z:
        return 0.0
    i, j = np.triu_indices(len(st), 1)
    return float(np.median((va[j] - va[i]) / (st[j] - st[i])))

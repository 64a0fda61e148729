"""Weight update ratio: parameters move far too much, or not at all, per step.

Condition: ``max_p r_p > max_ratio`` on ``patience`` consecutive evaluations, or ``max_p r_p < min_ratio``
on ``low_saves`` consecutive evaluations (a schedule that touches 0 for a moment is fine; the rule
evaluates at every save step, or every ``every`` steps when that is set), where
``r_p = ||w_p(t) - w_p(t-1)|| / ||w_p(t-1)||`` is the ``optimizer`` tensor ``update_ratio/<param>``
(parameters matching ``include`` and not ``exclude``). A healthy ratio is around 1e-3.

The message names the cause the run's records point to. A ratio too large: a learning rate far too
high, or weights near 0 beside an ordinary update (a weight decay far too large: 1.0 where 1e-4 was
meant shrinks the weights toward 0 at a learning rate of 0.05, trial 27g); where the weights' norms
are recorded (``weights``: ``l2``, or ``mean`` and ``std``), a weight ``SHRUNK`` (10) times smaller
than at its first save names the weight decay alone. A ratio too small: a learning rate recorded as
``lr/<group>`` that has decayed to ~0 (at the largest ratio per unit of learning rate of an earlier
save of this training it gives ratios below ``min_ratio``; with no such save, it is below
``TINY_LR``, 1e-8: a scheduler stepped per batch where it was meant per epoch), with no advice to
lower it, or, where every learning rate recorded in this training was that small (from its first
save on), a mistyped initial learning rate, its first value and step named; no parameter moving at
all with every recorded gradient exactly 0 (dead units, often after a learning rate far too high);
no parameter moving while the recorded gradients are not 0 (the optimizer does not apply them:
parameters not given to it, no ``optimizer.step()``). The gradients
are called 0 only where the recorded ones are, or, not recorded, where a learning rate recorded above
0 (and not ~0) leaves nothing else to stop the updates after earlier ones.

Update ratios are what an integration offers (the Lightning, Keras and MXNet callbacks, at save steps
where the optimizer updates the weights: not at a step fp16's loss scaler skips, whose ratios would
read 0); a hand-written loop offers them with ``tripwire.integrations.torch.capture_update_ratios``.
A run whose ``optimizer`` collection holds none (learning rates only), or none that ``include`` and
``exclude`` leave in, is named at its end as leaving the rule nothing to read.

Defaults: ``min_ratio=1e-8``, ``max_ratio=1.0``, ``low_saves=5``, ``include=".*"``,
``exclude="(?i)(bias|gamma|layer_?scale|token)"`` (parameters that start at or near zero on purpose
have huge ratios at first: zero-initialised biases, LayerScale ``gamma`` at 1e-6 (ConvNeXt, timm), a
ViT's ``cls_token``), ``patience=1``, mode ``train``; a non-finite ratio is skipped (+inf: the
weight was all zeros and moved; NaN: it was all zeros and did not move, 0/0, or the weights are NaN, which
``exploding_tensor`` reports on ``weights``).
"""

from __future__ import annotations

import math
from typing import Any

from .._history import History
from .._validate import check_float, check_int
from ._base import Requirement
from ._common import (
    NO_DATA, BuiltinRule, check_ordered, check_regex, filtered_out, fmt, fmt_vs, names_in, value_at
)
from ._registry import register_rule

#: A learning rate below this is ~0 where no earlier save tells how far it moves the weights (a
#: ratio and a learning rate recorded at one save): the low-ratio message names it, with no advice
#: to lower it.
TINY_LR = 1e-8
#: A weight whose norm is this many times smaller than at its first save has shrunk toward 0: the
#: high-ratio message names the weight decay, not the learning rate.
SHRUNK = 10.0


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

    def nothing_read(self, history: History) -> str | None:
        """Where the ``optimizer`` collection holds tensors (learning rates, the loss scale) but no
        update ratio this rule reads: none at all (a hand-written loop that offers none: a Session
        derives no update ratio from the weights offered, trial 30a; every save step skipped by fp16's
        loss scaler), or none that ``include`` and ``exclude`` leave in. None where it read one, or
        where the collection holds nothing (the session's own "had nothing to read" says that)."""
        held = names_in(history, "optimizer")
        if not held:
            return None
        ratios = [n for n in held if n.startswith("update_ratio/")]
        shown = ", ".join(held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else "")
        if not ratios:
            return (f"rule {self.name!r} had nothing to read: no update ratio (update_ratio/<param>, of the optimizer "
                    f"collection) was captured (it holds: {shown}), so the rule never judged. The Lightning, Keras and "
                    f"MXNet integrations take them at the save steps where the optimizer updates the weights (not at "
                    f"a step fp16's loss scaler skips); a hand-written loop offers them with "
                    f"tripwire.integrations.torch.capture_update_ratios(model, plan) around optimizer.step() (a "
                    f"Session derives none from the weights offered; docs/rules.md, \"Names the rules read\")")
        return filtered_out(self, history, "optimizer", "update ratio", self.include, self.exclude,
                            prefix="update_ratio/")

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
                    step, mode, self._too_large(history, top_name, top, step, mode, worker),
                    tensors=[top_name], ratio=top, worker=worker,
                )
            low = self._low[str(worker)] = self._low.get(str(worker), 0) + 1 if top < self.min_ratio else 0
            if low >= self.low_saves:
                shown, limit = fmt_vs(top, self.min_ratio)
                head = (f"the largest update/weight ratio is {shown} ({top_name}; limit {limit}) for {low} saves "
                        "in a row")
                return self.finding(
                    step, mode, head + self._too_small(history, names, top, step, mode, worker),
                    tensors=[top_name], ratio=top, worker=worker,
                )
        return None if seen else NO_DATA

    # ------------------------------------------------------------------------------ the messages
    def _rates(self, history: History, step: int, mode: str, worker: int) -> list[tuple[str, float]]:
        """``(name, value)`` of each learning rate (``lr/*`` of the optimizer collection) recorded at ``step``."""
        rates = [(n, value_at(history, n, "raw", step, mode, worker))
                 for n in names_in(history, "optimizer") if n.startswith("lr/")]
        return [(n, float(r)) for n, r in rates if r is not None and math.isfinite(r)]

    def _gradients(self, history: History, names: list[str], step: int, mode: str,
                   worker: int) -> list[tuple[str, float]]:
        """``(name, L2 norm)`` of the recorded gradients at ``step`` of the parameters judged
        (``gradients/<param>`` for ``update_ratio/<param>``; where none is recorded under those
        names, the gradients matching ``include`` and not ``exclude``); ``[]`` where none is."""
        captured = names_in(history, "gradients")
        wanted = {"gradients/" + n.removeprefix("update_ratio/") for n in names}
        chosen = [n for n in captured if n in wanted] or names_in(history, "gradients", self.include, self.exclude)
        norms = [(n, value_at(history, n, "l2", step, mode, worker)) for n in chosen]
        return [(n, float(g)) for n, g in norms if g is not None and math.isfinite(g)]

    def _sensitivity(self, history: History, names: list[str], step: int, mode: str,
                     worker: int) -> tuple[float, float, int] | None:
        """``(sensitivity, peak, peak step)``: ``sensitivity`` is the largest update/weight ratio per
        unit of learning rate at a save of this training before ``step`` (each save's largest ratio
        over the smallest learning rate above 0 recorded there: an update scales with the learning
        rate, for SGD, momentum and Adam alike), so a learning rate ``lr`` gives ratios of about
        ``sensitivity * lr`` at most; ``peak`` is the largest learning rate recorded before
        ``step``, at ``peak step``. None where no earlier save holds both a ratio above 0 and a
        learning rate above 0 (trial 27g: a StepLR stepped per batch had taken the learning rate
        from 0.05 to 5e-25 by step 70, and the message said the gradients had become exactly 0)."""
        lowest: dict[int, float] = {}
        peak, peak_step = -math.inf, -1
        for n in names_in(history, "optimizer"):
            if not n.startswith("lr/"):
                continue
            steps, values = self.this_training(*history.finite_series(n, "raw", mode, worker), mode)
            for s, v in zip(steps.tolist(), values.tolist()):
                if s >= step:
                    break
                if v > 0.0:
                    lowest[s] = min(lowest.get(s, math.inf), v)
                if v > peak:
                    peak, peak_step = v, s
        if not lowest:
            return None
        largest: dict[int, float] = {}
        for n in names:
            steps, values = self.this_training(*history.finite_series(n, "raw", mode, worker), mode)
            for s, r in zip(steps.tolist(), values.tolist()):
                if s >= step:
                    break
                if r > 0.0 and s in lowest:
                    largest[s] = max(largest.get(s, 0.0), r)
        if not largest:
            return None
        return max(r / lowest[s] for s, r in largest.items()), peak, peak_step

    def _first_rate(self, history: History, lr_name: str | None, step: int, mode: str,
                    worker: int) -> tuple[float, int, float] | None:
        """``(first value, its step, largest value)`` of the learning rate ``lr_name`` in this training up
        to ``step`` (finite values); None where none is recorded."""
        if lr_name is None:
            return None
        steps, values = self.this_training(*history.finite_series(lr_name, "raw", mode, worker), mode)
        keep = steps <= step
        steps, values = steps[keep], values[keep]
        if not len(values):
            return None
        return float(values[0]), int(steps[0]), float(values.max())

    def _too_small(self, history: History, names: list[str], top: float, step: int, mode: str, worker: int) -> str:
        """The rest of the low-ratio message: what the records say moves the parameters so little.

        - A learning rate recorded as 0: the usual message (a learning rate of ~0 first).
        - A learning rate above 0 that explains the ratio (``sensitivity * lr`` below
          ``min_ratio``, :meth:`_sensitivity`; where no earlier save gives a sensitivity, a learning
          rate below ``TINY_LR``): where the largest learning rate recorded in this training up to
          ``step`` explains it too (it was that small from its first save: trial 32d F4, Adam at
          lr=1e-12 typed by mistake, was told of schedulers stepped per batch), a mistyped initial
          learning rate, its first value and step named; else it has decayed to ~0 (a scheduler
          stepped per batch where it was meant per epoch). With the gradients as recorded; no advice
          to lower it.
        - No parameter moves at all (``top`` exactly 0) and every recorded gradient of the
          parameters judged is exactly 0: dead units (trial 27e: SGD at lr=3 killed the ReLUs).
        - No parameter moves at all and the recorded gradients are not 0: the optimizer does not
          apply them (parameters not given to it, no ``optimizer.step()``); never "the gradients
          are 0".
        - No parameter moves at all after earlier updates, the gradients not recorded: at a
          learning rate recorded above 0 (not ~0), gradients that became exactly 0 (dead units);
          with no learning rate recorded, either that or a learning rate decayed to ~0.
        - Otherwise the usual message: a learning rate of ~0, parameters frozen or not given to
          the optimizer, or gradients that vanish."""
        rates = self._rates(history, step, mode, worker)
        lr_name, lr = max(rates, key=lambda kv: kv[1]) if rates else (None, None)
        moved = 0.0
        for n in names:
            steps, values = self.this_training(*history.finite_series(n, "raw", mode, worker), mode)
            earlier = values[steps < step]
            if len(earlier):
                moved = max(moved, float(earlier.max()))
        since = f", after updates of up to {fmt(moved)} times their size earlier in training" if moved > self.min_ratio else ""
        at_lr = f" (learning rate {fmt(lr)})" if lr is not None else ""
        usual = (f": the parameters do not move{at_lr}. Usual causes: a learning rate of ~0, parameters frozen or not "
                 "given to the optimizer, or gradients that vanish.")
        if lr is not None and lr <= 0.0:
            return since + usual  # (a learning rate of exactly 0: the usual message names it first)
        grads = self._gradients(history, names, step, mode, worker)
        zero_grads = bool(grads) and all(g == 0.0 for _, g in grads)
        still = "no parameter moves at all" if top == 0.0 else "the parameters barely move"
        known = self._sensitivity(history, names, step, mode, worker) if lr is not None else None
        if lr is not None and (known[0] * lr < self.min_ratio if known is not None else lr < TINY_LR):
            rate = fmt(lr)
            if known is not None:
                sensitivity, peak, peak_step = known
                was = f", {fmt(peak)} at step {peak_step}" if peak > lr else ""
                # (beside the head's limit, min_ratio: printed apart from it)
                gives = (f" (at the largest update/weight ratio per unit of learning rate seen earlier in this "
                         f"training, {fmt(sensitivity)}, it gives ratios of about "
                         f"{fmt_vs(sensitivity * lr, self.min_ratio)[0]})")
            else:  # (no earlier save with a ratio and a learning rate: below TINY_LR it is ~0 all the same)
                rate, tiny = fmt_vs(lr, TINY_LR)
                was, gives = "", f" (below {tiny})"
            decayed = "has decayed to ~0" if was else "is ~0"
            if zero_grads:
                grads_said = "; every recorded gradient norm is exactly 0 here too"
            elif grads:
                g_name, g = max(grads, key=lambda kv: kv[1])
                grads_said = f"; the gradients are not 0 ({g_name} has norm {fmt(g)} here)"
            else:
                grads_said = ""
            head = (f"{since}: {still} at a learning rate of {rate} ({lr_name}{was}): the learning rate {decayed}, "
                    f"too small to move the weights{gives}{grads_said}.")
            start = self._first_rate(history, lr_name, step, mode, worker)
            if start is not None and (known[0] * start[2] < self.min_ratio if known is not None else start[2] < TINY_LR):
                first, first_step, highest = start
                since_first = (f"it has been {rate} since its first save (step {first_step})" if highest == first == lr
                               else f"it was {fmt(first)} at its first save (step {first_step}) and never above "
                                    f"{fmt(highest)}")
                typed = rate if first == lr else fmt(first)
                return (f"{head} It was ~0 from the start: {since_first}. The likely cause is a mistyped initial "
                        f"learning rate (an exponent off: {typed} where something like 1e-3 was meant); check the learning "
                        "rate given to the optimizer (or a schedule's starting value). No scheduler brought it there, "
                        "and a lower learning rate would not help.")
            return (f"{head} Usual causes: a learning-rate scheduler stepped at every batch "
                    "where it was meant once per epoch (PyTorch's StepLR, MultiStepLR and ExponentialLR count "
                    "scheduler.step() calls, not epochs: StepLR(step_size=3, gamma=0.1) stepped per batch cuts the "
                    "rate 10x every 3 steps), a decay far too fast (a gamma of 0.01 where 0.1 was meant, a step_size "
                    f"far too small), or a decay applied twice. Check the schedule against the steps ({lr_name}); a lower "
                    "learning rate would not help. Not a fault: a schedule that ends at ~0 by design, in its last steps.")
        if top != 0.0:
            return since + usual
        dead = ("Usual causes: dead units (ReLUs that output 0 for every input, often after a learning rate far too "
                "high blew the weights up in the first steps: look for a spike in the loss there; dead_relu names the "
                "layers), or a loss that no longer depends on the parameters.")
        if zero_grads:
            return (f"{since}: no parameter moves at all{at_lr}; every recorded gradient norm is exactly 0 here. {dead} "
                    "Lower the learning rate, or add warm-up or gradient clipping.")
        if grads:  # (recorded, and not all 0: the updates are not applied; trial 27g)
            g_name, g = max(grads, key=lambda kv: kv[1])
            # (a learning rate recorded at a save that moved the weights, and not ~0 by that measure, is no cause)
            maybe_lr = (", or a learning rate of ~0 (none is recorded: offer lr/<group> in the optimizer collection "
                        "to tell)" if lr is None else "" if known is not None else ", or a learning rate of ~0")
            return (f"{since}: no parameter moves at all{at_lr}, though their gradients are not 0 ({g_name} has norm "
                    f"{fmt(g)} here): the optimizer does not apply them. Usual causes: parameters not given to the "
                    "optimizer (an optimizer built before layers of the model were replaced), no optimizer.step() "
                    f"(or a GradScaler that skips every step: the gradients overflow at each), parameters frozen{maybe_lr}.")
        if moved <= self.min_ratio:
            return since + usual
        if lr is not None:
            return (f"{since}: no parameter moves at all{at_lr}; with a learning rate above 0, their gradients have "
                    f"become exactly 0. {dead} Lower the learning rate, or add warm-up or gradient clipping.")
        return (f"{since}: no parameter moves at all, and neither the learning rate nor the gradients are recorded: "
                "either the learning rate has decayed to ~0 (a learning-rate scheduler stepped at every batch where it "
                "was meant once per epoch, a decay far too fast), or the gradients have become exactly 0 (dead units: "
                "ReLUs that output 0 for every input, often after a learning rate far too high blew the weights up in "
                "the first steps; dead_relu names the layers). Offer lr/<group> in the optimizer collection (or "
                "capture gradients) to tell; check the schedule, and if the learning rate is not ~0, lower it or add "
                "warm-up or gradient clipping.")

    def _weight_norms(self, history: History, param: str, step: int, mode: str,
                      worker: int) -> tuple[float, float, int, str] | None:
        """``(size at step, first size, its step, what the size is)`` of the weights of ``param`` in
        this training (a tensor named ``param``, or ``weights/<param>``, recorded at ``step``): its
        ``l2`` norm, or where only ``mean`` and ``std`` are stored (``poor_weight_initialization``
        asks for those) its root mean square ``sqrt(mean^2 + std^2)``, which shrinks as the norm
        does; None where neither is recorded."""
        for name in (param, f"weights/{param}"):
            if not history.has_tensor(name):
                continue
            stored = history.reductions(name)
            if "l2" in stored:
                steps, values = self.this_training(*history.finite_series(name, "l2", mode, worker), mode)
                now = value_at(history, name, "l2", step, mode, worker)
                if len(values) and now is not None and math.isfinite(now):
                    return float(now), float(values[0]), int(steps[0]), "norm"
            if "mean" in stored and "std" in stored:
                steps = self.this_training(*history.finite_series(name, "mean", mode, worker), mode)[0]
                sizes = []
                for at in (step, *steps[:1].tolist()):
                    mean, std = (value_at(history, name, r, int(at), mode, worker) for r in ("mean", "std"))
                    if mean is None or std is None or not math.isfinite(mean) or not math.isfinite(std):
                        break
                    sizes.append(math.hypot(mean, std))
                if len(sizes) == 2:
                    return sizes[0], sizes[1], int(steps[0]), "root mean square"
        return None

    def _too_large(self, history: History, top_name: str, top: float, step: int, mode: str, worker: int) -> str:
        """The high-ratio message. A ratio is the update over the weight: it is large where the
        update is (a learning rate far too high) or where the weight is near 0 (trial 27g: a weight
        decay of 1.0 where 1e-4 was meant shrank the weights toward 0 at a learning rate of 0.05, and
        the message said only "the learning rate is far too high"). Where the weights' norms are
        recorded, a weight shrunk ``SHRUNK`` times or more since its first save names the weight
        decay; otherwise both are named."""
        param = top_name.removeprefix("update_ratio/")
        rates = self._rates(history, step, mode, worker)
        at_lr = f" at a learning rate of {fmt(max(r for _, r in rates))}" if rates else ""
        shown, limit = fmt_vs(top, self.max_ratio)
        head = f"the update of {param} is {shown} times its size (limit {limit}; healthy ~1e-3){at_lr}"
        norms = self._weight_norms(history, param, step, mode, worker)
        if norms is not None:
            now, first, first_step, size = norms
            if now * SHRUNK <= first:
                return (f"{head}, and its weights have shrunk to {size} {fmt(now)}, from {fmt(first)} at step {first_step}: "
                        "weights near 0 make an ordinary update large beside them. Usual causes: a weight decay far too "
                        "large (weight_decay=1.0 where 1e-4 was meant: SGD takes learning rate x weight decay of the "
                        "weights off at every step, and momentum multiplies that), or an L2 penalty far too heavy in "
                        "the loss. Lower the weight decay; the learning rate may be right.")
            # (each number labelled with its step; one where this save is the first: trial 33e F1, "norm
            # 2.867, 2.867 at step 0" at step 0)
            sizes = (f"{size} {fmt(now)} at step {step}, their first save" if first_step == step else
                     f"{size} {fmt(now)} at step {step}, {fmt(first)} at their first save, step {first_step}")
            return (f"{head}: the learning rate is far too high (its weights have not shrunk toward 0: {sizes}). "
                    "Lower it, or add warm-up or gradient clipping.")
        return (f"{head}: the learning rate is far too high, or the weights are near 0 beside an ordinary update (a "
                "weight decay far too large, such as weight_decay=1.0 where 1e-4 was meant, shrinks them toward 0 at "
                "every step; a parameter initialised near 0). Lower the learning rate (or the weight decay), or add "
                "warm-up or gradient clipping; the weights' norms (the weights collection) tell which.")

    def restart(self) -> None:
        super().restart()
        self._low = {}  # (saves in a row with too low a ratio: this training's)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "low": dict(self._low)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self._low = {str(k): int(v) for k, v in state.get("low", {}).items()}

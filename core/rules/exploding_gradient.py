"""Exploding gradient: gradients grow out of proportion.

Condition: ``||g_first|| / ||g_last|| > ratio`` (AUTOTRAINER), or ``max_l ||g_l|| > max_norm`` (a NaN or
infinite norm counts as above any limit: the gradients overflowed), or
``max_l ||g_l||_t / max_l' median(||g_l'|| over its first 5 saves) > growth`` over the gradients with more than 5
saves (from the 6th save on: growth over the network's initial scale, the first layers of a deep net start with
vanishing gradients and grow as they recover), or (divergence)
``max_l max_{s <= t} ||g_l||_s / ||g_l||_0 > diverge_growth and median(loss over its last 3 saves) > diverge_loss * |L_0|``,
on ``patience`` consecutive saves, or at once where ``max_l ||g_l|| > burst * max_norm`` (finite: no
healthy step has gradients that far out, and waiting ``patience`` saves let a learning rate 1000x
too high train 13 more steps, trial 26a, or a 24-step run end unflagged with its loss at 5e18, trial
26g; a NaN or infinite norm waits: fp16 loss scaling overflows at single steps of a healthy run, and
a NaN is ``exploding_tensor``'s finding at its step) (``g_first``/``g_last``: the first and last weight gradients in
network order (the order the framework lists the parameters: their registration order), L2 norms; ``||g_l||_0`` and ``L_0``: the first saved gradient norm and loss; the last 3 saves of
the loss are its last 3 values, or the values of its last ``2 * I + 1`` steps when it is kept at
every step, ``I`` the save interval).

The divergence clause catches the explosion that saturates what it blew up (an RNN with a large
learning rate: one huge update drives tanh units to +-1, their gradients then vanish, but the loss
stays many times its initial value while the output layer's gradient stays an order of magnitude
above its initial norm). The gradient half counts the largest norm saved so far, not only the
current one: a burst that killed the network (a huge learning rate: one update, then dead ReLUs
whose gradients are exactly 0) leaves a loss hundreds of times its start with no gradient left to
grow (trial 20b: SGD at lr 1e3 on an MLP, loss 200-400x its start for the rest of the fit, and the
burst at one save only, under ``patience``). Healthy training keeps its loss below its initial value
after the first steps, so both halves together do not fire on noisy but healthy runs.

A norm above ``max_norm`` from the first save, with the loss at unit scale, whose value divided by
the loss scale is an ordinary norm gets a message that says gradients offered before
``scaler.unscale_(optimizer)`` read so (docs/architecture.md), without the usual fixes (clipping, a
lower learning rate: they do not fix that); the loss scale is the run's ``loss_scale`` at that step
(``optimizer`` collection, optional: the integrations record fp16's loss scale, a hand-written loop
offers ``scaler.get_scale()``), else 65536 (GradScaler's default), said as a condition. A first loss
far from unit scale gets one that names the targets' or the loss's scale.

An ``include`` and ``exclude`` that leave out every gradient the run captured leave the rule nothing to
read: the run's end says so ("rule 'exploding_gradient' had nothing to read: include=... and exclude=...
leave out every ... captured (<names>), so the rule never judged"), and ``tripwire watch`` counts the
rule unjudged (exit 3).

Defaults: ``ratio=70.0``, ``max_norm=1000.0``, ``burst=1e4`` (at once above a norm of 1e7), ``growth=1000.0``, ``diverge_growth=10.0``,
``diverge_loss=2.0``, ``loss="loss"`` (tensor name or full-match regex of the ``losses`` and
``metrics`` collections), ``include=".*"``, ``exclude`` = biases, normalisation parameters, embedding tables, positional parameters and tokens (names holding ``bias``, ``norm``, ``gamma``, ``beta``, ``embed``, or as a part ``bn``, ``emb``, GPT-2's ``wte``/``wpe``/``ln_1``/``ln_f``, ``pos``/``position``, ``cls_token``; the whole regex in ``tripwire rules exploding_gradient``),
``patience=3``, mode ``train``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._finding import Finding
from .._history import History
from .._validate import check_float
from ._base import Requirement
from ._common import NO_DATA, BuiltinRule, check_regex, filtered_out, fmt, fmt_vs, value_at
from ._gradients import DEFAULT_EXCLUDE, clipping_limits, first_last_ratio, layer_gradients, norms_at
from ._loss import loss_series, recent_values, value_interval
from .loss_scale_collapse import LOSS_SCALE as _SCALE_NAME
from .loss_scale_collapse import scale_text
from ._registry import register_rule

_BASELINE = 5
#: A first loss value above this: the message names the targets' scale as the likely cause.
_LARGE_LOSS = 100.0
#: GradScaler's default initial loss scale (2**16): a norm above max_norm from the first save that is
#: at most ORDINARY_NORM once divided by it (or by the run's recorded ``loss_scale``) may be a gradient
#: offered before scaler.unscale_.
LOSS_SCALE = 65536.0
ORDINARY_NORM = 10.0


def _median(values: list[float]) -> float:
    """numpy's median of a few Python numbers, without numpy's cost (10 us a call)."""
    ordered = sorted(values)
    k = len(ordered)
    return ordered[k // 2] if k % 2 else (ordered[k // 2 - 1] + ordered[k // 2]) / 2


_FIX = (
    "Usual fixes: gradient clipping, a lower learning rate, He/Xavier initialisation instead of N(0, 1), "
    "normalised inputs and targets, normalisation layers."
)


@register_rule
class ExplodingGradient(BuiltinRule):
    """Gradients out of proportion or growing without bound (see the module docstring)."""

    name = "exploding_gradient"
    summary = "gradients grow out of proportion (first/last layer ratio, absolute norm or growth)"
    default_modes = ("train",)

    def __init__(self, ratio: float = 70.0, max_norm: float = 1000.0, growth: float = 1000.0,
                 diverge_growth: float = 10.0, diverge_loss: float = 2.0, loss: str = "loss",
                 include: str = ".*", exclude: str = DEFAULT_EXCLUDE, patience: int = 3, burst: float = 1e4,
                 **common: Any) -> None:
        super().__init__(patience=patience, **common)
        self.burst = check_float(burst, f"{self.name}.burst", minimum=1.0)
        self.diverge_growth = check_float(diverge_growth, f"{self.name}.diverge_growth", minimum=1.0, min_inclusive=False)
        self.diverge_loss = check_float(diverge_loss, f"{self.name}.diverge_loss", minimum=1.0, min_inclusive=False)
        self.loss = check_regex(loss, f"{self.name}.loss")
        self.ratio = check_float(ratio, f"{self.name}.ratio", minimum=1.0, min_inclusive=False)
        self.max_norm = check_float(max_norm, f"{self.name}.max_norm", minimum=0.0, min_inclusive=False)
        self.growth = check_float(growth, f"{self.name}.growth", minimum=1.0, min_inclusive=False)
        self.include = check_regex(include, f"{self.name}.include")
        self.exclude = check_regex(exclude, f"{self.name}.exclude")
        # derived, not state: per (history, gradient, mode, worker), the values read so far and the
        # largest of them with its index (NaN as -inf), so that a save step does not rescan the run
        self._peaks: dict[tuple[int, str, str, int], tuple[int, float, int]] = {}

    def restart(self) -> None:
        super().restart()
        self._peaks = {}  # (the earlier trainings' peaks)

    def named_inputs(self) -> dict[str, str]:
        return {"loss": self.loss}

    def nothing_read(self, history: History) -> str | None:
        """Where ``include`` and ``exclude`` leave out every gradient captured (:func:`filtered_out`)."""
        return filtered_out(self, history, "gradients", "gradient", self.include, self.exclude)

    def requirements(self) -> list[Requirement]:
        # (the loss scale, optional: the gradients-before-unscale_ hint divides by it where the run records it)
        return [Requirement("gradients", reductions=("l2",), modes=("train",)),
                Requirement("losses", reductions=("raw",), modes=("train",)),
                Requirement("optimizer", reductions=("raw",), modes=("train",), optional=True)]

    def check(self, history: History, step: int, mode: str) -> Any:
        names = layer_gradients(history, self.include, self.exclude)
        if not names:
            return NO_DATA
        seen = False
        for worker in self.workers(history):
            l2 = norms_at(history, names, "l2", step, mode, worker)
            if not l2:
                continue
            seen = True
            bad = [(n, v) for n, v in l2 if not math.isfinite(v)]
            if bad:
                shown = ", ".join(f"{n} ({fmt(v)})" for n, v in bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
                return self.finding(
                    step, mode,
                    f"{len(bad)} of {len(l2)} gradients have a non-finite norm: {shown}; the gradients overflowed "
                    f"(training diverged or a value became NaN/inf). "
                    + self._fix(history, step, mode, worker),
                    tensors=[n for n, _ in bad], norm=float(bad[0][1]), worker=worker,
                )
            top_name, top = max(l2, key=lambda kv: kv[1])
            if top > self.burst * self.max_norm:  # (before the ratio: the first layer's burst reads as one)
                return self._beyond_max_norm(history, mode, worker, step, top_name, top)
            pair = first_last_ratio(l2)
            if pair is not None and pair[4] > self.ratio:
                first, g1, last, gl, ratio = pair
                shown, limit = fmt_vs(ratio, self.ratio)
                return self.finding(
                    step, mode,
                    f"the gradient of the first layer {first} has norm {fmt(g1)}, {shown} times that of the "
                    f"last layer {last} ({fmt(gl)}; limit {limit}x). "
                    + self._fix(history, step, mode, worker),
                    tensors=[first, last], ratio=ratio, worker=worker,
                )
            if top > self.max_norm:
                return self._beyond_max_norm(history, mode, worker, step, top_name, top)
            # each gradient's norms of this training, read once for both clauses below
            norms = {name: self.this_training(*history.series(name, "l2", mode, worker), mode) for name, _ in l2}
            diverging = self._diverging(history, norms, l2, mode, worker, step)
            if diverging is not None:
                return diverging
            # growth against the network's initial scale: the largest layer's initial norm. A deep
            # net's first layers start with vanishing gradients (7e-4 against the output layer's
            # 0.08) and grow 1000x as they recover, healthily (trial 17i: a 10-layer ReLU MLP that
            # reached 90% was flagged against its own first layer's start)
            bases = {}
            for name, _ in l2:
                # (this training's first saves: trials 25a, 25c, a later fit through the same session)
                values = norms[name][1]
                if len(values) > _BASELINE:
                    base_vals = [v for v in values[:_BASELINE].tolist() if math.isfinite(v)]
                    if base_vals:
                        bases[name] = _median(base_vals)
            if bases:
                scale_name, base = max(bases.items(), key=lambda kv: kv[1])
                grown = [(n, g) for n, g in l2 if n in bases]
                name, g = max(grown, key=lambda kv: kv[1])
                if base > 0 and g / base > self.growth:
                    own = "its initial" if name == scale_name else f"the largest initial gradient ({scale_name}):"
                    shown, limit = fmt_vs(g / base, self.growth)
                    return self.finding(
                        step, mode,
                        f"the gradient {name} has grown to norm {fmt_vs(g, self.growth * base)[0]}, {shown} times "
                        f"{own} {fmt(base)} (limit {limit}x). " + self._fix(history, step, mode, worker),
                        tensors=[name], growth=g / base, worker=worker,
                    )
        return None if seen else NO_DATA

    def _beyond_max_norm(self, history: History, mode: str, worker: int, step: int, name: str, norm: float) -> Finding:
        """The finding of a gradient norm above ``max_norm``; beyond ``burst * max_norm`` it counts at
        once (:meth:`_patient`). Where the loss-scale hint applies (:meth:`_loss_scale_hint`), the
        usual fixes (clipping, a lower learning rate, initialisation) are left out: they do not fix
        gradients read before ``scaler.unscale_`` (trial 30a)."""
        at_once = norm > self.burst * self.max_norm
        said = (f", beyond burst={fmt(self.burst)} times it: found at once, without waiting {self.patience} saves"
                if at_once and self.patience > 1 else "")
        # (the norm against the limit it passed: burst * max_norm where found at once, said as both)
        shown, limit = fmt_vs(norm, self.max_norm)
        if at_once:
            shown = fmt_vs(norm, self.burst * self.max_norm)[0]
        hint = self._scale_hint(history, mode, worker)
        scaled = "" if hint else self._loss_scale_hint(history, mode, worker, step, norm)
        return self.finding(
            step, mode,
            f"the gradient {name} has norm {shown} (limit max_norm={limit}{said})"
            f"{hint or scaled}." + ("" if scaled else " " + self._fix(history, step, mode, worker)),
            tensors=[name], norm=norm, worker=worker, at_once=at_once,
        )

    def _fix(self, history: History, step: int, mode: str, worker: int) -> str:
        """The usual fixes; where the run records the optimizer's gradient clipping at ``step``
        (:func:`clipping_limits`: ``clip/global_norm``, ``clip/norm``, ``clip/value`` of the ``optimizer``
        collection, optional, a limit above 0; the Keras callback records ``global_clipnorm``,
        ``clipnorm`` and ``clipvalue`` so), that the update applied is clipped already (the norms
        judged are the gradients' before clipping) and the fixes without clipping (trial 31a F3:
        ``SGD(global_clipnorm=1.0)`` was told "Usual fixes: gradient clipping")."""
        clips = clipping_limits(history, step, mode, worker)
        if not clips:
            return _FIX
        return (f"The optimizer clips the gradients it applies already (to a {', '.join(clips)}), so the update "
                f"applied is clipped; the norms judged here are the gradients' before clipping. Usual fixes: a lower "
                f"learning rate, He/Xavier initialisation instead of N(0, 1), normalised inputs and targets, "
                f"normalisation layers.")

    def _patient(self, found: list[Finding], mode: str) -> list[Finding]:
        """As :meth:`Rule._patient`, but a finding of a norm beyond ``burst * max_norm`` counts at once."""
        if any(f.details.get("at_once") for f in found):
            self._streak[mode] = max(self._streak.get(mode, 0) + 1, self.patience)
            return found
        return super()._patient(found, mode)

    def _scale_hint(self, history: History, mode: str, worker: int) -> str:
        """Where the loss started far above unit scale (MSE on unscaled regression targets), say so:
        the gradients are large because the errors are."""
        for lname, lsteps, lvalues in loss_series(history, self.loss, mode, worker):
            lvalues = self.this_training(lsteps, lvalues, mode)[1]
            if len(lvalues) and abs(float(lvalues[0])) > _LARGE_LOSS:
                return (f"; {lname} started at {fmt(float(lvalues[0]))}: with a loss that far from unit scale (MSE on "
                        "unscaled regression targets, inputs far from unit scale, or a loss summed over the batch or "
                        "the pixels instead of averaged: PyTorch's reduction='sum', a cross-entropy summed over a "
                        "batch of B starting near B x ln(classes)) the gradients are that large from the first step. Standardise "
                        "the targets and inputs, average the loss, or raise max_norm if that scale is meant")
        return ""

    def _loss_scale_hint(self, history: History, mode: str, worker: int, step: int, norm: float) -> str:
        """Where the gradients were above ``max_norm`` from their first save, the loss is at unit scale
        and the norm divided by the loss scale is an ordinary norm (at most ``ORDINARY_NORM``), say that
        gradients offered before ``scaler.unscale_`` read so (trial 27g: 4.26e4 before unscale_, 0.65
        after it, and the message gave the usual fixes). The loss scale is the one the run records at
        ``step`` (``loss_scale`` of the ``optimizer`` collection: the integrations record it, a
        hand-written loop offers ``scaler.get_scale()``; trial 30a: a scale other than the default,
        or one that had grown or shrunk, got no hint), else ``LOSS_SCALE`` (GradScaler's default initial
        scale), where the hint is conditional: the rule cannot tell then whether a GradScaler runs."""
        recorded = value_at(history, _SCALE_NAME, "raw", step, mode, worker) if history.has_tensor(_SCALE_NAME) else None
        scale = float(recorded) if recorded is not None and math.isfinite(recorded) and recorded > 0 else None
        if norm / (scale or LOSS_SCALE) > ORDINARY_NORM:
            return ""
        firsts = []
        for name in layer_gradients(history, self.include, self.exclude):
            values = self.this_training(*history.finite_series(name, "l2", mode, worker), mode)[1]
            if len(values):
                firsts.append(float(values[0]))
        if not firsts or max(firsts) <= self.max_norm:
            return ""  # (grown over the training: not a scale applied from the first step)
        if scale is not None:
            return (f"; the gradients were above max_norm from their first save, and this norm divided by the run's "
                    f"loss scale at this step ({_SCALE_NAME}, {scale_text(scale)}) is {fmt(norm / scale)}, an "
                    "ordinary one: gradients offered before scaler.unscale_(optimizer) are multiplied by the scale. "
                    "Offer them after it (docs/architecture.md); clipping or a lower learning rate does not fix this")
        return (f"; the gradients were above max_norm from their first save: if the run uses torch.amp.GradScaler "
                f"(fp16), this norm divided by its default loss scale {LOSS_SCALE:.0f} is {fmt(norm / LOSS_SCALE)}, "
                "an ordinary one, and gradients offered before scaler.unscale_(optimizer) are multiplied by the "
                "scale: offer them after it (docs/architecture.md; a loop that offers scaler.get_scale() as "
                f"{_SCALE_NAME}, kind optimizer, gets its own scale here). Clipping or a lower learning rate does not "
                "fix this")

    def _peak(self, history: History, name: str, mode: str, worker: int, past: np.ndarray) -> tuple[float, int]:
        """``(max, index of its first occurrence)`` of ``past`` (a NaN norm as -inf: said by the
        non-finite clause), adding only the values after those of the last call (trial 24e); a few
        new values (a save step's) are looked at as Python numbers (numpy's calls cost more there)."""
        key = (id(history), name, mode, worker)
        done, best, at = self._peaks.get(key, (0, -np.inf, 0))
        if len(past) < done:
            done, best, at = 0, -np.inf, 0
        if len(past) > done:
            if len(past) - done <= 16 and done:
                for k, v in enumerate(past[done:].tolist(), done):
                    if v > best:  # (NaN is never above: as -inf)
                        best, at = v, k
            else:
                new = np.where(np.isnan(past[done:]), -np.inf, past[done:])
                k = int(np.argmax(new))
                if new[k] > best or done == 0:
                    best, at = float(new[k]), done + k
            self._peaks[key] = (len(past), best, at)
        return best, at

    def _diverging(self, history: History, norms: dict[str, tuple[np.ndarray, np.ndarray]], l2: list[tuple[str, float]],
                   mode: str, worker: int, step: int) -> Finding | None:
        """The divergence clause: a gradient that has been ``diverge_growth`` times its first norm
        (now, or at an earlier save: the burst that killed the network) while the loss stays
        ``diverge_loss`` times its first value. ``norms``: each gradient's ``(steps, l2 norms)`` of this
        training."""
        grown = []  # (name, norm, first norm, step of that norm: None for now)
        for name, g in l2:
            gsteps, values = norms[name]
            if len(values) < 2:
                continue
            g0 = float(values[0])
            if not math.isfinite(g0):  # (its first finite norm)
                first = self.this_training(*history.finite_series(name, "l2", mode, worker), mode)[1][:1]
                if not len(first):
                    continue
                g0 = float(first[0])
            if g0 <= 0:
                continue
            if g / g0 > self.diverge_growth:
                grown.append((name, g, g0, None))
                continue
            peak, k = self._peak(history, name, mode, worker, values[:-1])
            if peak / g0 > self.diverge_growth:
                grown.append((name, peak, g0, int(gsteps[k])))
        if not grown:
            return None
        for lname, lsteps, lvalues in loss_series(history, self.loss, mode, worker):
            lsteps, lvalues = self.this_training(lsteps, lvalues, mode)
            if len(lvalues) < 2:
                continue
            first_loss = float(lvalues[0])
            l0 = abs(first_loss)
            now = float(np.median(recent_values(lsteps, lvalues, 3, value_interval(history, lname))))
            if l0 > 0 and now > self.diverge_loss * l0:
                current = [t for t in grown if t[3] is None]
                name, g, g0, at = max(current or grown, key=lambda t: t[1] / t[2])
                norm = fmt_vs(g, self.diverge_growth * g0)[0]
                grew, grew_limit = fmt_vs(g / g0, self.diverge_growth)
                if at is None:
                    said = f"the gradient {name} has grown to norm {norm}, {grew} times its first {fmt(g0)}"
                    then = "while"
                else:
                    said = f"the gradient {name} reached norm {norm} at step {at}, {grew} times its first {fmt(g0)}"
                    then = "and now"
                # (the limit is diverge_loss times |L_0|: a negative first loss is said as it was, trial 32e:
                # "2.01 times its initial 1" of a first loss of -1)
                initial = f"its initial {fmt(l0)}" if first_loss > 0 else f"the size of its initial {fmt(first_loss)}"
                times, loss_limit = fmt_vs(now / l0, self.diverge_loss)
                return self.finding(
                    step, mode,
                    f"{said} (limit {grew_limit}x), {then} {lname} is {fmt_vs(now, self.diverge_loss * l0)[0]}, "
                    f"{times} times {initial} (limit {loss_limit}x): training diverged"
                    f"{'' if at is None else ', and the burst left the network unable to recover (saturated or dead units)'}. "
                    + self._fix(history, step, mode, worker),
                    tensors=[name, lname], growth=g / g0, loss_ratio=now / l0, worker=worker,
                )
        return None

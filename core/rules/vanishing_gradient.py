"""Vanishing gradient: the first layers' gradients are orders of magnitude below the last layer's.

Condition: ``(||g_first|| / ||g_last|| < ratio and ||g_first|| < min_norm`` (AUTOTRAINER), or
``max_l mean|g_l| < min_abs_mean`` (every layer, smdebug)) ``and not 0 <= L_t < converged * L_0``;
``g_first``/``g_last``: the first and last weight gradients in network order (the order the framework lists the parameters: their registration order, the order of ``__init__``'s assignments, which is the data flow in most models; a model that builds its head before its body has them swapped) (L2 norms), on
``patience`` consecutive saves; ``L_0``: the loss's first value, ``L_t`` the median of its values
over the last 3 saves (a loss matching ``loss``; none: the clause is not checked). A model that has
fitted its training data (the loss at a thousandth of where it started, an easy task) has nothing
left to learn from, and its gradients are tiny for that reason: not this rule's business. The
message's advice follows what the run captured of the activations: a network shown to use ReLUs
(``relu_outputs``, or activations named ``relu``) is pointed at dead ReLUs (inputs far from unit
scale, too high a learning rate), not at ReLUs instead of sigmoid/tanh; a first-layer gradient of
exactly 0 names dead ReLUs first too (a sigmoid or tanh gives exactly 0 only saturated in every unit).
Where the run's gradient names show a transformer (attention or LayerNorm layers: names holding
``attn``, ``attention``, ``layernorm``/``layer_norm``, or GPT-2's ``ln_1``/``ln_f``), the advice names
too high a learning rate without warm-up first (a post-LN transformer without warm-up collapses to a
constant prediction, its first layers' gradients vanishing), then the usual fixes.

An ``include`` and ``exclude`` that leave out every gradient the run captured leave the rule nothing to
read: the run's end says so ("rule 'vanishing_gradient' had nothing to read: include=... and exclude=...
leave out every ... captured (<names>), so the rule never judged"), and ``tripwire watch`` counts the
rule unjudged (exit 3).

Defaults: ``ratio=1e-3``, ``min_norm=1e-4``, ``min_abs_mean=1e-7``, ``converged=1e-3``,
``loss="loss"``, ``include=".*"``, ``exclude`` = biases, normalisation parameters, embedding tables, positional parameters and tokens (names holding ``bias``, ``norm``, ``gamma``, ``beta``, ``embed``, or as a part ``bn``, ``emb``, GPT-2's ``wte``/``wpe``/``ln_1``/``ln_f``, ``pos``/``position``, ``cls_token``; the whole regex in ``tripwire rules vanishing_gradient``),
``patience=3``, mode ``train``. ``min_norm`` and ``min_abs_mean`` are finite; 0 switches its clause off.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from .._history import History
from .._validate import check_float
from ._base import Requirement
from ._common import (
    NO_DATA, BuiltinRule, check_finite, check_regex, filtered_out, fmt, fmt_vs, in_capture_order, names_in
)
from ._gradients import DEFAULT_EXCLUDE, activation_families, finite_norms, first_last_ratio, layer_gradients, norms_at
from ._loss import loss_series, recent_values, value_interval
from ._registry import register_rule


@register_rule
class VanishingGradient(BuiltinRule):
    """First-layer gradients far smaller than the last layer's (see the module docstring)."""

    name = "vanishing_gradient"
    summary = "the first layers' gradients are orders of magnitude below the last layer's"
    default_modes = ("train",)

    def __init__(self, ratio: float = 1e-3, min_norm: float = 1e-4, min_abs_mean: float = 1e-7,
                 converged: float = 1e-3, loss: str = "loss", include: str = ".*", exclude: str = DEFAULT_EXCLUDE,
                 patience: int = 3, **common: Any) -> None:
        super().__init__(patience=patience, **common)
        self.ratio = check_float(ratio, f"{self.name}.ratio", minimum=0.0, maximum=1.0, min_inclusive=False)
        # finite (trial 24f: min_norm=inf left the ratio alone to judge, min_abs_mean=inf fired on every run);
        # 0 switches its clause off (min_norm=0: the smdebug clause alone; min_abs_mean=0: AUTOTRAINER's alone)
        self.min_norm = check_finite(min_norm, f"{self.name}.min_norm", minimum=0.0)
        self.min_abs_mean = check_finite(min_abs_mean, f"{self.name}.min_abs_mean", minimum=0.0)
        self.converged = check_float(converged, f"{self.name}.converged", minimum=0.0, maximum=1.0)
        self.loss = check_regex(loss, f"{self.name}.loss")
        self.include = check_regex(include, f"{self.name}.include")
        self.exclude = check_regex(exclude, f"{self.name}.exclude")

    def requirements(self) -> list[Requirement]:
        return [Requirement("gradients", reductions=("l2", "abs_mean"), modes=("train",)),
                Requirement("losses", reductions=("raw",), modes=("train",), optional=True)]

    def nothing_read(self, history: History) -> str | None:
        """Where ``include`` and ``exclude`` leave out every gradient captured (:func:`filtered_out`)."""
        return filtered_out(self, history, "gradients", "gradient", self.include, self.exclude)

    def check(self, history: History, step: int, mode: str) -> Any:
        names = layer_gradients(history, self.include, self.exclude)
        if not names:
            return NO_DATA
        seen = False
        for worker, l2 in finite_norms(history, names, step, mode, self.workers(history)):
            seen = True
            if l2 is None or self._converged(history, mode, worker):
                continue
            pair = first_last_ratio(l2)
            if pair is not None and pair[4] < self.ratio and pair[1] < self.min_norm:
                first, g1, last, gl, ratio = pair
                norm, min_norm = fmt_vs(g1, self.min_norm)
                shown, limit = fmt_vs(ratio, self.ratio)
                return self.finding(
                    step, mode,
                    f"the gradient of the first layer {first} has norm {norm} (limit min_norm={min_norm}), {shown} "
                    f"times that of the last layer {last} ({fmt(gl)}; limit ratio={limit}x): the first layers barely "
                    "learn. "
                    + _warm_up_first(history, _ratio_advice(history, g1)),
                    tensors=[first, last], ratio=ratio, first_norm=g1, worker=worker,
                )
            means = norms_at(history, names, "abs_mean", step, mode, worker)
            if means and max(v for _, v in means) < self.min_abs_mean:
                top = max(means, key=lambda kv: kv[1])
                largest, limit = fmt_vs(top[1], self.min_abs_mean)
                return self.finding(
                    step, mode,
                    f"every captured layer's mean |gradient| is below {limit} ({len(means)} captured; largest "
                    f"{largest} in {top[0]}): the network does not learn. "
                    + _warm_up_first(history, _every_layer_advice(history, means[0][1])),
                    tensors=[n for n, _ in means], largest=top[1], worker=worker,
                )
        return None if seen else NO_DATA

    def _converged(self, history: History, mode: str, worker: int) -> bool:
        """The loss is at ``converged`` times its first value or below (and not negative)."""
        for lname, lsteps, lvalues in loss_series(history, self.loss, mode, worker):
            # (its first value in this training: trials 25a, 25c, a later fit through the same session)
            lsteps, lvalues = self.this_training(lsteps, lvalues, mode)
            if len(lvalues) < 2 or not lvalues[0] > 0:
                continue
            now = float(np.median(recent_values(lsteps, lvalues, 3, value_interval(history, lname))))
            if 0 <= now < self.converged * float(lvalues[0]):
                return True
        return False


#: The fixes for small first-layer gradients that hold for any network, and the sigmoid/tanh one.
_GENERAL_FIXES = ("He/Xavier initialisation instead of a tiny one, normalisation layers (BatchNorm/LayerNorm), "
                  "residual connections")
_SQUASH_FIX = "ReLU-family activations instead of sigmoid/tanh"
#: Dead ReLUs (trial 27a: a ReLU MLP fed 0-255 pixel values, its first gradient exactly 0, was told
#: to use ReLU instead of sigmoid/tanh, and nothing of dead units or of the input scale).
_DEAD_RELUS = ("dead ReLUs: a ReLU layer whose units output 0 for every input passes no gradient back to the "
               "layers before it (often after inputs far from unit scale, such as 0-255 pixel values, a "
               "learning rate so high that the first updates drove the pre-activations negative, or a large "
               "negative bias; the dead_relu rule names the layer): normalise the inputs, lower the learning "
               "rate, check the biases' initialisation, or use LeakyReLU/GELU")
#: The every-layer clause's causes other than dead ReLUs and saturated sigmoid/tanh units.
_OTHER_CAUSES = ("a tiny initialisation, a loss that does not depend on the parameters, a vanishing loss scale, "
                 "or weights that went NaN (NaN inputs behind a ReLU that maps NaN to 0, as some frameworks' do, "
                 "leave the loss finite; capture weights to see it)")
_SATURATED = ("saturated activations (often after a learning rate so high, or inputs so far from unit scale, that "
              "the first updates drove the units into saturation or killed the ReLUs)")
_SATURATED_SQUASH = ("saturated sigmoid/tanh units (inputs far from unit scale or too high a learning rate drive "
                     "them there; ReLU-family activations avoid it)")


def _relus_shown(relu: list[str]) -> str:
    """The captured ReLU tensors for a message: the first three, and how many more."""
    return ", ".join(relu[:3]) + (f" and {len(relu) - 3} more" if len(relu) > 3 else "")


def _every_layer_advice(history: History, first_mean: float) -> str:
    """The causes of the every-layer (``min_abs_mean``) clause's message, after what the captured
    activations show, as :func:`_ratio_advice` does: a network shown to use ReLUs (and no sigmoid/tanh)
    is told of dead ReLUs first (a large negative bias, inputs far from unit scale, too high a learning
    rate); so is a network whose first-layer mean |gradient| (network order) is exactly 0, unless it is
    shown to use sigmoid/tanh and no ReLU; a sigmoid/tanh network, or one of which nothing tells, of saturated
    activations first (trial 27h F2: a ReLU MLP with a hidden bias of -5, its ReLUs all 0 and its
    gradients exactly 0, was told of saturated activations first, and its dead_relu rule never fired
    before this rule stopped the run)."""
    relu, squash = activation_families(history)
    if relu and not squash:
        return (f"The network has ReLUs ({_relus_shown(relu)} captured); the usual cause is {_DEAD_RELUS}. "
                f"Other causes: {_SATURATED_SQUASH} where the network has any, {_OTHER_CAUSES}.")
    if first_mean == 0 and (relu or not squash):
        return (f"A first-layer gradient of exactly 0 usually means {_DEAD_RELUS}. Other causes: "
                f"{_SATURATED_SQUASH}, {_OTHER_CAUSES}.")
    return f"Usual causes: {_SATURATED}, {_OTHER_CAUSES}."


#: Gradient names that show a transformer: attention (``self_attn``, GPT-2's ``c_attn``, nanoGPT's
#: ``h.0.attn``, Keras's ``multi_head_attention``, BERT's ``attention``) or LayerNorm layers
#: (``LayerNorm``, ``layer_norm``, ``input_layernorm``, Keras's ``layer_normalization``, GPT-2's
#: ``ln_1``/``ln_f``). Not ``encoder.layers``: an MLP's encoder is named so too.
_TRANSFORMER_NAME = re.compile(r"(?i)(attn|attention|layer_?norm|(^|[./_])ln(_?(\d+|f|pre|post|final|out))?([./]|$))")
#: Trial 28d: a post-LN transformer without warm-up collapsed to the uniform prediction (the loss flat at
#: ln 10) and was told of ReLUs, sigmoid/tanh and He initialisation, which it had no use for.
_NO_WARMUP = ("a learning rate too high for the first steps, without warm-up (a transformer, post-LN above all, "
              "then collapses to a constant prediction: the loss flat at the uniform prediction's, the first "
              "layers' gradients vanishing): a learning-rate warm-up over the first steps (linear, a few percent "
              "of training), a lower peak learning rate, gradient clipping, or pre-LN blocks "
              "(norm_first=True in nn.TransformerEncoderLayer)")


def _transformer_layers(names: list[str]) -> str | None:
    """The first of the gradient ``names`` (in capture order) that shows an attention or LayerNorm
    layer (:data:`_TRANSFORMER_NAME`), or None: the network is then not known to be a transformer."""
    return next((n for n in names if _TRANSFORMER_NAME.search(n)), None)


def _warm_up_first(history: History, advice: str) -> str:
    """``advice`` as is, or, where the run's gradient names show a transformer (every gradient
    captured, the excluded LayerNorms too), after a sentence naming too high a learning rate without
    warm-up as the usual cause (its leading "Usual fixes:"/"Usual causes:" then read "Otherwise, the
    usual ...")."""
    shown = _transformer_layers(in_capture_order(history, names_in(history, "gradients")))
    if shown is None:
        return advice
    for lead in ("Usual fixes: ", "Usual causes: "):
        if advice.startswith(lead):
            advice = f"Otherwise, the usual {lead[6:]}{advice[len(lead):]}"
    return (f"The gradients' names show a transformer (attention/LayerNorm layers: {shown}); the usual cause "
            f"there is {_NO_WARMUP}. {advice}")


def _ratio_advice(history: History, first_norm: float) -> str:
    """The causes and fixes of the ratio clause's message, after what the captured activations show
    (:func:`activation_families`): a ReLU network is told of dead ReLUs first, not to use ReLUs; a
    sigmoid/tanh network of ReLU-family activations first; a network of which nothing was captured
    (the default set captures no activation) of dead ReLUs first where the first gradient is exactly
    0 (what dead ReLUs leave; a sigmoid or tanh only saturated in every unit), else of the sigmoid/tanh
    fix first."""
    relu, squash = activation_families(history)
    zero = first_norm == 0
    if relu and not squash:
        text = (f"The network has ReLUs ({_relus_shown(relu)} captured); the usual cause is {_DEAD_RELUS}. Otherwise: "
                f"{_GENERAL_FIXES}.")
    elif squash and not relu:
        text = f"Usual fixes: {_SQUASH_FIX}, {_GENERAL_FIXES}; in ReLU layers, {_DEAD_RELUS}."
    elif zero:
        text = (f"A first-layer gradient of exactly 0 usually means {_DEAD_RELUS}. Otherwise the usual fixes: "
                f"{_SQUASH_FIX} (for sigmoid/tanh layers), {_GENERAL_FIXES}.")
    else:
        text = f"Usual fixes: {_SQUASH_FIX}, {_GENERAL_FIXES}; in a ReLU network, {_DEAD_RELUS}."
    if zero:
        # (trial 19d: a NaN input made an MXNet net's first-layer weights NaN and its gradient 0, the
        # loss finite; the advice was ReLU and Xavier, which the net had)
        text += (" A gradient of exactly 0 is also what weights that went NaN leave (NaN inputs behind a ReLU "
                 "that maps NaN to 0, as some frameworks' do, keep the loss finite): capture weights to see it.")
    return text

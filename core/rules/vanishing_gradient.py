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
exactly 0 names dead ReLUs first too (a sigmoid or tanh gives exactly 0 only saturated in every unit), and
captured ReLU outputs (``relu_outputs``, or ``activations`` named ``relu``) whose latest ``zero_fraction`` is
``dead_relu``'s default threshold (0.95) or more are named as dead layers, first.
Where the run's gradient names show a transformer (attention or LayerNorm layers: names holding
``attn``, ``attention``, ``layernorm``/``layer_norm``, or GPT-2's ``ln_1``/``ln_f``), the advice names
too high a learning rate without warm-up first (a post-LN transformer without warm-up collapses to a
constant prediction, its first layers' gradients vanishing), then the usual fixes; its means are the
framework's where the names tell it (Keras: ``<layer>/kernel`` names; PyTorch's ``nn.MultiheadAttention``:
``in_proj_weight``), else no framework's. Not where the loss is falling (the median of its last ``k``
values below that of its first ``k`` by more than ``FALLING``, 5%, of its magnitude, ``k = min(5, n // 2)``
of its ``n`` values in this training: the message says so, and that it is no collapse), nor where a
ReLU layer is shown dead or the gradient judged is exactly 0 (which a collapse does not leave): dead
ReLUs come first there.

An ``include`` and ``exclude`` that leave out every gradient the run captured leave the rule nothing to
read: the run's end says so ("rule 'vanishing_gradient' had nothing to read: include=... and exclude=...
leave out every ... captured (<names>), so the rule never judged"), and ``tripwire watch`` counts the
rule unjudged (exit 3).

Defaults: ``ratio=1e-3``, ``min_norm=1e-4``, ``min_abs_mean=1e-7``, ``converged=1e-3``,
``loss="loss"``, ``include=".*"``, ``exclude`` = biases, normalisation parameters, embedding tables, positional parameters and tokens (names holding ``bias``, ``norm``, ``gamma``, ``beta``, ``embed``, or as a part ``bn``, ``emb``, GPT-2's ``wte``/``wpe``/``ln_1``/``ln_f``, ``pos``/``position``, ``cls_token``),
and attention query and key projections (as a part ``query``, ``key``, ``q_proj``, ``k_proj``, ``q_lin``,
``k_lin``, ``to_q``, ``to_k``, ``wq``, ``wk``, or ``q``/``k`` after ``attn``/``attention``: Keras's
``<mha>/query/kernel``, BERT's ``attention.self.key``, LLaMA's ``self_attn.q_proj``, T5's ``SelfAttention.q``):
their gradients are second order at initialisation (dL/dW_query scales with the keys, dL/dW_key with the
queries), ~1e-5 in a healthy model whose attention logits start near 0 (Keras's ``Embedding`` is
uniform(-0.05, 0.05); trial 32c F1: the first block's ``query/kernel`` was the "first layer" of healthy
Keras transformers, stopped at step 20). A projection packing the values too is a layer (PyTorch's
``in_proj_weight``, GPT-2's ``c_attn``, ``qkv``, ``query_key_value``): the value rows' gradient is of the
ordinary size. The whole regex is in ``tripwire rules vanishing_gradient``;
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
from ._gradients import (
    VANISHING_EXCLUDE, activation_families, dead_relus, finite_norms, first_last_ratio, layer_gradients, norms_at
)
from ._loss import loss_series, lowered, recent_values, value_interval
from ._registry import register_rule
from .dead_relu import DEFAULT_THRESHOLD as DEAD_THRESHOLD

#: The loss falls where the median of its last ``k`` values is below that of its first ``k`` by more
#: than this fraction of its magnitude (``k = min(5, n // 2)`` of its ``n`` values in this training, up
#: to the step judged): the message then gives no warm-up advice (trial 32c F1).
FALLING = 0.05


@register_rule
class VanishingGradient(BuiltinRule):
    """First-layer gradients far smaller than the last layer's (see the module docstring)."""

    name = "vanishing_gradient"
    summary = "the first layers' gradients are orders of magnitude below the last layer's"
    default_modes = ("train",)

    def __init__(self, ratio: float = 1e-3, min_norm: float = 1e-4, min_abs_mean: float = 1e-7,
                 converged: float = 1e-3, loss: str = "loss", include: str = ".*", exclude: str = VANISHING_EXCLUDE,
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
                dead = dead_relus(history, step, mode, worker, DEAD_THRESHOLD)
                return self.finding(
                    step, mode,
                    f"the gradient of the first layer {first} has norm {norm} (limit min_norm={min_norm}), {shown} "
                    f"times that of the last layer {last} ({fmt(gl)}; limit ratio={limit}x): the first layers barely "
                    "learn. "
                    + _warm_up_first(history, _ratio_advice(history, g1, dead),
                                     falling=self._loss_falls(history, step, mode, worker), lead=not dead and g1 != 0),
                    tensors=[first, last], ratio=ratio, first_norm=g1, worker=worker,
                )
            means = norms_at(history, names, "abs_mean", step, mode, worker)
            if means and max(v for _, v in means) < self.min_abs_mean:
                top = max(means, key=lambda kv: kv[1])
                largest, limit = fmt_vs(top[1], self.min_abs_mean)
                dead = dead_relus(history, step, mode, worker, DEAD_THRESHOLD)
                return self.finding(
                    step, mode,
                    f"every captured layer's mean |gradient| is below {limit} ({len(means)} captured; largest "
                    f"{largest} in {top[0]}): the network does not learn. "
                    + _warm_up_first(history, _every_layer_advice(history, means[0][1], dead),
                                     falling=self._loss_falls(history, step, mode, worker),
                                     lead=not dead and means[0][1] != 0),
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

    def _loss_falls(self, history: History, step: int, mode: str, worker: int) -> tuple[float, float, int] | None:
        """``(median of the first k values, median of the last k, k)`` of the first loss (matching
        ``loss``) that falls in this training up to ``step``: with ``n`` values there, ``k = min(5, n // 2)``,
        and the last ``k``'s median below the first ``k``'s by more than :data:`FALLING` of its magnitude.
        None where no loss falls so, or none is recorded (the message cannot tell)."""
        for _, lsteps, lvalues in loss_series(history, self.loss, mode, worker):
            lsteps, lvalues = self.this_training(lsteps, lvalues, mode)
            lvalues = lvalues[:int(np.searchsorted(lsteps, step, side="right"))]
            k = min(5, len(lvalues) // 2)
            if k < 1:
                continue
            early, recent = float(np.median(lvalues[:k])), float(np.median(lvalues[-k:]))
            if recent < lowered(early, FALLING):
                return early, recent, k
        return None


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


def _dead_lead(relu: list[str], dead: list[tuple[str, float, int]]) -> str:
    """The sentence that leads with dead ReLUs and names the layers the run shows dead (``dead``:
    :func:`dead_relus`' ``(name, zero fraction, step)``, the first three and how many more) among the
    captured ReLUs ``relu`` (trial 32d F1: a transformer whose ReLU head was all zeros, every gradient
    exactly 0, was told of warm-up first, and the dead layer was never named)."""
    shown = "; ".join(f"{n}, {fmt(z * 100)}% zeros at step {s}" for n, z, s in dead[:3])
    more = f"; and {len(dead) - 3} more" if len(dead) > 3 else ""
    layers = "a dead layer" if len(dead) == 1 else f"{len(dead)} dead layers"
    return (f"The network has ReLUs ({_relus_shown(relu)} captured); the usual cause is dead ReLUs, and the run "
            f"shows {layers} ({fmt(DEAD_THRESHOLD * 100)}% zeros or more, dead_relu's default threshold): "
            f"{shown}{more}. D{_DEAD_RELUS[1:]}.")


def _every_layer_advice(history: History, first_mean: float, dead: list[tuple[str, float, int]]) -> str:
    """The causes of the every-layer (``min_abs_mean``) clause's message, after what the captured
    activations show, as :func:`_ratio_advice` does: a network whose captured ReLU outputs show a
    layer dead (``dead``, :func:`dead_relus`) is told of dead ReLUs first, the layer named; a network
    shown to use ReLUs (and no sigmoid/tanh) is told of dead ReLUs first (a large negative bias, inputs
    far from unit scale, too high a learning rate); so is a network whose first-layer mean |gradient|
    (network order) is exactly 0, unless it is shown to use sigmoid/tanh and no ReLU; a sigmoid/tanh
    network, or one of which nothing tells, of saturated activations first (trial 27h F2: a ReLU MLP
    with a hidden bias of -5, its ReLUs all 0 and its gradients exactly 0, was told of saturated
    activations first, and its dead_relu rule never fired before this rule stopped the run)."""
    relu, squash = activation_families(history)
    if dead:
        return f"{_dead_lead(relu, dead)} Other causes: {_SATURATED_SQUASH} where the network has any, {_OTHER_CAUSES}."
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
              "of training{warm_up}), a lower peak learning rate, gradient clipping, or pre-LN blocks ({pre_ln})")
#: Gradient names of Keras (``<layer>/kernel``, ``<lstm>/recurrent_kernel``: Keras 3 on any backend) and of
#: PyTorch's ``nn.MultiheadAttention`` (``in_proj_weight``, which ``nn.TransformerEncoderLayer`` and
#: ``nn.TransformerDecoderLayer`` hold): the warm-up advice names the framework's own means only where the
#: names tell it (trial 32c F1: a Keras user was told of ``norm_first=True in nn.TransformerEncoderLayer``).
_KERAS_NAME = re.compile(r"/(recurrent_)?kernel$")
_TORCH_ATTENTION_NAME = re.compile(r"(^|[./])in_proj_weight$")
#: ``(warm-up means, pre-LN blocks)`` of the warm-up advice, per framework the gradient names tell.
_WARM_UP_MEANS = {
    "keras": (": keras.optimizers.schedules.CosineDecay's warmup_steps and warmup_target",
              "LayerNormalization applied to each block's input, before MultiHeadAttention and before the "
              "feed-forward Dense layers, the residual added after it, where keras.io's TransformerBlock applies it "
              "after the residual sum"),
    "torch": ("", "norm_first=True in nn.TransformerEncoderLayer and nn.TransformerDecoderLayer"),
    None: ("", "the LayerNorm applied to each block's input, before the attention and the feed-forward layers, "
               "not after the residual sum"),
}


def _framework(names: list[str]) -> str | None:
    """The framework the gradient ``names`` tell (``"keras"``: a name ending in ``/kernel`` or
    ``/recurrent_kernel``; ``"torch"``: PyTorch's ``nn.MultiheadAttention`` ``in_proj_weight``), or
    None where they tell none (a Hugging Face model's ``q_proj``, an MXNet net: advice for no framework)."""
    if any(_KERAS_NAME.search(n) for n in names):
        return "keras"
    if any(_TORCH_ATTENTION_NAME.search(n) for n in names):
        return "torch"
    return None


def _transformer_layers(names: list[str]) -> str | None:
    """The first of the gradient ``names`` (in capture order) that shows an attention or LayerNorm
    layer (:data:`_TRANSFORMER_NAME`), or None: the network is then not known to be a transformer."""
    return next((n for n in names if _TRANSFORMER_NAME.search(n)), None)


def _warm_up_first(history: History, advice: str, *, falling: tuple[float, float, int] | None = None,
                   lead: bool = True) -> str:
    """``advice`` as is where the run's gradient names show no transformer (every gradient captured,
    the excluded LayerNorms too). Where they show one:

    - the loss falling (``falling``: ``(median of its first k values, of its last k, k)``,
      :meth:`VanishingGradient._loss_falls`): ``advice``, then that the loss falls, so no collapse
      to a constant prediction, and no warm-up advice (trial 32c F1: a healthy Keras transformer, its
      loss falling from 0.79 to 0.58, was told its loss was flat at the uniform prediction's);
    - not ``lead`` (captured ReLU outputs show a layer dead, or the gradient judged is exactly 0, which
      a collapse without warm-up does not leave; trial 32d F1): ``advice`` as is, dead ReLUs first;
    - else a sentence naming too high a learning rate without warm-up as the usual cause, its means
      those of the framework the names tell (:func:`_framework`), then ``advice`` (its leading "Usual
      fixes:"/"Usual causes:" then read "Otherwise, the usual ...")."""
    names = in_capture_order(history, names_in(history, "gradients"))
    shown = _transformer_layers(names)
    if shown is None:
        return advice
    if falling is not None:
        early, recent, k = falling
        fell = (f"from {fmt(early)} to {fmt(recent)}" if k == 1 else
                f"median {fmt(early)} over its first {k} values, {fmt(recent)} over its last {k}")
        return (f"{advice} The loss is falling ({fell}): the network learns; it has not collapsed to a constant "
                "prediction.")
    if not lead:
        return advice
    for start in ("Usual fixes: ", "Usual causes: "):
        if advice.startswith(start):
            advice = f"Otherwise, the usual {start[6:]}{advice[len(start):]}"
    warm_up, pre_ln = _WARM_UP_MEANS[_framework(names)]
    return (f"The gradients' names show a transformer (attention/LayerNorm layers: {shown}); the usual cause "
            f"there is {_NO_WARMUP.format(warm_up=warm_up, pre_ln=pre_ln)}. {advice}")


def _ratio_advice(history: History, first_norm: float, dead: list[tuple[str, float, int]]) -> str:
    """The causes and fixes of the ratio clause's message, after what the captured activations show
    (:func:`activation_families`): a network whose captured ReLU outputs show a layer dead (``dead``,
    :func:`dead_relus`) is told of dead ReLUs first, the layer named; a ReLU network of dead ReLUs
    first, not to use ReLUs; a sigmoid/tanh network of ReLU-family activations first; a network of
    which nothing was captured (the default set captures no activation) of dead ReLUs first where the
    first gradient is exactly 0 (what dead ReLUs leave; a sigmoid or tanh only saturated in every
    unit), else of the sigmoid/tanh fix first."""
    relu, squash = activation_families(history)
    zero = first_norm == 0
    if dead:
        text = f"{_dead_lead(relu, dead)} Otherwise: {_GENERAL_FIXES}."
    elif relu and not squash:
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

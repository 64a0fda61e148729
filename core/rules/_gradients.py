"""Helpers of the gradient rules (private)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator

import numpy as np

from .._history import History
from ._common import fmt, in_capture_order, names_in

#: Excluded from "layers": biases and normalisation parameters (1-D, not a layer's weights), and
#: embedding tables, whose gradient sums every token of the batch (trial 23q: a Keras Embedding + GRU's
#: was 74-146 times its small output layer's on healthy runs, and exploding_gradient stopped 5 of 9).
#: Trial 28d: GPT-2's / nanoGPT's names too (a healthy nanoGPT was stopped: its "first layer" the
#: tied token table ``transformer.wte.weight``, its "last" the final LayerNorm ``transformer.ln_f.weight``,
#: 75x apart with no norm above 0.42): the token/position tables ``wte``/``wpe``; LayerNorms named
#: ``ln`` as a part, ``ln_1``, ``ln_2``, ``ln_f``, ``ln_pre``/``ln_post``/``ln_final`` (CLIP, Whisper's
#: ``attn_ln``); positional parameters: ``pos``, ``position``, ``positional`` as a part, alone or as
#: ``pos_enc*``, ``rel_pos_h``/``_w`` (SAM), ``pos_table`` (``pos_embed``, ``position_bias`` match
#: ``embed``/``bias``); ViT tokens (``cls_token``, ``class_token``, ``dist_token``, ``reg_token``,
#: ``register_tokens``, ``mask_token``, ``query_tokens``, ``prompt_tokens``) and CLIP's ``logit_scale``.
#: Never an ordinary Linear/Conv weight: ``c_attn``, ``q_proj``, ``pos_proj`` (DeBERTa), ``mlp_tokens``
#: (MLP-Mixer) and ``lm_head`` are layers (tests/rules/test_trial28d_gradients.py lists both sides).
_NOT_LAYERS = (
    r"bias|norm|(^|[./_])bn\d*([./_]|$)|gamma|beta|embed|(^|[./_])emb\d*([./_]|$)"
    r"|(^|[./_])(wte|wpe)([./_]|$)"
    r"|(^|[./_])ln(_?(\d+|f|pre|post|final|out))?([./]|$)"
    r"|(^|[./_])(pos|position|positional)(_(enc\w*|h|w|table))?([./]|$)"
    r"|(^|[./_])(cls|class|dist|reg|register|mask|query|prompt)_?tokens?([./]|$)"
    r"|(^|[./_])logit_scale([./]|$)"
)
DEFAULT_EXCLUDE = f"(?i)({_NOT_LAYERS})"

#: Attention query and key projections held apart from the value projection: Keras's and Flax's
#: ``MultiHeadAttention`` (``.../query/kernel``, ``.../key/kernel``), BERT's and Whisper's ``query``/``key``,
#: LLaMA's, CLIP's and BART's ``q_proj``/``k_proj``, DistilBERT's ``q_lin``/``k_lin``, diffusers'
#: ``to_q``/``to_k``, Meta LLaMA's ``wq``/``wk``, and T5's ``q``/``k`` under an attention layer
#: (``SelfAttention.q.weight``). Their gradients are second order at initialisation: dL/dW_query scales
#: with the keys and dL/dW_key with the queries, and where the attention logits start near 0 (Keras's
#: ``Embedding`` is uniform(-0.05, 0.05)) they are ~1e-5 while the model learns (trial 32c F1: healthy
#: Keras transformers were stopped by ``vanishing_gradient``, the first block's ``query/kernel`` their
#: "first layer"). Packed projections that hold the values too are layers: PyTorch's
#: ``nn.MultiheadAttention`` ``in_proj_weight`` (q, k and v in one), GPT-2's ``c_attn``, timm's ``qkv``,
#: GPT-NeoX's ``query_key_value``, a ``kv`` projection: the value rows' gradient is of the ordinary size,
#: and it is the norm of them all that is read.
QK_PROJECTIONS = (r"(^|[./])(query|key|q_proj|k_proj|q_lin|k_lin|to_q|to_k|wq|wk)([./]|$)"
                  r"|(attn|attention).*[./](q|k)([./]|$)")
#: ``vanishing_gradient``'s default ``exclude``: :data:`DEFAULT_EXCLUDE` and :data:`QK_PROJECTIONS`.
VANISHING_EXCLUDE = f"(?i)({_NOT_LAYERS}|{QK_PROJECTIONS})"

#: Activation tensors whose name tells a ReLU (Keras's ``re_lu``, ``leaky_relu``), or a sigmoid/tanh.
_RELU_NAME = re.compile(r"(?i)re_?lu")
_SQUASH_NAME = re.compile(r"(?i)(sigmoid|logistic|tanh)")


def layer_gradients(history: History, include: str, exclude: str | None) -> list[str]:
    """Weight gradients in network order (the order the adapter offered them)."""
    return in_capture_order(history, names_in(history, "gradients", include, exclude or None))


def activation_families(history: History) -> tuple[list[str], list[str]]:
    """What the run's captured activations tell of the network's nonlinearities, for the gradient
    rules' advice: ``(relu, squash)``, the captured tensors that show a ReLU (``relu_outputs``
    tensors, and ``activations``/``activation_inputs`` tensors whose name holds ``relu``/``re_lu``)
    and those that show a sigmoid or tanh (names holding ``sigmoid``, ``logistic`` or ``tanh``), each
    in capture order; both empty where no activation was captured (the default set captures none)."""
    acts = in_capture_order(history, list(dict.fromkeys(names_in(history, "activation_inputs")
                                                          + names_in(history, "activations"))))
    relu = in_capture_order(history, names_in(history, "relu_outputs"))
    relu += [n for n in acts if _RELU_NAME.search(n) and n not in relu]
    return relu, [n for n in acts if _SQUASH_NAME.search(n)]


def norms_at(history: History, names: list[str], reduction: str, step: int, mode: str, worker: int) -> list[tuple[str, float]]:
    """``[(name, value), ...]`` of ``reduction`` at exactly ``step``, in ``names``' order, leaving out
    the names with no value there (one :meth:`~tripwire._history.History.values_at` read)."""
    return [(n, v) for n, v in zip(names, history.values_at(names, reduction, step, mode, worker)) if v is not None]


def finite_norms(history: History, names: list[str], step: int, mode: str,
                 workers: Iterable[int]) -> Iterator[tuple[int, list[tuple[str, float]] | None]]:
    """Per worker with gradient norms at this step: ``(worker, [(name, l2), ...])`` in network
    order, or ``(worker, None)`` when one of them is NaN/Inf (``exploding_tensor``'s business)."""
    for worker in workers:
        l2 = norms_at(history, names, "l2", step, mode, worker)
        if l2:
            yield worker, (l2 if all(math.isfinite(v) for _, v in l2) else None)


def first_last_ratio(l2: list[tuple[str, float]]) -> tuple[str, float, str, float, float] | None:
    """``(first layer, its norm, last layer, its norm, first / last)``; None with fewer than two
    layers or a zero last norm."""
    if len(l2) < 2:
        return None
    (first, g1), (last, gl) = l2[0], l2[-1]
    return (first, g1, last, gl, g1 / gl) if gl > 0 else None


def dead_relus(history: History, step: int, mode: str, worker: int,
               threshold: float) -> list[tuple[str, float, int]]:
    """The captured ReLU tensors (:func:`activation_families`) whose latest ``zero_fraction`` at or
    before ``step`` (of ``mode``, ``worker``) is ``threshold`` or more: ``(name, zero fraction, its
    step)`` each, in capture order; ``[]`` where none is recorded so (no ReLU output captured, or
    none with a ``zero_fraction``)."""
    out = []
    for name in activation_families(history)[0]:
        if "zero_fraction" not in history.reductions(name):
            continue
        steps, values = history.finite_series(name, "zero_fraction", mode, worker)
        i = int(np.searchsorted(steps, step, side="right")) - 1
        if i >= 0 and values[i] >= threshold:
            out.append((name, float(values[i]), int(steps[i])))
    return out


#: The optimizer's gradient clipping as an integration records it (kind ``optimizer``, raw, at save
#: steps) and the names the messages give it: the limit of the global norm of all gradients, of each
#: gradient's norm, of each gradient's values.
CLIPPING = {"clip/global_norm": "global norm", "clip/norm": "norm per gradient", "clip/value": "value"}


def clipping_limits(history: History, step: int, mode: str, worker: int) -> list[str]:
    """The optimizer's gradient clipping the run records (:data:`CLIPPING`:
    ``clip/global_norm``, ``clip/norm``, ``clip/value`` of the ``optimizer`` collection, a limit above 0),
    as words: ``["global norm 1"]``; the last value at or before ``step`` of a ``train`` finding, the
    last recorded of another mode's; ``[]`` where the run records none (trial 32d: a Lightning fit with
    ``gradient_clip_val=1.0`` was told to add gradient clipping; ``exploding_gradient`` and
    ``oscillating_loss`` read it)."""
    clips = []
    for name, what in CLIPPING.items():
        if not history.has_tensor(name) or "raw" not in history.reductions(name):
            continue
        steps, values = history.series(name, "raw", "train", worker)
        if mode == "train":
            values = values[steps <= step]
        if len(values) and math.isfinite(float(values[-1])) and float(values[-1]) > 0:
            clips.append(f"{what} {fmt(float(values[-1]))}")
    return clips

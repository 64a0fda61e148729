"""Helpers of the gradient rules (private)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator

from .._history import History
from ._common import in_capture_order, names_in, value_at

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
DEFAULT_EXCLUDE = (
    r"(?i)(bias|norm|(^|[./_])bn\d*([./_]|$)|gamma|beta|embed|(^|[./_])emb\d*([./_]|$)"
    r"|(^|[./_])(wte|wpe)([./_]|$)"
    r"|(^|[./_])ln(_?(\d+|f|pre|post|final|out))?([./]|$)"
    r"|(^|[./_])(pos|position|positional)(_(enc\w*|h|w|table))?([./]|$)"
    r"|(^|[./_])(cls|class|dist|reg|register|mask|query|prompt)_?tokens?([./]|$)"
    r"|(^|[./_])logit_scale([./]|$))"
)

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
    out = []
    for n in names:
        v = value_at(history, n, reduction, step, mode, worker)
        if v is not None:
            out.append((n, v))
    return out


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

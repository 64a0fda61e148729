"""Trial 28d: the gradient rules on transformers and sequence models.

F1: GPT-2 / nanoGPT names slipped past the gradient rules' default exclusion: the token and position
tables ``wte``/``wpe`` and the LayerNorms ``ln_1``/``ln_2``/``ln_f``. ``exploding_gradient`` stopped a
healthy nanoGPT run: its "first layer" was the (tied, dense) ``transformer.wte.weight`` and its "last
layer" the final LayerNorm's scale ``transformer.ln_f.weight``, 75 times apart with no gradient above
0.42. The identical model named ``embed_tokens``/``norm_f`` ran to its end. Positional parameters
(``pos``, ``rel_pos_h``, ``positional_encoding``) and ViT tokens (``cls_token``) were layers too.

F4: a post-LN transformer that collapsed without warm-up was told "ReLU-family activations instead of
sigmoid/tanh, He/Xavier initialisation" by ``vanishing_gradient``, with the positional parameter ``pos``
as its first layer; where the gradients' names show attention or LayerNorm layers, the message now
names a learning rate too high without warm-up first (the decision is unchanged)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from torch import nn

import tripwire
from tripwire.rules import ExplodingGradient, VanishingGradient
from tripwire.rules._gradients import DEFAULT_EXCLUDE

#: Not layers: biases, normalisation parameters, embedding and position tables, tokens, scales.
EXCLUDED = [
    # nanoGPT / HF GPT-2
    "transformer.wte.weight", "transformer.wpe.weight", "transformer.h.0.ln_1.weight", "transformer.h.0.ln_2.bias",
    "transformer.ln_f.weight", "h.11.ln_1.weight",
    # HF BERT / LLaMA / T5
    "bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight",
    "bert.encoder.layer.0.attention.output.LayerNorm.weight", "model.embed_tokens.weight",
    "model.layers.0.input_layernorm.weight", "model.layers.0.post_attention_layernorm.weight", "model.norm.weight",
    "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", "encoder.final_layer_norm.weight",
    # torchvision ResNet / ViT
    "bn1.weight", "layer1.0.bn2.weight", "class_token", "encoder.pos_embedding",
    "encoder.layers.encoder_layer_0.ln_1.weight", "encoder.layers.encoder_layer_11.ln_2.weight", "encoder.ln.weight",
    # timm ViT / Swin / SAM, CLIP, Whisper
    "cls_token", "dist_token", "reg_token", "mask_token", "pos_embed", "blocks.0.norm1.weight", "blocks.0.ls1.gamma",
    "layers.0.blocks.0.attn.relative_position_bias_table", "blocks.0.attn.rel_pos_h", "blocks.0.attn.rel_pos_w",
    "positional_embedding", "ln_pre.weight", "ln_post.weight", "ln_final.weight", "logit_scale",
    "blocks.0.attn_ln.weight", "blocks.0.mlp_ln.weight",
    # positional parameters of hand-written models, GPT-style names
    "pos", "model.pos", "position", "encoder.positional_encoding", "pos_enc", "pos_emb", "position_bias",
    "tok_emb.weight", "wte.weight", "wpe.weight",
    # MultiheadAttention / RNN biases, Keras names
    "encoder.layers.0.self_attn.in_proj_bias", "rnn.bias_ih_l0", "embedding/embeddings",
    "layer_normalization/gamma", "batch_normalization/beta",
]

#: Layers: every ordinary Linear, Conv, attention projection, recurrent and head weight.
LAYERS = [
    # nanoGPT / HF GPT-2 (Conv1D c_attn / c_proj / c_fc) and its head
    "transformer.h.0.attn.c_attn.weight", "transformer.h.0.attn.c_proj.weight", "transformer.h.0.mlp.c_fc.weight",
    "transformer.h.0.mlp.c_proj.weight", "lm_head.weight", "transformer.h.0.attn.in_proj_weight",
    "transformer.h.0.attn.out_proj.weight", "transformer.h.0.mlp.0.weight",
    # HF BERT / LLaMA
    "bert.encoder.layer.0.attention.self.query.weight", "bert.encoder.layer.0.intermediate.dense.weight",
    "bert.pooler.dense.weight", "classifier.weight", "model.layers.0.self_attn.q_proj.weight",
    "model.layers.0.self_attn.o_proj.weight", "model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.down_proj.weight",
    # torchvision ResNet / ViT
    "conv1.weight", "layer1.0.conv1.weight", "layer2.0.downsample.0.weight", "fc.weight", "conv_proj.weight",
    "encoder.layers.encoder_layer_0.self_attention.in_proj_weight",
    "encoder.layers.encoder_layer_0.self_attention.out_proj.weight", "encoder.layers.encoder_layer_0.mlp.0.weight",
    "encoder.layers.encoder_layer_0.mlp.3.weight", "heads.head.weight",
    # timm ViT / Mixer, DeBERTa's position projections, nn.Transformer, RNNs
    "blocks.0.attn.qkv.weight", "blocks.0.attn.proj.weight", "blocks.0.mlp.fc1.weight", "head.weight",
    "blocks.0.mlp_tokens.fc1.weight", "blocks.0.mlp_channels.fc2.weight", "encoder.layer.0.attention.self.pos_proj.weight",
    "encoder.layer.0.attention.self.pos_q_proj.weight", "encoder.layers.0.linear1.weight", "encoder.layers.3.linear2.weight",
    "decoder.layers.0.multihead_attn.in_proj_weight", "rnn.weight_ih_l0", "lstm.weight_hh_l0_reverse",
    "features.0.weight", "classifier.1.weight", "net.0.weight", "fc1.weight", "linear.weight", "output.weight",
    "posterior.weight", "lnet.weight", "kiln.weight", "plan.0.weight", "layer_1.weight",
    # Keras
    "dense/kernel", "dense_1/kernel", "conv2d/kernel", "lstm/lstm_cell/kernel", "lstm/lstm_cell/recurrent_kernel",
    "gru/kernel", "multi_head_attention/query/kernel",
]


@pytest.mark.parametrize("name", EXCLUDED)
def test_the_default_exclusion_leaves_out_tables_norms_tokens_and_biases(name: str) -> None:
    assert re.search(DEFAULT_EXCLUDE, name), name


@pytest.mark.parametrize("name", LAYERS)
def test_the_default_exclusion_keeps_every_linear_conv_and_head_weight(name: str) -> None:
    assert not re.search(DEFAULT_EXCLUDE, name), name


def test_torch_modules_own_parameter_names_are_sorted_as_layers_or_not() -> None:
    layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
    kept = [n for n, _ in layer.named_parameters() if not re.search(DEFAULT_EXCLUDE, n)]
    assert kept == ["self_attn.in_proj_weight", "self_attn.out_proj.weight", "linear1.weight", "linear2.weight"]
    lstm = nn.LSTM(4, 8, num_layers=2, bidirectional=True)
    assert all(re.search(DEFAULT_EXCLUDE, n) is None for n, _ in lstm.named_parameters() if n.startswith("weight"))
    assert all(re.search(DEFAULT_EXCLUDE, n) for n, _ in lstm.named_parameters() if n.startswith("bias"))


def _nanogpt_grads(names: tuple[str, str, str], step: int) -> dict[str, tuple[Any, str]]:
    """Gradient norms of a nanoGPT-sized run like the trial's (``wte`` tied to the head: a dense 0.42;
    ``ln_f`` 0.0055: 76 times apart; every weight of the blocks between 0.02 and 0.06)."""
    wte, wpe, ln_f = names
    rng = np.random.default_rng(step)

    def g(shape: tuple[int, ...], norm: float) -> tuple[Any, str]:
        v = rng.normal(size=shape)
        return v * (norm / np.linalg.norm(v)), "gradients"

    out: dict[str, tuple[Any, str]] = {f"gradients/transformer.{wte}.weight": g((12, 32), 0.42),
                                       f"gradients/transformer.{wpe}.weight": g((32, 32), 0.05)}
    for i in range(2):
        p = f"gradients/transformer.h.{i}"
        out.update({f"{p}.ln_1.weight": g((32,), 0.01), f"{p}.attn.in_proj_weight": g((96, 32), 0.06),
                    f"{p}.attn.in_proj_bias": g((96,), 0.01), f"{p}.attn.out_proj.weight": g((32, 32), 0.05),
                    f"{p}.ln_2.weight": g((32,), 0.01), f"{p}.mlp.0.weight": g((128, 32), 0.04),
                    f"{p}.mlp.2.weight": g((32, 128), 0.03)})
    out[f"gradients/transformer.{ln_f}.weight"] = g((32,), 0.0055)
    out[f"gradients/transformer.{ln_f}.bias"] = g((32,), 0.004)
    out["loss"] = (2.3 - 0.001 * step, "losses")
    return out


@pytest.mark.parametrize("names", [("wte", "wpe", "ln_f"), ("embed_tokens", "embed_positions", "norm_f")])
def test_a_healthy_nanogpt_is_not_stopped_whatever_its_naming(names: tuple[str, str, str]) -> None:
    session = tripwire.Session(write=False, rules=[ExplodingGradient(), VanishingGradient()], save_interval=1,
                               actions=["log", "stop_training"])
    for step in range(8):
        session.step("train", step, _nanogpt_grads(names, step))
    session.close()
    assert session.findings == []


def test_a_real_first_layer_far_above_the_last_is_still_found_in_gpt2_naming() -> None:
    session = tripwire.Session(write=False, rules=[ExplodingGradient()], save_interval=1)
    for step in range(6):
        grads = _nanogpt_grads(("wte", "wpe", "ln_f"), step)
        grads["gradients/transformer.h.0.attn.in_proj_weight"] = (np.full((96, 32), 0.1), "gradients")  # norm 5.5
        session.step("train", step, grads)
    session.close()
    assert [(f.rule, f.tensors[0]) for f in session.findings] == [
        ("exploding_gradient", "gradients/transformer.h.0.attn.in_proj_weight")]


# ---------------------------------------------------------------------------------------------- F4
def _collapsed(first_layers: dict[str, float], last: str, steps: int = 6) -> list[tripwire.Finding]:
    """A run whose first layers' gradients are ~1e-3 of the last layer's, the loss flat (no convergence)."""
    session = tripwire.Session(write=False, rules=[VanishingGradient()], save_interval=1)
    for step in range(steps):
        tensors: dict[str, tuple[Any, str]] = {
            f"gradients/{n}": (np.full((4, 4), v / 4), "gradients") for n, v in first_layers.items()}
        tensors[f"gradients/{last}"] = (np.full((4, 4), 0.09 / 4), "gradients")
        tensors["loss"] = (2.30, "losses")
        session.step("train", step, tensors)
    session.close()
    return session.findings


TRANSFORMER = {"pos": 8.1e-5, "encoder.layers.0.self_attn.in_proj_weight": 8e-5,
               "encoder.layers.0.norm1.weight": 1e-5, "encoder.layers.0.linear1.weight": 5e-5}


def test_a_collapsed_transformer_is_told_of_warm_up_first_and_pos_is_no_layer() -> None:
    found = _collapsed(TRANSFORMER, "encoder.layers.3.linear2.weight")
    assert [(f.rule, f.step) for f in found] == [("vanishing_gradient", 2)]
    message = found[0].message
    assert message.startswith("the gradient of the first layer gradients/encoder.layers.0.self_attn.in_proj_weight has")
    assert "gradients/pos " not in message
    warm = message.index("without warm-up")
    assert "transformer (attention/LayerNorm layers: gradients/encoder.layers.0.self_attn.in_proj_weight" in message
    assert warm < message.index("He/Xavier") and warm < message.index("ReLU-family")
    assert "a learning-rate warm-up over the first steps" in message


# (the query and key projections are no layers to vanishing_gradient (trial 32c F1: their gradients are
# second-order at initialisation): the value projections stand for LLaMA's and Keras's attention)
@pytest.mark.parametrize("first", ["transformer.h.0.attn.c_attn.weight", "model.layers.0.self_attn.v_proj.weight",
                                   "multi_head_attention/value/kernel"])
def test_gpt_llama_and_keras_attention_names_get_the_warm_up_advice(first: str) -> None:
    found = _collapsed({first: 8e-5}, "head.weight")
    assert len(found) == 1 and "without warm-up" in found[0].message


def test_a_layernorm_alone_shows_a_transformer_too() -> None:
    found = _collapsed({"blocks.0.ln_1.weight": 1e-5, "blocks.0.fc.weight": 8e-5}, "head.weight")
    assert len(found) == 1 and "LayerNorm layers: gradients/blocks.0.ln_1.weight" in found[0].message


def test_an_mlp_keeps_the_usual_advice() -> None:
    found = _collapsed({"encoder.layers.0.weight": 8e-5, "fc1.weight": 7e-5}, "fc3.weight")
    assert len(found) == 1
    assert "warm-up" not in found[0].message and found[0].message.split(". ", 1)[1].startswith(
        "Usual fixes: ReLU-family activations instead of sigmoid/tanh")


def test_the_every_layer_clause_of_a_transformer_names_warm_up_first() -> None:
    session = tripwire.Session(write=False, rules=[VanishingGradient(ratio=1e-9)], save_interval=1)
    for step in range(4):
        session.step("train", step, {"gradients/h.0.attn.c_attn.weight": (np.full((4, 4), 1e-9), "gradients"),
                                     "gradients/h.0.mlp.c_fc.weight": (np.full((4, 4), 2e-9), "gradients"),
                                     "loss": (2.3, "losses")})
    session.close()
    assert len(session.findings) == 1
    message = session.findings[0].message
    assert "every captured layer's mean |gradient|" in message
    assert message.index("without warm-up") < message.index("saturated activations")


def test_the_warm_up_advice_changes_no_decision() -> None:
    # the same gradients with and without attention names: found at the same step, or not at all
    healthy = {"encoder.layers.0.self_attn.in_proj_weight": 0.02, "encoder.layers.0.linear1.weight": 0.05}
    assert _collapsed(healthy, "encoder.layers.3.linear2.weight") == []
    renamed = {n.replace("self_attn", "mix"): v for n, v in TRANSFORMER.items()}
    steps = [f.step for f in _collapsed(renamed, "encoder.layers.3.linear2.weight")]
    assert steps == [f.step for f in _collapsed(TRANSFORMER, "encoder.layers.3.linear2.weight")] == [2]


def test_a_real_post_ln_transformers_parameter_names_show_attention() -> None:
    from tripwire.rules.vanishing_gradient import _transformer_layers

    model = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 2,
                                  enable_nested_tensor=False)
    names = [f"gradients/{n}" for n, _ in model.named_parameters()]
    assert _transformer_layers(names) == "gradients/layers.0.self_attn.in_proj_weight"
    assert _transformer_layers([f"gradients/{n}" for n, _ in nn.Sequential(nn.Linear(2, 2), nn.LSTM(2, 2)).named_parameters()]) is None

"""Trial 32d F1: a planted dead ReLU in a transformer was blamed on "a learning rate too high without
warm-up", and the dead layer was never named.

The head was ``Linear(16, 32) -> nn.ReLU -> Linear(32, 2)``, its first bias -20: the ReLU's outputs were
all 0 (``relu_outputs`` ``head.1/output``, zero fraction 1.0 at every save), every gradient exactly 0.
``vanishing_gradient`` put the transformer's warm-up sentence first (the gradient names hold
``self_attn``), and named no layer dead. Now captured ReLU outputs at ``dead_relu``'s default threshold
(95% zeros) or more are named, first, and a gradient of exactly 0 (which a collapse without warm-up does
not leave) leads with dead ReLUs too. (The real Lightning fit is in
tests/integrations/test_trial32d_dead_relu_transformer.py.)"""

from __future__ import annotations

from typing import Any

import numpy as np

import tripwire
from tripwire.rules import VanishingGradient

#: The trial's transformer's weight gradients, in network order.
LAYERS = ["enc.layers.0.self_attn.in_proj_weight", "enc.layers.0.self_attn.out_proj.weight",
          "enc.layers.0.linear1.weight", "enc.layers.0.linear2.weight", "head.0.weight", "head.2.weight"]


def _run(grads: dict[str, float], relus: dict[str, float] | None = None, losses: list[float] | None = None,
         steps: int = 3) -> list[tripwire.Finding]:
    """``steps`` saves of gradients of the given L2 norms (``np.full((4, 4), v / 4)``) and of ReLU
    outputs with the given zero fractions (a (10, 10) array), the loss flat at ln 2 unless given."""
    collections: Any = ["gradients", "losses"] + (["relu_outputs"] if relus else [])
    session = tripwire.Session(write=False, rules=[VanishingGradient()], save_interval=1, collections=collections)
    for step in range(steps):
        tensors: dict[str, tuple[Any, str]] = {
            f"gradients/{n}": (np.full((4, 4), v / 4), "gradients") for n, v in grads.items()}
        for name, zeros in (relus or {}).items():
            out = np.ones(100)
            out[:round(zeros * 100)] = 0.0
            tensors[name] = (out.reshape(10, 10), "relu_outputs")
        tensors["loss"] = ((losses or [0.693] * steps)[step], "losses")
        session.step("train", step, tensors)
    session.close()
    return session.findings


def test_the_trials_dead_head_is_named_first_and_warm_up_is_not_said() -> None:
    [finding] = _run(dict.fromkeys(LAYERS, 0.0), {"head.1/output": 1.0})
    message = finding.message
    assert message.startswith("every captured layer's mean |gradient| is below 1e-07 (6 captured; largest 0 in "
                              "gradients/enc.layers.0.self_attn.in_proj_weight): the network does not learn. The "
                              "network has ReLUs (head.1/output captured); the usual cause is dead ReLUs, and the run "
                              "shows a dead layer (95% zeros or more, dead_relu's default threshold): head.1/output, "
                              "100% zeros at step 2. Dead ReLUs: a ReLU layer whose units output 0"), message
    assert "warm-up" not in message and "transformer" not in message, message


def test_the_ratio_clause_names_the_dead_layer_first_too() -> None:
    grads = {n: 1e-6 for n in LAYERS[:-1]} | {LAYERS[-1]: 0.5}
    [finding] = _run(grads, {"head.1/output": 0.97, "enc.layers.0.activation/output": 0.5})
    message = finding.message
    assert ("the usual cause is dead ReLUs, and the run shows a dead layer (95% zeros or more, dead_relu's default "
            "threshold): head.1/output, 97% zeros at step 2. Dead ReLUs:") in message, message
    assert "enc.layers.0.activation/output, " not in message and "warm-up" not in message, message


def test_several_dead_layers_are_counted() -> None:
    relus = {f"head.{i}/output": 1.0 for i in range(1, 9, 2)}
    [finding] = _run(dict.fromkeys(LAYERS, 0.0), relus)
    assert ("shows 4 dead layers (95% zeros or more, dead_relu's default threshold): head.1/output, 100% zeros at "
            "step 2; head.3/output, 100% zeros at step 2; head.5/output, 100% zeros at step 2; and 1 more. "
            "Dead ReLUs:") in finding.message, finding.message


def test_an_exactly_zero_gradient_leads_with_dead_relus_without_relu_outputs() -> None:
    [finding] = _run(dict.fromkeys(LAYERS, 0.0))
    message = finding.message
    assert "the network does not learn. A first-layer gradient of exactly 0 usually means dead ReLUs" in message
    assert "warm-up" not in message, message


def test_healthy_relus_of_a_collapsed_transformer_keep_the_warm_up_advice_first() -> None:
    # (ReLUs near 50% zeros: none dead; gradients tiny but not 0, the loss flat: the collapse trial 28d saw)
    grads = {n: 5e-5 for n in LAYERS[:-1]} | {LAYERS[-1]: 0.09}
    [finding] = _run(grads, {"head.1/output": 0.5})
    message = finding.message
    assert "The gradients' names show a transformer" in message and "dead layer" not in message, message
    assert message.index("without warm-up") < message.index("dead ReLUs"), message


def test_a_dead_layer_long_ago_is_no_dead_layer_now() -> None:
    # the latest zero fraction is read: a layer that was dead at step 0 and lives since is not named
    session = tripwire.Session(write=False, rules=[VanishingGradient()], save_interval=1,
                               collections=["gradients", "losses", "relu_outputs"])
    for step, zeros in enumerate([1.0, 0.5, 0.5]):
        out = np.ones(100)
        out[:round(zeros * 100)] = 0.0
        session.step("train", step, {**{f"gradients/{n}": (np.zeros((4, 4)), "gradients") for n in LAYERS},
                                     "head.1/output": (out, "relu_outputs"), "loss": (0.693, "losses")})
    session.close()
    [finding] = session.findings
    assert "dead layer" not in finding.message and "The network has ReLUs (head.1/output captured)" in finding.message

"""Trials 25a (finding 3) and 25c (finding 3): a later training through the same session (a second
Keras ``fit``, or MXNet ``est.fit``, through one callback: ``Session.new_training``) is a training of
its own, and every rule is armed again; but the rules that read a series from its start (the
loss's initial level, its first values, windows, running minima, noise; a gradient's first norm and
peak; the validation's best) still read the earlier fit's values. A healthy new model was stopped by
``loss_diverging`` (Keras: the first fit's fallen loss read as "the training is diverging") and by
``oscillating_loss`` (MXNet: a window holding the first fit's exploded losses). Each built-in rule
now judges only the steps of the training it is armed for, its running state restarted: a healthy
re-fit gets no finding, and a fault in it is found at the same step as through a fresh session."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire.rules import (
    ExplodingGradient,
    LossDiverging,
    LossNotDecreasing,
    OscillatingLoss,
    Overtraining,
    PoorWeightInitialization,
    StalledTraining,
    VanishingGradient,
)
from tripwire.rules import check_rule

Fit = Sequence[tuple[str, dict[str, Any]]]  # (mode, {name: (value, kind)}), the steps counted by the session


def _noisy(x: np.ndarray, seed: int, rel: float = 0.03) -> np.ndarray:
    return x * (1.0 + rel * np.random.default_rng(seed).standard_normal(len(x)))


def _losses(values: Any) -> list[tuple[str, dict[str, Any]]]:
    return [("train", {"loss": (float(v), "losses")}) for v in values]


FELL = _noisy(np.geomspace(1.0, 0.01, 150), 1)  # the first fit learnt: its loss fell 100x
EXPLODED = [2.3] + [1e20 if i % 2 else 1e18 for i in range(1, 10)]  # the first fit at lr 1e6 (trial 25c)
HEALTHY = _noisy(np.linspace(0.8, 0.5, 120), 2)  # a new model, learning
DIVERGES = _noisy(np.concatenate([np.geomspace(0.8, 0.1, 60), np.linspace(0.1, 0.8, 60)]), 3)
OSCILLATES = np.concatenate([_noisy(np.full(30, 1.0), 4), np.tile([0.2, 3.0], 30)])
FLAT = _noisy(np.full(120, 0.7), 5)  # a new model that does not learn


def _feed(session: tripwire.Session, fit: Fit) -> None:
    for mode, tensors in fit:
        session.step(mode, None, tensors)  # type: ignore[arg-type]  # (None: the session counts the steps)


def _refit(rules: Callable[[], list[Any]], first: Fit, second: Fit, save_interval: int = 1
           ) -> tuple[list[tuple[str, int, str]], list[tuple[str, int, str]], tripwire.Session]:
    """The findings of ``second`` as a later training through the session that ran ``first`` (their
    steps counted from that training's first), those of ``second`` through a fresh session, and the
    first session."""
    same = tripwire.Session(write=False, rules=rules(), save_interval=save_interval)
    _feed(same, first)
    same.new_training()  # (the first training's end judged: its findings are not the re-fit's)
    before, starts = len(same.findings), dict(same.mode_steps)
    _feed(same, second)
    refit = [(f.rule, f.step - starts[f.mode], f.mode) for f in same.findings[before:]]
    fresh = tripwire.Session(write=False, rules=rules(), save_interval=save_interval)
    _feed(fresh, second)
    return refit, [(f.rule, f.step, f.mode) for f in fresh.findings], same


def _loss_rules() -> list[Any]:
    return [LossDiverging(), OscillatingLoss(), LossNotDecreasing(num_steps=50)]


@pytest.mark.parametrize("save_interval", [1, 5])
@pytest.mark.parametrize("first", [FELL, EXPLODED], ids=["fell", "exploded"])
def test_a_healthy_refit_is_not_judged_on_the_earlier_fits_losses(first: Any, save_interval: int) -> None:
    # trial 25a: after a fit whose loss fell, loss_diverging read a new model's loss as climbing back
    # from the first fit's lowest level; trial 25c: after a fit that exploded, oscillating_loss judged
    # windows holding its 1e20 losses
    refit, fresh, session = _refit(_loss_rules, _losses(first), _losses(HEALTHY), save_interval)
    assert fresh == []
    assert refit == []
    assert session.stopped_by is None


@pytest.mark.parametrize("save_interval", [1, 5])
@pytest.mark.parametrize("first, second, rule", [
    (FELL, DIVERGES, LossDiverging),
    (EXPLODED, OSCILLATES, OscillatingLoss),
    (FELL, FLAT, lambda: LossNotDecreasing(num_steps=50)),  # (its start was the first fit's: never found)
], ids=["loss_diverging", "oscillating_loss", "loss_not_decreasing"])
def test_a_fault_of_the_refit_is_found_where_a_fresh_session_finds_it(first: Any, second: Any, rule: Any,
                                                                      save_interval: int) -> None:
    refit, fresh, _ = _refit(lambda: [rule()], _losses(first), _losses(second), save_interval)
    assert fresh and fresh[0][0] == rule().name
    assert refit == fresh


def _grads(loss: float, norms: Sequence[float]) -> tuple[str, dict[str, Any]]:
    out: dict[str, Any] = {"loss": (loss, "losses")}
    for i, norm in enumerate(norms):
        out[f"gradients/layers.{i}.weight"] = (np.full((4, 4), norm / 4.0), "gradients")
    return "train", out


def test_vanishing_gradient_reads_the_refits_first_loss() -> None:
    # the first fit started at a loss of 100: the new model's 0.05 read as "converged" (below 1e-3 of
    # the first fit's first loss), and its vanishing gradients went unreported
    first = [_grads(100.0 / (i + 1), [1.0] * 4) for i in range(20)]
    second = [_grads(0.05, [1e-7, 1e-3, 1e-1, 1.0]) for _ in range(5)]
    refit, fresh, _ = _refit(lambda: [VanishingGradient()], first, second)
    assert fresh == [("vanishing_gradient", 2, "train")]  # (patience 3)
    assert refit == fresh


def test_exploding_gradient_reads_the_refits_first_norms_and_loss() -> None:
    # a new model whose gradients and loss start higher than the first fit's read as "training
    # diverged": its norms 100x the first fit's first, its loss 7x the first fit's first
    first = [_grads(0.1, [0.01] * 4) for _ in range(20)]
    second = [_grads(0.7, [1.0] * 4) for _ in range(10)]
    refit, fresh, session = _refit(lambda: [ExplodingGradient()], first, second)
    assert fresh == [] and refit == []
    assert session.stopped_by is None


def test_the_refits_first_weights_are_judged_again() -> None:
    # poor_weight_initialization judged each worker's first weights once per session: a new model
    # with constant weights, fitted through the same callback, went unreported
    good = np.random.default_rng(0).normal(0.0, 0.1, size=(8, 8))
    first = [("train", {"loss": (1.0, "losses"), "fc.weight": (good, "weights")}) for _ in range(5)]
    second = [("train", {"loss": (1.0, "losses"), "fc.weight": (np.full((8, 8), 0.5), "weights")}) for _ in range(5)]
    refit, fresh, _ = _refit(lambda: [PoorWeightInitialization()], first, second)
    assert fresh == [("poor_weight_initialization", 0, "train")]
    assert refit == fresh


def _epochs(train: Sequence[float], val: Sequence[float], per: int = 5) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for t, v in zip(train, val):
        out += [("train", {"loss": (float(t), "losses")})] * per
        out.append(("eval", {"val_loss": (float(v), "losses")}))
    return out


def test_overtraining_reads_the_refits_validations_only() -> None:
    # the first fit's best validation loss (0.1) stayed the best: each validation of the new model,
    # improving 3% a time, counted as one more without improvement
    first = _epochs(np.geomspace(1.0, 0.05, 14), np.geomspace(1.0, 0.1, 14))
    second = _epochs([0.7] * 14, 0.9 * 0.97 ** np.arange(14))
    refit, fresh, _ = _refit(lambda: [Overtraining(val_patience=10, window=5)], first, second)
    assert fresh == [] and refit == []
    # (and a refit that stops improving is found where a fresh session finds it)
    stuck = _epochs([0.7] * 14, [0.9, 0.8] + [0.8] * 12)
    refit, fresh, _ = _refit(lambda: [Overtraining(val_patience=10, window=5)], first, stuck)
    assert fresh and refit == fresh


def test_stalled_training_does_not_count_the_pause_between_two_fits() -> None:
    h = tripwire.History()
    rule = StalledTraining(threshold=10.0)
    for step in range(3):  # the first fit
        h.add_step("train", step, 0, 100.0 + step, [("loss", ("raw",))], np.array([1.0]))
        assert rule.evaluate(h, step, "train") == []
    rule.rearm({"train": 3, "eval": 0, "test": 0, "predict": 0})
    for step in range(3, 6):  # the second, an hour later (a notebook cell run again)
        h.add_step("train", step, 0, 3700.0 + step, [("loss", ("raw",))], np.array([1.0]))
        assert rule.evaluate(h, step, "train") == []
    h.add_step("train", 6, 0, 3730.0, [("loss", ("raw",))], np.array([1.0]))  # a stall in the second fit
    found = rule.evaluate(h, 6, "train")
    assert [f.step for f in found] == [6] and "25 s after the previous record" in found[0].message


def test_the_armed_training_is_kept_in_the_rules_state() -> None:
    # a resumed later training (its session's state_dict loaded into a new one) keeps judging its own
    # steps only
    h = tripwire.History()
    for step, v in enumerate(np.concatenate([FELL, HEALTHY])):
        h.add_step("train", step, 0, float(step), [("loss", ("raw",))], np.array([v]))
    last = len(FELL) + len(HEALTHY) - 1
    unarmed = LossDiverging(patience=1)
    assert unarmed.evaluate(h, last, "train")  # (what the earlier fit's losses made of this one)
    armed = LossDiverging(patience=1)
    armed.rearm({"train": len(FELL), "eval": 0})
    state = armed.state_dict()
    assert state["armed_from"] == {"train": len(FELL), "eval": 0}
    resumed = LossDiverging(patience=1)
    resumed.load_state_dict(state)
    assert resumed.armed_from == armed.armed_from and resumed.state_dict() == state
    assert resumed.evaluate(h, last, "train") == [] and armed.evaluate(h, last, "train") == []
    check_rule(armed)  # (its state still round-trips as plain data)


def test_a_later_keras_fit_through_the_same_callback_is_judged_on_its_own_losses(tmp_path) -> None:
    # trial 25a's k_rules_fresh.py, smaller: fit 1 learns (its loss falls to about 0.02), fit 2 is a
    # new model at a low learning rate through the same callback
    os.environ.setdefault("KERAS_BACKEND", "torch")
    keras = pytest.importorskip("keras")
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    from tripwire.integrations.keras import TripwireCallback

    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 8)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")

    def model(lr: float) -> Any:
        keras.utils.set_random_seed(0)
        m = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)])
        m.compile(optimizer=keras.optimizers.SGD(lr),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        return m

    rules = [{"name": "loss_diverging"}, "default"]
    cb = TripwireCallback(out_dir=str(tmp_path / "same"), rules=rules, save_interval=2,
                          actions=["log", "stop_training"])
    model(0.5).fit(x, y, epochs=8, batch_size=32, callbacks=[cb], verbose=0)
    assert cb.findings == []
    fit2 = model(0.02).fit(x, y, epochs=3, batch_size=32, callbacks=[cb], verbose=0)
    assert [(f.rule, f.step) for f in cb.findings] == [] and cb.stopped_by is None
    assert len(fit2.history["loss"]) == 3
    cb.close()
    assert tripwire.open_run(str(tmp_path / "same")).status == "complete"

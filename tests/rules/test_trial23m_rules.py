"""Trial 23m: the built-in rules at their edges (NaN predictions, start_step, modes: [], only_nan,
a loss at 0, a zero-variance layer, messages and errors)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire.rules import (
    ClassImbalance,
    Confusion,
    DeadRelu,
    ExplodingTensor,
    LossNotDecreasing,
    PoorWeightInitialization,
    SimilarAcrossRuns,
    TensorVariance,
    WeightUpdateRatio,
)


def names(findings: list[tripwire.Finding]) -> list[str]:
    return [f.rule for f in findings if f.kind == "finding"]


def _eval_rounds(labels: np.ndarray, preds: np.ndarray, rounds: int = 3) -> list[Any]:
    out: list[Any] = []
    for r in range(rounds):
        out.append(("train", r, {"loss": (1.0, "losses")}))
        out.append(("eval", r, {"labels": (labels, "labels"), "predictions": (preds, "predictions")}))
    return out


# ------------------------------------------------------------------- 1. class rules, NaN predictions
@pytest.mark.parametrize("columns", [False, True])
def test_class_imbalance_is_silent_on_nan_predictions(feed, columns: bool) -> None:
    # trial 23m: every prediction NaN read as class 0: "minority class 1 has recall 0: the model
    # neglects it. Usual fixes: class weights" (the wrong cause and the wrong fix)
    labels = np.array([0] * 90 + [1] * 10)
    nan = np.full((100, 2) if columns else 100, np.nan)
    assert feed(ClassImbalance(), _eval_rounds(labels, nan)) == []
    # the NaN is exploding_tensor's finding (predictions are stored whole)
    found = feed(ExplodingTensor(), _eval_rounds(labels, nan), include_collections=["labels", "predictions"])
    assert names(found) == ["exploding_tensor"] and found[0].tensors == ("predictions",)


def test_class_imbalance_judges_the_finite_samples_beside_nan_ones(feed) -> None:
    # a neglected minority (every score 0.1) among 200 samples, 20 of them NaN: still a finding, on
    # the 180 others
    labels = np.array([0] * 180 + [1] * 20)
    scores = np.full(200, 0.1)
    scores[::10] = np.nan
    found = feed(ClassImbalance(max_auc=1.0), _eval_rounds(labels, scores))
    assert names(found) == ["class_imbalance"] and found[0].details["samples"] == 180


def test_confusion_is_silent_on_nan_predictions(feed) -> None:
    labels = np.repeat([0, 1, 2], 50)
    assert feed(Confusion(min_accuracy=0.0), _eval_rounds(labels, np.full((150, 3), np.nan), rounds=4)) == []


# ------------------------------------------------------------------- 2. start_step and the look-back
def test_exploding_tensor_does_not_look_back_into_the_warm_up(feed) -> None:
    # trial 23m: with start_step 5, a NaN loss at step 3 was reported at step 3 (at the first
    # evaluation, step 5), where tree_depth leaves its warm-up alone
    early = [("train", s, {"loss": (np.nan if s == 3 else 1.0, "losses")}) for s in range(8)]
    assert feed(ExplodingTensor(start_step=5), early) == []
    assert [f.step for f in feed(ExplodingTensor(), early)] == [3]
    at_start = [("train", s, {"loss": (np.nan if s == 5 else 1.0, "losses")}) for s in range(8)]
    assert [f.step for f in feed(ExplodingTensor(start_step=5), at_start)] == [5]


def test_exploding_tensor_look_back_from_start_step_between_sparse_saves(feed) -> None:
    # saves every 4 steps, the loss kept at every step: the first evaluation (step 8) looks back
    # to start_step 6, not before
    def run(bad: int) -> list[tripwire.Finding]:
        recs = [("train", s, {"loss": (np.nan if s == bad else 1.0, "losses")}) for s in range(12)]
        return feed(ExplodingTensor(start_step=6), recs, save_interval=4)

    assert run(5) == []
    assert [f.step for f in run(6)] == [6]


def test_similar_across_runs_does_not_look_back_into_the_warm_up(tmp_path, feed) -> None:
    ref = tmp_path / "ref"
    with tripwire.Session(out_dir=str(ref), save_interval=1) as s:
        for i in range(8):
            s.step("train", i, {"loss": (1.0, "losses")})
    differ = [("train", i, {"loss": (2.0 if i == 2 else 1.0, "losses")}) for i in range(8)]
    assert feed(SimilarAcrossRuns(other=str(ref), start_step=4), differ) == []
    assert [f.step for f in feed(SimilarAcrossRuns(other=str(ref)), differ)] == [2]


# ------------------------------------------------------------------------------------ 3. modes: []
@pytest.mark.parametrize("modes", [[], (), 5, {}])
def test_empty_modes_are_refused(modes: Any) -> None:
    # trial 23m: modes: [] was accepted and switched the rule off, silently
    with pytest.raises(tripwire.ConfigError, match=r"dead_relu\.modes: got .*; accepted: a mode or a non-empty list"):
        DeadRelu(modes=modes)
    with pytest.raises(tripwire.ConfigError, match=r"rules\[0\]: dead_relu\.modes: got .*train, eval"):
        tripwire.load_config({"rules": [{"name": "dead_relu", "modes": modes}]})


def test_modes_still_take_a_name_or_a_list() -> None:
    assert DeadRelu(modes="eval").modes == ("eval",)
    assert DeadRelu(modes=["train", "eval"]).modes == ("train", "eval")
    assert DeadRelu(modes=iter(["eval"])).modes == ("eval",)
    assert DeadRelu().modes == ("train",)


# --------------------------------------------------------------------------------------- 4. only_nan
def _weights(w: np.ndarray) -> list[Any]:
    return [("train", 0, {"loss": (1.0, "losses"), "fc.weight": (w, "weights")})]


def test_only_nan_ignores_plus_and_minus_inf_together(feed) -> None:
    # trial 23m: +inf beside -inf makes the mean NaN: "fc.weight holds 2 non-finite values" with only_nan
    w = np.ones(100)
    w[3], w[4] = np.inf, -np.inf
    assert feed(ExplodingTensor(only_nan=True), _weights(w), include_collections=["weights"]) == []
    assert names(feed(ExplodingTensor(), _weights(w), include_collections=["weights"])) == ["exploding_tensor"]
    w[5] = np.nan
    found = feed(ExplodingTensor(only_nan=True), _weights(w), include_collections=["weights"])
    assert names(found) == ["exploding_tensor"]
    assert "fc.weight holds NaN (3 non-finite values in all)" in found[0].message


def test_only_nan_on_a_collection_it_names_reads_abs_mean(feed) -> None:
    w = np.ones(10)
    w[0], w[1] = np.inf, -np.inf
    cols = {"weights": {"kinds": ["weights"], "reductions": ["mean", "nonfinite_count"]}}
    assert feed(ExplodingTensor(collections=["losses", "weights"], only_nan=True), _weights(w), collections=cols) == []


def test_only_nan_says_what_a_nan_mean_may_be_where_only_the_mean_was_stored(feed) -> None:
    w = np.ones(10)
    w[0], w[1] = np.inf, -np.inf
    only_mean = {"weights": {"kinds": ["weights"], "reductions": ["mean", "nonfinite_count"]}}
    found = feed(ExplodingTensor(only_nan=True), _weights(w), collections=only_mean)
    assert names(found) == ["exploding_tensor"] and "NaN, or both +inf and -inf (a mean of nan)" in found[0].message
    # without nonfinite_count: the l2 norm (inf, not NaN) is read before the mean
    with_l2 = {"weights": {"kinds": ["weights"], "reductions": ["mean", "l2"]}}
    assert feed(ExplodingTensor(only_nan=True), _weights(w), collections=with_l2) == []
    w[2] = np.nan
    found = feed(ExplodingTensor(only_nan=True), _weights(w), collections=with_l2)
    assert names(found) == ["exploding_tensor"] and "holds NaN (its l2 is nan)" in found[0].message


# ------------------------------------------------------------------------- 5. loss_not_decreasing at 0
def _flat(value: float) -> list[tripwire.Finding]:
    session = tripwire.Session(write=False, rules=[LossNotDecreasing()], save_interval=1)
    session.set_planned_steps(1000)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # trial 23m: numpy's "invalid value" leaked
        for step in range(101):
            session.step("train", step, {"loss": (np.float64(value), "losses")})
    return session.findings


def test_loss_not_decreasing_message_of_a_loss_held_at_zero() -> None:
    # trial 23m: "loss has fallen inf% in 100 steps, ... (a fall counts beyond nan%, ...)"
    found = _flat(0.0)
    assert names(found) == ["loss_not_decreasing"]
    msg = found[0].message
    # (trial 29a: what holds is its level, a median: "has not changed ... (it holds 2.326)" read wrong of a
    # loss moving at every step)
    held = ("loss's level has not changed in 100 steps (its start level and its lowest level since, each a median "
            "of its values, are both 0)")
    assert "inf%" not in msg and "nan%" not in msg and held in msg, msg


def test_loss_not_decreasing_message_of_a_flat_negative_loss() -> None:
    # trial 23m: a loss flat at -1 read "loss has risen 0% in 100 steps, to -1"
    found = _flat(-1.0)
    assert names(found) == ["loss_not_decreasing"]
    held = ("loss's level has not changed in 100 steps (its start level and its lowest level since, each a median "
            "of its values, are both -1)")
    assert "risen" not in found[0].message and held in found[0].message, found[0].message


def test_loss_not_decreasing_rise_from_zero_is_told_in_units() -> None:
    session = tripwire.Session(write=False, rules=[LossNotDecreasing()], save_interval=1)
    session.set_planned_steps(1000)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for step in range(101):
            session.step("train", step, {"loss": (np.float64(0.0 if step < 50 else 0.5), "losses")})
    msg = session.findings[0].message
    assert "loss has risen by 0.5 (from 0)" in msg and "inf%" not in msg and "nan%" not in msg


# --------------------------------------------------------------- 6. poor_weight_initialization, var 0
def _layers(variances: list[float]) -> list[Any]:
    tensors: dict[str, Any] = {"loss": (1.0, "losses"), "fc1.weight": (np.array([-0.5, 0.5]), "weights")}
    for i, v in enumerate(variances):
        tensors[f"l{i}/output"] = (np.array([-1.0, 1.0]) * np.sqrt(v), "activations")
    return [("train", 0, tensors)]


def test_poor_init_leaves_a_constant_layer_out_of_the_ratio(feed) -> None:
    # trial 23m: a layer with output variance 0 silenced the activation clause for every layer
    found = feed(PoorWeightInitialization(), _layers([0.0, 1e-6, 1.0]), include_collections=["activations"])
    assert names(found) == ["poor_weight_initialization"] and "a ratio of 1e+06" in found[0].message
    assert found[0].tensors == ("l1/output", "l2/output")
    # a constant layer has no scale to compare (documented): 0 beside 1 is no finding
    assert feed(PoorWeightInitialization(), _layers([0.0, 1.0]), include_collections=["activations"]) == []


# ------------------------------------------------------------------- 7. similar_across_runs message
def test_similar_across_runs_prints_values_that_differ(tmp_path, feed) -> None:
    # trial 23m: "loss (raw) is 1 at step 3, the reference run ... has 1 (difference 2e-05, ...)"
    ref = tmp_path / "ref"
    with tripwire.Session(out_dir=str(ref), save_interval=1) as s:
        for i in range(5):
            s.step("train", i, {"loss": (1.0, "losses")})
    recs = [("train", i, {"loss": (1.0 + (2e-5 if i == 3 else 0.0), "losses")}) for i in range(5)]
    found = feed(SimilarAcrossRuns(other=str(ref)), recs)
    assert names(found) == ["similar_across_runs"]
    assert "loss (raw) is 1.00002 at step 3" in found[0].message and f"{ref} has 1 (difference 2e-05" in found[0].message


# ------------------------------------------------------------------- 8. min above the default max
@pytest.mark.parametrize("rule,params,match", [
    (WeightUpdateRatio, {"min_ratio": 2.0}, r"weight_update_ratio\.min_ratio: got 2\.0; accepted: a number < max_ratio \(1\.0"),
    (PoorWeightInitialization, {"min_std": 3.0}, r"poor_weight_initialization\.min_std: got 3\.0; accepted: a number < max_std \(2\.0"),
    (TensorVariance, {"min_variance": 2e4}, r"tensor_variance\.min_variance: got 20000\.0; accepted: a number < max_variance"),
    # both set: the maximum is named, as before
    (WeightUpdateRatio, {"min_ratio": 0.5, "max_ratio": 0.1}, r"weight_update_ratio\.max_ratio: got 0\.1; accepted: a number > min_ratio \(0\.5\)"),
    (TensorVariance, {"min_variance": 5.0, "max_variance": 2.0}, r"tensor_variance\.max_variance: got 2\.0; accepted: a number > min_variance"),
])
def test_min_above_max_names_the_parameter_set(rule: Any, params: dict[str, float], match: str) -> None:
    # trial 23m: min_ratio: 2.0 alone was refused as "weight_update_ratio.max_ratio: got 1.0"
    with pytest.raises(tripwire.ConfigError, match=match):
        rule(**params)

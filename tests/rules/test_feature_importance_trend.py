"""``feature_importance_overweight`` does not judge a share that is still falling (trial 14b, finding 3):
the first trees of a healthy run split on its strongest feature, whose share falls from 97-99.5% at
round 10 to 84-87% in the finished model; a leak holds ~100% from the first round on."""

from __future__ import annotations

from typing import Any

import pytest

import tripwire
from tripwire.rules import FeatureImportanceOverweight

# top total_gain share per save (every 10 rounds) of trial 14b's healthy control, seed 0
# (make_classification, 2 informative features of 10, 150 rounds at eta 0.1), and of a leak
# (a feature equal to the label plus N(0, 0.1) noise) on the same data
DOMINANT = [0.99796, 0.99458, 0.98491, 0.96691, 0.94630, 0.92897, 0.91722, 0.90761, 0.89999, 0.89468,
            0.88921, 0.88393, 0.87910, 0.87579, 0.87353]
LEAK = [1.0, 1.0, 0.99807, 0.99643, 0.99556, 0.99530, 0.99524, 0.99486, 0.99433, 0.99425, 0.99425, 0.99425,
        0.99425, 0.99425, 0.99425]


def records(shares: list[float], every: int = 10, features: int = 10) -> list[Any]:
    """One save per ``every`` rounds: the top feature ``f0`` holds ``share``, the rest split evenly."""
    out = []
    for i, top in enumerate(shares):
        rest = (1 - top) / (features - 1)
        tensors = {f"feature_importance/total_gain/f{j}": (top if j == 0 else rest, "feature_importance")
                   for j in range(features)}
        out.append(("train", i * every, tensors))
    return out


def run(rule: Any, recs: list[Any], planned: int | None = 150) -> list[tripwire.Finding]:
    session = tripwire.Session(write=False, rules=[rule], save_interval=1)
    if planned is not None:
        session.set_planned_steps(planned)
    for mode, step, tensors in recs:
        session.step(mode, step, dict(tensors))
    return [f for f in session.findings if f.kind == "finding"]


def test_a_dominant_feature_whose_share_falls_is_not_a_leak() -> None:
    assert run(FeatureImportanceOverweight(), records(DOMINANT)) == []
    # judged on the share alone (the old condition), it stops the run at round 10
    found = run(FeatureImportanceOverweight(max_fall=float("inf")), records(DOMINANT))
    assert [f.step for f in found][:1] == [10]


def test_a_leak_still_fires_at_the_first_evaluation() -> None:
    found = run(FeatureImportanceOverweight(), records(LEAK))
    assert [f.step for f in found][:1] == [10]  # 7% of 150 rounds
    assert "f0" in found[0].message and "not falling" in found[0].message
    assert found[0].details["share"] == pytest.approx(1.0) and found[0].details["slope"] == pytest.approx(0.0)


def test_a_share_that_stops_falling_above_the_threshold_fires_then() -> None:
    # falls 1% of the share per save (10 rounds: -0.15 over 150 planned rounds), then holds 95%
    shares = [0.99, 0.98, 0.97, 0.96, 0.95, 0.95, 0.95, 0.95]
    found = run(FeatureImportanceOverweight(), records(shares))
    assert [f.step for f in found][:1] == [60]  # the last 3 saves (40, 50, 60) flat: slope 0


@pytest.mark.parametrize("max_fall, fires", [(0.08, True), (0.07, False)])
def test_max_fall_boundary(max_fall: float, fires: bool) -> None:
    # 0.97 -> 0.965 over 10 rounds: slope -5e-4 per round, -0.075 over the 150 planned rounds
    found = run(FeatureImportanceOverweight(max_fall=max_fall), records([0.97, 0.965]))
    assert bool(found) is fires


def test_the_fall_is_measured_over_the_planned_rounds_or_100() -> None:
    # slope -5e-4 per round: -0.025 over 50 planned rounds (fires at max_fall 0.03), -0.05 over 100
    # (the fallback when the length is unknown: quiet)
    recs = records([0.97, 0.965])
    assert run(FeatureImportanceOverweight(max_fall=0.03), recs, planned=50)
    assert not run(FeatureImportanceOverweight(max_fall=0.03), recs, planned=None)


def test_low_learning_rate_runs_are_judged_from_start_fraction_of_the_planned_rounds() -> None:
    # 1500 rounds at eta 0.01: the share has not begun to fall at round 10; judged from round 75 on
    found = run(FeatureImportanceOverweight(), records([1.0] * 12), planned=1500)
    assert [f.step for f in found][:1] == [80]
    found = run(FeatureImportanceOverweight(start_fraction=0.0), records([1.0] * 12), planned=1500)
    assert [f.step for f in found][:1] == [10]


def test_one_save_is_not_judged() -> None:
    recs = records([1.0, 1.0])[1:]  # a single save, at round 10
    assert run(FeatureImportanceOverweight(), recs) == []


@pytest.mark.parametrize("param, bad, accepted", [
    ("trend_saves", 1, r"an integer >= 2"),
    ("trend_saves", 2.5, r"an integer >= 2"),
    ("max_fall", -0.1, r"a number >= 0"),
    ("max_fall", "steep", r"a number >= 0"),
    ("start_fraction", 1.5, r"a number in \[0(\.0)?, 1(\.0)?\]"),
    ("start_fraction", -0.1, r"a number in \[0(\.0)?, 1(\.0)?\]"),
])
def test_new_parameters_are_validated(param: str, bad: Any, accepted: str) -> None:
    with pytest.raises(tripwire.ConfigError, match=rf"feature_importance_overweight\.{param}: got {bad!r}.*accepted: {accepted}"):
        FeatureImportanceOverweight(**{param: bad})
    with pytest.raises(ValueError):
        FeatureImportanceOverweight(**{param: bad})

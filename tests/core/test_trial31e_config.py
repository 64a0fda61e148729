"""Trial 31e (an smdebug user migrating): the documented "listed steps only" recipe under a top-level
``start_step`` (F1), smdebug's CamelCase rule names in ``load_config`` (F2) and smdebug's reductions
with no tripwire name (F3)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire import ConfigError
from tripwire._cli import main


# ------------------------------------------------------------------------------------------ F1
def test_the_documented_listed_steps_recipe_works_under_a_top_level_start_step() -> None:
    cfg = tripwire.load_config({"save": {"interval": 10, "start_step": 5},
                                "collections": {"weights": {"save": {"steps": [3, 7], "end_step": 0}}}})
    weights = cfg.collections["weights"]
    assert [s for s in range(40) if weights.should_save("train", s, cfg.save)] == [3, 7]
    assert [s for s in range(40) if cfg.save.should_save("train", s)] == [10, 20, 30]
    # the stored config loads again as the same schedule
    again = tripwire.load_config(cfg.to_dict())
    assert [s for s in range(40) if again.collections["weights"].should_save("eval", s, again.save)] == [3, 7]


def test_end_step_0_is_the_listed_steps_only_whatever_start_step() -> None:
    mode = tripwire.ModeSaveConfig(interval=1, start_step=5, end_step=0, steps=[2, 9])
    assert [s for s in range(20) if mode.should_save(s)] == [2, 9]
    save = tripwire.SaveConfig(start_step=5, end_step=0, steps=[3])
    assert [s for s in range(40) if save.should_save("train", s)] == [3]
    # the keywords too: start_step=5 over a file's end_step: 0
    cfg = tripwire.load_config({"save": {"steps": [3, 7], "end_step": 0}}, start_step=5)
    assert [s for s in range(40) if cfg.save.should_save("train", s)] == [3, 7]


def test_an_end_step_before_an_inherited_start_step_says_where_the_start_comes_from() -> None:
    with pytest.raises(ConfigError, match=r"^collections\.weights\.save\.end_step: got 3; accepted: null or an integer "
                       r">= start_step \(5\), or 0 \(no interval step: the listed steps only, whatever start_step\); "
                       r"the start_step 5 is inherited from save: state start_step in collections\.weights\.save .*"
                       r"\(collections\.weights\.save: \{start_step: 0, end_step: 3\}\)"):
        tripwire.load_config({"save": {"start_step": 5}, "collections": {"weights": {"save": {"end_step": 3}}}})
    with pytest.raises(ConfigError, match=r"collections\.weights\.save\.modes\.eval\.end_step: got 3; .* the start_step "
                       r"8 is inherited from save\.modes\.eval"):
        tripwire.load_config({"save": {"modes": {"eval": {"start_step": 8}}},
                              "collections": {"weights": {"save": {"modes": {"eval": {"end_step": 3}}}}}})
    # both written at one level: the plain error, nothing inherited
    with pytest.raises(ConfigError, match=r"^save\.end_step: got 3; accepted: null or an integer >= start_step \(5\), "
                       r"or 0 \(no interval step: the listed steps only, whatever start_step\)$"):
        tripwire.load_config({"save": {"start_step": 5, "end_step": 3}})


# ------------------------------------------------------------------------------------------ F2
@pytest.mark.parametrize("name, meant", [
    ("ExplodingTensor", "exploding_tensor"), ("AllZero", "all_zero"), ("DeadRelu", "dead_relu"),
    ("LossNotDecreasing", "loss_not_decreasing"), ("StalledTrainingRule", "stalled_training"),
    ("VanishingGradient", "vanishing_gradient"), ("stalled_training_rule", "stalled_training"),
])
def test_load_config_refuses_smdebug_rule_names_as_a_session_does(name: str, meant: str) -> None:
    said = rf"unknown rule '{name}'; did you mean '{meant}'\? \(smdebug's "
    with pytest.raises(ConfigError, match=rf"^rules\[0\]: {said}"):
        tripwire.load_config({"rules": [{"name": name, "threshold_layer": 0.5}]})
    with pytest.raises(ConfigError, match=rf"^rules\[0\]: {said}"):
        tripwire.Session(rules=[name], out_dir=None)


def test_an_smdebug_rule_without_an_equivalent_says_so() -> None:
    with pytest.raises(ConfigError, match=r"unknown rule 'NLPSequenceRatio' \(smdebug's NLPSequenceRatio: tripwire has "
                       r"no rule for the share of given tokens"):
        tripwire.load_config({"rules": ["NLPSequenceRatio"]})
    with pytest.raises(ConfigError, match=r"unknown rule 'LowGPUUtilization' \(smdebug's LowGPUUtilization: tripwire "
                       r"has no profiler rules"):
        tripwire.Session(rules=["LowGPUUtilization"], out_dir=None)


def test_a_rule_registered_under_a_camelcase_name_is_still_taken() -> None:
    from tripwire.rules import _registry

    class Mine(tripwire.Rule):
        name = "DeadRelu"

        def check(self, history: object, step: int, mode: str) -> None:
            return None

    tripwire.register_rule(Mine)
    try:
        assert [s.name for s in tripwire.load_config({"rules": ["DeadRelu"]}).rules] == ["DeadRelu"]
    finally:
        _registry._REGISTRY.pop("DeadRelu", None)


def test_validate_says_the_smdebug_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "smd.yaml"
    bad.write_text("rules:\n  - {name: DeadRelu, threshold_layer: 50}\n")
    assert main(["validate", str(bad)]) == 2
    assert "rules[0]: unknown rule 'DeadRelu'; did you mean 'dead_relu'? (smdebug's DeadRelu" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ F3
@pytest.mark.parametrize("name, said", [
    ("isnan", r"'isnan'; did you mean 'nonfinite_count'\? \(smdebug's isnan: tripwire counts the NaN and infinite "
              r"elements"),
    ("isinf", r"'isinf'; did you mean 'nonfinite_count'\? \(smdebug's isinf"),
    ("prod", r"'prod' \(smdebug's prod: tripwire has no product reduction"),
    ("abs_prod", r"'abs_prod' \(smdebug's abs_prod: tripwire has no product reduction"),
    ("median", r"'median' \(there is no median reduction: min, max, mean and histogram"),
])
def test_smdebug_reductions_without_a_tripwire_name_point_the_right_way(name: str, said: str) -> None:
    with pytest.raises(ConfigError, match=rf"^reductions\[0\]: unknown reduction {said}"):
        tripwire.ReductionConfig(reductions=[name])
    with pytest.raises(ConfigError, match=rf"^collections\.gradients\.reductions\[1\]: unknown reduction {said}"):
        tripwire.load_config({"collections": {"gradients": {"reductions": ["l2", name]}}})


def test_abs_reductions_of_prod_is_not_told_a_reduction_that_does_not_exist() -> None:
    with pytest.raises(ConfigError, match=r"did you mean reductions=\['abs_max'\]\? .*tripwire has no reduction 'abs_prod'"):
        tripwire.ReductionConfig(reductions=["mean"], abs_reductions=["prod", "max"])


def test_the_recipe_in_a_session_saves_the_listed_weights_steps(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with tripwire.Session({"save": {"interval": 4, "start_step": 2},
                           "collections": {"weights": {"save": {"steps": [3, 7], "end_step": 0}}, "losses": None},
                           "rules": []}, out_dir=str(out)) as s:
        for step in range(12):
            plan = s.begin_step("train", step)
            plan.add("loss", 1.0, "losses")
            if plan.wants("weights"):
                plan.add("fc.weight", np.ones(3), "weights")
            s.end_step()
    assert tripwire.open_run(out).tensor("fc.weight").steps() == [3, 7]

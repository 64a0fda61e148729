"""Trial 32e: similar_across_runs said nothing where it compared nothing (F3), saturated_activation's
infinite threshold was refused in an error about a reduction string (F7), and a NaN feature importance
was dropped in silence, the "too few features" WARNING then miscounting them (F8)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml

import tripwire
from tripwire import ConfigError, _watch
from tripwire._cli import main

NAN = float("nan")


def _train(out: Path, losses: list[float], rules: list, name: str = "loss") -> tripwire.Session:
    s = tripwire.Session(out_dir=str(out), rules=rules, save={"interval": 1})
    for i, v in enumerate(losses):
        s.step("train", i, {name: (v, "losses")})
    s.close()
    return s


def _warnings(caplog: pytest.LogCaptureFixture, rule: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and f"rule {rule!r}" in r.getMessage()]


# ------------------------------------------------------------------------------------ F3
@pytest.fixture
def ref(tmp_path: Path) -> Path:
    out = tmp_path / "ref"
    _train(out, [1.0] * 30, [])
    return out


def test_a_misspelled_tensors_is_said_at_close_with_a_did_you_mean(tmp_path: Path, ref: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    rule = {"name": "similar_across_runs", "other": str(ref), "tensors": "lss"}
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s = _train(tmp_path / "b", [2.0] * 10, [rule])  # differs from the reference at every step
    assert s.findings == []
    said = _warnings(caplog, "similar_across_runs")
    assert len(said) == 1
    assert "tensors='lss' matches no tensor of this run; did you mean 'loss'?" in said[0]
    assert "compared nothing" in said[0]


def test_the_watch_exits_3_where_it_compared_nothing(tmp_path: Path, ref: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    _train(tmp_path / "b", [2.0] * 10, [])
    cfg = tmp_path / "sim.yaml"
    cfg.write_text(yaml.safe_dump({"rules": [{"name": "similar_across_runs", "other": str(ref), "tensors": "lss"}]}))
    assert main(["watch", str(tmp_path / "b"), "--config", str(cfg), "--once", "--no-record"]) == 3
    err = capsys.readouterr().err
    assert "tensors='lss' matches no tensor of this run; did you mean 'loss'?" in err


def test_a_tensor_the_reference_lacks_is_said(tmp_path: Path, ref: Path, caplog: pytest.LogCaptureFixture) -> None:
    rule = {"name": "similar_across_runs", "other": str(ref), "tensors": "val_loss"}
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s = _train(tmp_path / "b", [2.0] * 10, [rule], name="val_loss")
    assert s.findings == []
    said = " | ".join(_warnings(caplog, "similar_across_runs"))
    assert f"matches val_loss of this run, which the reference run {ref} does not hold (it holds: loss)" in said
    watcher = _watch.Watcher(str(tmp_path / "b"), {"rules": [rule]})
    watcher.poll()
    assert watcher.unjudged() == ["similar_across_runs"]


def test_steps_the_reference_lacks_are_said_once(tmp_path: Path, ref: Path, caplog: pytest.LogCaptureFixture) -> None:
    rule = {"name": "similar_across_runs", "other": str(ref), "actions": ["record"]}
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s = _train(tmp_path / "b", [1.0] * 40, [rule])
    assert s.findings == []
    said = _warnings(caplog, "similar_across_runs")
    assert len(said) == 1, said
    assert "holds no value of loss (raw, train, worker 0) at step 30 of this run" in said[0]
    assert "(it holds loss (raw, train) at steps 0 to 29)" in said[0]
    assert "is not compared" in said[0]


def test_runs_that_match_say_nothing_and_differences_are_found_as_before(tmp_path: Path, ref: Path,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    rule = {"name": "similar_across_runs", "other": str(ref), "actions": ["record"]}
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        same = _train(tmp_path / "a", [1.0] * 30, [rule])
        other = _train(tmp_path / "b", [1.0] * 12 + [2.0] * 18, [rule])
    assert same.findings == []
    assert [(f.step, f.details["value"]) for f in other.findings] == [(12, 2.0)]
    assert _warnings(caplog, "similar_across_runs") == []


# ------------------------------------------------------------------------------------ F7
@pytest.mark.parametrize("param", ["tanh_threshold", "sigmoid_threshold"])
def test_an_infinite_threshold_names_the_parameter(param: str) -> None:
    with pytest.raises(ConfigError, match=rf"^rules\[0\]: saturated_activation\.{param}: got inf; accepted: a finite "
                                          r"number > 0\.0"):
        tripwire.Session(rules=[{"name": "saturated_activation", param: float("inf")}], out_dir=None)


def test_validate_says_it_as_for_any_parameter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("rules:\n  - {name: saturated_activation, tanh_threshold: .inf}\n")
    assert main(["validate", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "rules[0]: saturated_activation.tanh_threshold: got inf; accepted: a finite number > 0.0" in err
    assert "requirements()" not in err and "fraction_abs_gt" not in err


# ------------------------------------------------------------------------------------ F8
def _boost(out: Path, rounds: int, importances: list[float], rule: dict) -> tripwire.Session:
    s = tripwire.Session(out_dir=str(out), rules=[rule], save={"interval": 1})
    for i in range(rounds):
        values = {f"feature_importance/total_gain/f{j}": (v, "feature_importance") for j, v in enumerate(importances)}
        s.step("train", i, {"loss": (1.0, "losses"), **values})
    s.close()
    return s


def test_a_nan_importance_counts_its_feature_and_is_said(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rule = {"name": "feature_importance_overweight", "actions": ["record"]}
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s = _boost(tmp_path / "r", 12, [NAN, 1.0, 1.0], rule)
    assert s.findings == []
    said = _warnings(caplog, "feature_importance_overweight")
    assert len(said) == 1, said  # (no "it has 2 features": the record lists 3)
    assert "at round 10 the total_gain feature importance holds feature_importance/total_gain/f0 = nan" in said[0]
    assert "left out of the importance shares" in said[0]


def test_the_other_features_are_still_judged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rule = {"name": "feature_importance_overweight", "actions": ["record"]}
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s = _boost(tmp_path / "r", 12, [NAN, 99.0, 1.0, 0.0], rule)
    assert [f.step for f in s.findings] == [10]
    assert "the top 1 of 4 features (2 used, 1 not a number >= 0, left out) hold 99%" in s.findings[0].message


def test_finite_importances_are_judged_as_before(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rule = {"name": "feature_importance_overweight", "actions": ["record"]}
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s = _boost(tmp_path / "a", 12, [91.0, 4.5, 4.5], rule)
        few = _boost(tmp_path / "b", 12, [1.0, 0.0], rule)
    assert [f.step for f in s.findings] == [10]
    assert "the top 1 of 3 features (3 used) hold 91%" in s.findings[0].message
    assert few.findings == []
    said = _warnings(caplog, "feature_importance_overweight")
    assert len(said) == 1 and "it has 2 features" in said[0]

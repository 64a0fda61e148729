"""Trial 26h (XGBoost): an unknown rule name given to the callback's constructor was said twice, a
WARNING from load_config ("did you mean ...?") and then the ConfigError with the same "did you
mean"; and a training whose objective has no classes records the class rules it switches off, with
why, in the run (the worker meta's ``switched_off``), where ``tripwire watch`` reads it."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")

import tripwire  # noqa: E402
from tripwire import ConfigError  # noqa: E402
from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402


def test_an_unknown_rule_in_the_constructor_is_said_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        with pytest.raises(ConfigError, match=r"exploding_tensr.*did you mean 'exploding_tensor'"):
            TripwireCallback(out_dir=tmp_path / "run", rules=["exploding_tensr"])
    said = [r.getMessage() for r in caplog.records if "exploding_tensr" in r.getMessage()]
    assert said == [], said  # (the ConfigError says it; no WARNING before it)


REGRESSION = {"objective": "reg:squarederror", "eta": 0.3, "max_depth": 3, "seed": 0, "nthread": 1}
WHY = ("objective 'reg:squarederror' is a regression: the validation labels are targets and the predictions values, "
       "not classes")


def _fit(out: Path, params: dict, y: np.ndarray, **kw: object) -> None:
    X = np.random.default_rng(0).normal(size=(len(y), 5))
    dtrain, dvalid = xgb.DMatrix(X[:200], label=y[:200]), xgb.DMatrix(X[200:], label=y[200:])
    xgb.train(params, dtrain, 8, evals=[(dtrain, "train"), (dvalid, "validation")],
              callbacks=[TripwireCallback(out_dir=out, **kw)], verbose_eval=False)


def test_the_class_rules_a_regression_switches_off_are_recorded_and_watch_does_not_judge_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tripwire import _watch
    from tripwire._watch import Watcher

    # labels and predictions captured as the config asks (not only for the class rules): watch inferred
    # nothing then, and judged regression targets as classes; now it reads what the training recorded
    out = tmp_path / "reg"
    y = 0.3 * np.random.default_rng(1).normal(size=300)
    _fit(out, REGRESSION, y, rules=["class_imbalance"], collections={"labels": None, "predictions": None})
    run = tripwire.open_run(out)
    assert run.switched_off == {"class_imbalance": WHY, "confusion": WHY}  # (every class rule: watch may name either)
    meta = json.loads((out / "workers" / "worker-00000.json").read_text())
    assert meta["switched_off"] == run.switched_off
    assert {"labels", "predictions"} <= set(run.collections())
    w = Watcher(out, {"rules": ["class_imbalance", "confusion"]}, echo=lambda f: None)
    assert w.watch(once=True) == []
    assert w.not_applicable() == {"class_imbalance": f"the training switched it off: {WHY}",
                                  "confusion": f"the training switched it off: {WHY}"}
    assert w.unfed() == {} and w.unjudged() == []
    cfg = tmp_path / "rules.yaml"
    cfg.write_text("rules: [class_imbalance]\n")
    parser = __import__("argparse").ArgumentParser(prog="tripwire")
    _watch.register(parser.add_subparsers())
    capsys.readouterr()
    args = parser.parse_args(["watch", str(out), "--config", str(cfg), "--once"])
    assert args.func(args) == 0
    assert (f"rule 'class_imbalance' does not apply to this run, not judged: the training switched it off: {WHY}"
            in capsys.readouterr().err)


def test_a_classifier_records_nothing_switched_off(tmp_path: Path) -> None:
    y = (np.random.default_rng(1).random(300) < 0.5).astype(float)
    _fit(tmp_path / "clf", {**REGRESSION, "objective": "binary:logistic"}, y, rules=["class_imbalance"])
    assert tripwire.open_run(tmp_path / "clf").switched_off == {}

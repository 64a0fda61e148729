"""Trial 26d (finding 4): ``tripwire watch`` on an XGBoost regression run told the user to capture
labels and predictions for ``class_imbalance`` ("capture it in the training's config"), which the
training's XGBoost integration leaves out for an objective without classes (its WARNING says so),
and exited 3 ("not everything was judged"). Since trial 26h the training records the rules it switched
off, with why (the worker meta's ``switched_off``), and watch reads that; a run written before (no
``switched_off`` key) does not store the objective: watch reads it off what the run does store (the
training's config and records, its evaluation metrics)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")

from tripwire import _watch  # noqa: E402
from tripwire._watch import Watcher  # noqa: E402
from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402

REGRESSION = {"objective": "reg:squarederror", "eta": 0.3, "max_depth": 3, "seed": 0, "nthread": 1}
BINARY = {"objective": "binary:logistic", "eta": 0.3, "max_depth": 3, "seed": 0, "nthread": 1}
CAPTURE_ADVICE = "'class_imbalance' had nothing to read"
RECORDED = ("the training switched it off: objective 'reg:squarederror' is a regression: the validation labels are "
            "targets and the predictions values, not classes")


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tripwire")
    _watch.register(parser.add_subparsers())
    args = parser.parse_args(["watch", *argv])
    return args.func(args)


def _fit(out: Path, params: dict[str, Any], y: np.ndarray, rules: list[Any], rounds: int = 12,
         collections: dict[str, Any] | None = None) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(len(y), 5))
    dtrain, dvalid = xgb.DMatrix(X[:200], label=y[:200]), xgb.DMatrix(X[200:], label=y[200:])
    kwargs: dict[str, Any] = {"collections": collections} if collections is not None else {}
    cb = TripwireCallback(out_dir=out, rules=rules, **kwargs)
    xgb.train(params, dtrain, rounds, evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb],
              verbose_eval=False)


def _written_before_26h(out: Path) -> None:
    """The run as a tripwire before trial 26h wrote it: no ``switched_off`` in its worker meta files."""
    for meta in (out / "workers").glob("worker-*[0-9].json"):
        held = json.loads(meta.read_text())
        held.pop("switched_off", None)
        meta.write_text(json.dumps(held))


def _targets(scale: float) -> np.ndarray:
    rng = np.random.default_rng(1)
    return scale * rng.normal(size=300)


def test_regression_whose_training_listed_class_imbalance(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # small targets (rmse below 1): the metrics alone would not tell; the training's config lists
    # class_imbalance, it evaluated a validation set and captured no labels: its objective has no classes
    out = tmp_path / "reg"
    _fit(out, REGRESSION, _targets(0.3), ["class_imbalance"])
    capsys.readouterr()
    cfg = tmp_path / "rules.yaml"
    cfg.write_text("rules: [class_imbalance]\n")
    for written in ("recorded", "before 26h"):
        if written == "before 26h":
            _written_before_26h(out)
        w = Watcher(out, {"rules": ["class_imbalance", "confusion"]}, echo=lambda f: None)
        why = w.not_applicable()
        assert set(why) == {"class_imbalance", "confusion"}
        said = RECORDED if written == "recorded" else "the training's config lists 'class_imbalance'"
        assert why["class_imbalance"].startswith(said), why
        assert w.unfed() == {} and w.unjudged() == []
        assert _cli([str(out), "--config", str(cfg), "--once"]) == 0
        err = capsys.readouterr().err
        assert f"rule 'class_imbalance' does not apply to this run, not judged: {said}" in err
        assert CAPTURE_ADVICE not in err and "not everything was judged" not in err


def test_regression_told_by_its_metrics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the training had no class rule (trial 26d's t05 run): train-rmse and validation-rmse above 1,
    # which no classifier's rmse reaches
    # (recorded since trial 26h: the training switches every class rule off, listed in its config or not)
    out = tmp_path / "reg"
    _fit(out, REGRESSION, _targets(50.0), [])
    capsys.readouterr()
    cfg = tmp_path / "rules.yaml"
    cfg.write_text("rules: [class_imbalance]\n")
    for said in (RECORDED, "its evaluation metrics (train-rmse, validation-rmse) exceed 1"):
        if said != RECORDED:
            _written_before_26h(out)
        assert _cli([str(out), "--config", str(cfg), "--once"]) == 0
        err = capsys.readouterr().err
        assert f"rule 'class_imbalance' does not apply to this run, not judged: {said}" in err
        assert CAPTURE_ADVICE not in err


def test_no_proof_keeps_the_advice_and_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a classifier without labels captured: capturing them is the fix
    out = tmp_path / "clf"
    y = (np.random.default_rng(1).random(300) < 0.5).astype(float)
    _fit(out, BINARY, y, [])
    capsys.readouterr()
    cfg = tmp_path / "rules.yaml"
    cfg.write_text("rules: [class_imbalance]\n")
    assert Watcher(out, str(cfg)).not_applicable() == {}
    assert _cli([str(out), "--config", str(cfg), "--once"]) == 3
    err = capsys.readouterr().err
    assert f"{CAPTURE_ADVICE}: no tensor of the 'labels' or 'predictions' collections was captured" in err
    assert "capture it in the training's config (if the model is a classifier: for an objective without classes" in err
    # a regression whose rmse stays below 1 (reg:logistic's would too) and no class rule in training: the
    # training records the class rules as off (since trial 26h); a run written before could not tell
    small = tmp_path / "small"
    _fit(small, REGRESSION, _targets(0.3), [])
    assert Watcher(small, str(cfg)).not_applicable() == {"class_imbalance": RECORDED}
    capsys.readouterr()
    assert _cli([str(small), "--config", str(cfg), "--once"]) == 0
    _written_before_26h(small)
    assert Watcher(small, str(cfg)).not_applicable() == {}
    capsys.readouterr()
    assert _cli([str(small), "--config", str(cfg), "--once"]) == 3


def test_a_stored_num_class_says_the_model_has_classes(tmp_path: Path) -> None:
    # (XGBoost refuses rmse on a multi-class model; a run written so anyway is not taken for a regression)
    import tripwire

    provides = ("feature_importance", "hyperparameters", "labels", "metrics", "predictions", "trees")
    runs = {}
    for name, num_class in (("multi", 4.0), ("reg", 0.0)):
        out = runs[name] = tmp_path / name
        with tripwire.Session(out_dir=str(out), save_interval=1, rules=[], framework="xgboost", provides=provides,
                              collections={"metrics": None, "hyperparameters": None}) as s:
            for i in range(4):
                s.step("train", i, {"train-rmse": (3.0 - 0.1 * i, "metrics"),
                                    "hyperparameters/num_class": (num_class, "hyperparameters")})
                s.step("eval", i, {"validation-rmse": (3.2 - 0.1 * i, "metrics")})
        _written_before_26h(out)  # (the inference is kept for runs that record nothing switched off)
    assert Watcher(runs["multi"], {"rules": ["class_imbalance"]}).not_applicable() == {}
    assert "exceed 1" in Watcher(runs["reg"], {"rules": ["class_imbalance"]}).not_applicable()["class_imbalance"]


def test_metric_names() -> None:
    from tripwire._watch import _xgboost_metric

    assert _xgboost_metric("validation-rmse") == "rmse"
    assert _xgboost_metric("validation-ndcg@5") == "ndcg"
    assert _xgboost_metric("my-valid-poisson-nloglik") == "poisson-nloglik"
    assert _xgboost_metric("validation-merror") == "merror" and _xgboost_metric("validation-error@0.7") == "error"
    assert _xgboost_metric("validation-mape") == "mape" and _xgboost_metric("validation-map@3") == "map"
    assert _xgboost_metric("validation-my_f1") is None

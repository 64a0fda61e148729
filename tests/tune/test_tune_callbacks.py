"""tripwire's framework callbacks driven by a real :class:`Tuner` with :class:`Hyperband`.

Each test runs a small tuning job on the local process pool (2 spawned workers). The training
functions (``callback_trainables``) are ordinary XGBoost / Lightning / Keras code whose only
tuning-specific part is ``TripwireCallback(trial=trial, trial_metric=...)``. The tests check, from
the journal and from the framework's own record of each run:

- the scheduler stopped some trials early, exactly at a rung of their bracket (resource < max),
  and let others run to ``max_resource``;
- every value the tuner received is the framework's own metric for that round/epoch, one report per
  round/epoch;
- a stopped trial's training really ended early: the booster has as many rounds, the Lightning or
  Keras fit as many epochs, as the journaled resource.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import callback_trainables as ct
import pytest

from tripwire.tune import Continuous, Hyperband, HyperbandPlan, Integer, RandomSearch, Tuner, TuningResult
from tripwire.tune._journal import Journal

MAX_R = 9
STRATEGY = Hyperband(min_resource=1, max_resource=MAX_R, reduction_factor=3)
PLAN = HyperbandPlan(1, MAX_R, 3)


def _out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setenv("TRIPWIRE_TUNE_CB_OUT", str(out))   # spawned workers inherit it
    return out


def _check_schedule(result: TuningResult, journal: Path) -> dict[int, list[tuple[int, float, bool, str]]]:
    """Assertions every framework shares; returns each trial's reports ``(step, value, stop, reason)``."""
    c = result.counts()
    assert c["failed"] == 0, [t.error for t in result.trials if t.error]
    stopped = [t for t in result.trials if t.status == "stopped"]
    completed = [t for t in result.trials if t.status == "completed"]
    assert stopped and completed, c
    for t in stopped:
        assert t.resource < MAX_R and t.resource in PLAN.rungs(t.bracket), (t.number, t.bracket, t.resource)
        assert f"rung at resource {t.resource}:" in t.reason
    for t in completed:
        assert t.resource == MAX_R and t.reason == f"reached max_resource={MAX_R}"
    assert result.resource_used < result.resource_without_early_stopping
    with Journal(journal, readonly=True) as j:
        reports: dict[int, list[tuple[int, float, bool, str]]] = {}
        for number, step, value, _time, stop, reason in j.reports():
            reports.setdefault(number, []).append((step, value, bool(stop), reason))
    for t in result.trials:
        rows = sorted(reports[t.number])
        assert [r[0] for r in rows] == list(range(1, t.resource + 1))    # one report per round/epoch
        assert [r[2] for r in rows] == [False] * (t.resource - 1) + [True]  # stopped at the last one only
        assert t.value == rows[-1][1]
    return reports


def _check_runs(out: Path, prefix: str, result: TuningResult, metric: str, unit: str) -> None:
    """Each trial's tripwire run says which trial it trained (number, attempt, params, metric) and,
    for one the scheduler stopped, why (its end marker's stop_reason; ``tripwire inspect`` shows both)."""
    import tripwire

    for t in result.trials:
        run = tripwire.open_run(out / f"{prefix}-run-{t.number}")
        assert run.trial is not None and run.trial["number"] == t.number and run.trial["metric"] == metric
        assert run.trial["params"] == pytest.approx(t.params) and run.trial["attempt"] == 1
        reason = run.end_markers[0].get("stop_reason")
        if t.status == "stopped":
            said = (f"{t.resource} round{'s' if t.resource != 1 else ''}" if unit == "round"
                    else f"{unit} {t.resource}")
            assert run.status == "stopped" and reason.startswith(f"the tuner stopped the trial after {said} ({metric}=")
        else:
            assert reason is None


def test_xgboost_callback_under_hyperband(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("xgboost")
    out = _out(tmp_path, monkeypatch)
    journal = tmp_path / "xgb.db"
    result = Tuner(ct.train_xgboost, {"eta": Continuous(0.01, 1.0, scale="log"), "max_depth": Integer(1, 6)},
                   objective="validation-auc", mode="max", strategy=STRATEGY, max_jobs=14, max_parallel_jobs=2,
                   seed=3, journal=str(journal), setup=ct.setup_xgboost).fit()
    reports = _check_schedule(result, journal)
    for t in result.trials:
        run = json.loads((out / f"xgboost-{t.number}.json").read_text())
        assert run["rounds"] == t.resource == len(run["auc"])             # the booster has that many rounds
        assert [r[1] for r in sorted(reports[t.number])] == run["auc"]     # XGBoost's own evals_result
        if t.status == "stopped":
            rounds = "1 round" if t.resource == 1 else f"{t.resource} rounds"
            assert run["stop_reason"].startswith(f"the tuner stopped the trial after {rounds}")
            assert "rung" in run["stop_reason"]
        else:  # boosting reached num_boost_round; the last report's True changes nothing
            assert run["rounds"] == MAX_R
    _check_runs(out, "xgb", result, "validation-auc", "round")


def _lightning_val_loss(path: str) -> list[float]:
    with open(path, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r.get("val_loss")]
    return [float(r["val_loss"]) for r in rows]


def test_lightning_callback_under_hyperband(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("lightning")
    out = _out(tmp_path, monkeypatch)
    journal = tmp_path / "pl.db"
    result = Tuner(ct.train_lightning, {"lr": Continuous(1e-3, 1.0, scale="log"), "hidden": Integer(2, 16)},
                   objective="val_loss", mode="min", strategy=STRATEGY, max_jobs=10, max_parallel_jobs=2,
                   seed=1, journal=str(journal), setup=ct.setup_torch).fit()
    reports = _check_schedule(result, journal)
    for t in result.trials:
        run = json.loads((out / f"lightning-{t.number}.json").read_text())
        assert run["epochs"] == t.resource                                 # the fit ran that many epochs
        if t.status == "stopped":
            assert run["trial_stopped"] is True                            # the callback set should_stop
        logged = _lightning_val_loss(run["metrics_csv"])                   # Lightning's own CSVLogger
        assert [r[1] for r in sorted(reports[t.number])] == pytest.approx(logged, rel=1e-6)
    _check_runs(out, "pl", result, "val_loss", "epoch")


def test_keras_callback_under_hyperband(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("keras")
    out = _out(tmp_path, monkeypatch)
    journal = tmp_path / "keras.db"
    result = Tuner(ct.train_keras, {"lr": Continuous(1e-3, 1.0, scale="log"), "hidden": Integer(2, 16)},
                   objective="val_loss", mode="min", strategy=STRATEGY, max_jobs=10, max_parallel_jobs=2,
                   seed=1, journal=str(journal), setup=ct.setup_torch).fit()
    reports = _check_schedule(result, journal)
    for t in result.trials:
        run: dict[str, Any] = json.loads((out / f"keras-{t.number}.json").read_text())
        assert run["epochs"] == t.resource                                 # History has that many epochs
        assert [r[1] for r in sorted(reports[t.number])] == run["val_loss"]  # Keras's own History
    _check_runs(out, "keras", result, "val_loss", "epoch")


@pytest.mark.parametrize("framework", ["xgboost", "lightning", "keras"])
def test_a_rule_that_stops_training_marks_the_trial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    framework: str) -> None:
    """A tripwire rule (not the scheduler) stops trial 0: the trial is ``stopped`` with a reason that
    names the rule, journaled with its rule, and left out of ``best`` even with the better value."""
    pytest.importorskip({"lightning": "lightning"}.get(framework, framework))
    _out(tmp_path, monkeypatch)
    # the rule stops trial 0 at round 3 of 4 (XGBoost), or in epoch 2 of 4 (3 batches an epoch)
    monkeypatch.setenv("TRIPWIRE_TUNE_CB_PLANT", "2" if framework == "xgboost" else "4")
    journal = tmp_path / "rule.db"
    if framework == "xgboost":
        train, setup, space = ct.train_xgboost, ct.setup_xgboost, {"eta": Continuous(0.3, 0.31), "max_depth": Integer(2, 3)}
        objective, mode = "validation-auc", "max"
    else:
        train = ct.train_lightning if framework == "lightning" else ct.train_keras
        setup, space = ct.setup_torch, {"lr": Continuous(0.05, 0.06), "hidden": Integer(4, 5)}
        objective, mode = "val_loss", "min"
    result = Tuner(train, space, objective=objective, mode=mode, strategy=RandomSearch(max_resource=4), max_jobs=2,
                   max_parallel_jobs=2, seed=0, journal=str(journal), setup=setup).fit()
    ruled, other = result.trials
    assert (ruled.status, ruled.rule) == ("stopped", "planted"), (ruled.status, ruled.reason, ruled.error)
    assert ruled.reason.startswith("rule planted: loss went up and down at step ") and ruled.value is not None
    assert ruled.resource < 4                                   # the rule cut the training short
    assert other.status == "completed" and other.rule is None
    assert result.best == other                                 # the broken run is never the best
    df = result.dataframe()
    assert df.loc[df["number"] == 0, "rule"].item() == "planted" and df["objective"].notna().all()
    again = TuningResult.from_journal(journal)                   # journaled: a resume keeps it
    assert again.trials[0].rule == "planted" and again.best.number == 1

"""Trial 36j: (1) an XGBoost trial whose EarlyStopping (listed first) ended boosting at a rung level
was journaled as stopped by the tuner (its last round, told to the trial after boosting ended, got
the rung's stop) while its run said EarlyStopping stopped it: both now say both. (2) A Lightning
trial the tuner stopped at epoch 1 under ``Trainer(min_epochs=3)`` trained on to epoch 3, and its
run named epoch 3 and its value as the tuner's stop: it names the epoch the tuner stopped it at."""

from __future__ import annotations

from pathlib import Path

import pytest
import trial36j_trainables as tt

import tripwire
from tripwire.tune import Continuous, Hyperband, Tuner


def test_an_early_stopping_at_a_rung_is_said_by_the_journal_and_the_run(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("xgboost")
    monkeypatch.setenv("TRIPWIRE_TRIAL36J_OUT", str(tmp_path / "runs"))
    result = Tuner(tt.train_xgb_early_stopping, {"eta": Continuous(0.05, 1, scale="log")}, objective="auc", mode="max",
                   strategy=Hyperband(min_resource=2, max_resource=18, reduction_factor=3), max_jobs=6,
                   max_parallel_jobs=1, seed=0, journal=str(tmp_path / "es.db"), setup=tt.xgb_data).fit()
    stopped = [t for t in result.trials if t.status == "stopped"]
    assert stopped and all(t.resource == 2 for t in result.trials)
    for t in result.trials:
        reason = tripwire.open_run(tmp_path / "runs" / f"trial-{t.number}").stop_reasons[0]
        assert reason.startswith("boosting was stopped outside tripwire at round 1 (2 rounds of the 18 asked for): "
                                 "EarlyStopping(")
        if t.status == "stopped":
            assert t.reason.startswith("bracket 0, rung at resource 2: ")
            assert "; the training had ended on its own: EarlyStopping(" in t.reason
            assert "; at that round the tuner stopped the trial (bracket 0, rung at resource 2: " in reason
        else:
            assert t.reason.startswith("completed: EarlyStopping(") and "tuner" not in reason


def test_a_trial_held_by_min_epochs_names_the_epoch_the_tuner_stopped_it_at(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("lightning")
    monkeypatch.setenv("TRIPWIRE_TRIAL36J_OUT", str(tmp_path / "runs"))
    result = Tuner(tt.train_lightning_min_epochs, {"lr": Continuous(0.001, 0.1, scale="log")}, objective="val_loss",
                   mode="min", strategy=Hyperband(min_resource=1, max_resource=9, reduction_factor=3), max_jobs=4,
                   max_parallel_jobs=1, seed=0, journal=str(tmp_path / "pl.db")).fit()
    held = [t for t in result.trials if t.status == "stopped" and t.resource < 3]
    assert held, [(t.number, t.status, t.resource) for t in result.trials]
    for t in held:
        run = tripwire.open_run(tmp_path / "runs" / f"trial-{t.number}")
        assert run.stop_reasons[0].startswith(f"the tuner stopped the trial after epoch {t.resource} (val_loss=")
        assert f"{t.value:.6g}" in run.stop_reasons[0]


def test_resuming_a_scripts_job_elsewhere_says_how_for_a_script_without_the_guard(tmp_path: Path) -> None:
    # (3) an unguarded script's job resumed from another script: importing it for train would run its job again
    import tune_trainables

    from tripwire.tune import RandomSearch
    from tripwire.tune._journal import Journal

    path = tmp_path / "m.db"
    Tuner(tune_trainables.train_curve, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(3), max_jobs=2, seed=0,
          journal=str(path)).fit()
    with Journal(path) as j:  # as a script's job journals it
        j.set_meta("job", {**j.job, "train": "__main__:train", "train_file": str(tmp_path / "job.py")})
    with pytest.raises(ValueError, match=r"Tuner\.resume\(journal\) in that script finds it, in place of its "
                                         r"Tuner\(\.\.\.\) call; importing a script that tunes when imported"):
        Tuner.resume(path, max_jobs=4).fit()

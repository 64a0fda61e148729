"""Trial 37e: the tuner's running best, which ``target_value``, ``max_no_improvement``, the live
view and the progress snapshots read, counted trials that ended below ``min_resource``, which
``result.best`` ranks after every trial that reached it: ``target_value=0.5`` ended a job on a
trial's 0.1 at step 1 (min_resource 3) while the summary's best was 1.36, and a resume ended at once
on such a trial. The running best now ranks them as ``result.best`` does."""

from __future__ import annotations

from pathlib import Path

import tune_trainables as tt

from tripwire.tune import Continuous, Hyperband, Tuner


def test_a_trial_below_min_resource_does_not_reach_the_target(tmp_path: Path) -> None:
    snapshots: list[dict] = []
    result = Tuner(tt.train_some_end_early, {"x": Continuous(0, 1)}, objective="loss", mode="min",
                   strategy=Hyperband(min_resource=3, max_resource=9, reduction_factor=3), max_jobs=12,
                   target_value=0.5, max_parallel_jobs=2, seed=4, journal=tmp_path / "j.db").fit(progress=snapshots.append)
    short = [t for t in result.trials if t.resource < 3 and t.value == 0.1]
    assert short, "the seed gives no trial that ends early: the test checks nothing"
    assert result.halt is None  # (no trial that reached min_resource got to 0.5)
    assert len(result.trials) == 12
    assert result.best is not None and result.best.resource >= 3
    assert snapshots[-1]["best"] == result.best.value

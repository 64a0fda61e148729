"""Trial 42e F2/F3.

F2: an XGBoost training that raised before its first round reached the callback (a custom metric's
bug, a gblinear booster on categorical data), the error caught by the caller's loop, was ended
``complete`` at exit without a word, where the same error at round 5 ended it ``failed`` with the
exit WARNING. The callback now tells its session a training runs from ``before_training`` to
``after_training``.

F3: with the ``raise`` action, ``cb.stop_reason`` was None, though the run's end marker and ``tripwire
inspect`` named the finding; ``stop_training`` gave it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

xgb = pytest.importorskip("xgboost")
pytest.importorskip("sklearn")

import tripwire  # noqa: E402

SCRIPT = textwrap.dedent("""\
    import xgboost as xgb
    from sklearn.datasets import make_classification
    from tripwire.integrations.xgboost import TripwireCallback
    x, y = make_classification(n_samples=300, n_features=5, random_state=0)
    dtr, dva = xgb.DMatrix(x[:200], y[:200]), xgb.DMatrix(x[200:], y[200:])
    def my_metric(pred, d):
        raise ValueError("bug in my metric")
    cb = TripwireCallback(out_dir={out!r}, rules=["default"])
    try:
        xgb.train({{"objective": "binary:logistic", "nthread": 1}}, dtr, 10, evals=[(dtr, "train"), (dva, "validation")],
                  custom_metric=my_metric, callbacks=[cb], verbose_eval=False)
    except ValueError as e:
        print("caught:", e)
    """)


def test_a_training_that_raised_before_its_first_round_ends_failed_at_exit(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(out=str(out))], capture_output=True, text=True,
                          timeout=300)
    assert "caught: bug in my metric" in done.stdout, done.stderr
    assert "is exiting with the run" in done.stderr and "it is marked failed" in done.stderr, done.stderr
    run = tripwire.open_run(out)
    assert run.status == "failed"


def test_a_healthy_training_then_exit_stays_complete(tmp_path: Path) -> None:
    from sklearn.datasets import make_classification

    from tripwire.integrations.xgboost import TripwireCallback

    x, y = make_classification(n_samples=300, n_features=5, random_state=0)
    cb = TripwireCallback(out_dir=tmp_path / "run")
    xgb.train({"objective": "binary:logistic", "nthread": 1}, xgb.DMatrix(x, y), 5, callbacks=[cb])
    assert tripwire.open_run(tmp_path / "run").status == "complete"


@pytest.mark.parametrize("action", ["raise", "stop_training"])
def test_stop_reason_names_the_finding_for_either_action(tmp_path: Path, action: str) -> None:
    from sklearn.datasets import make_classification

    from tripwire.integrations.xgboost import TripwireCallback

    x, y = make_classification(n_samples=400, n_features=6, random_state=0)
    dtr, dva = xgb.DMatrix(x[:300], y[:300]), xgb.DMatrix(x[300:], y[300:])
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1,
                          rules=[{"name": "tree_depth", "max_depth": 3, "actions": [action]}])
    try:
        xgb.train({"objective": "binary:logistic", "nthread": 1, "max_depth": 6}, dtr, 20,
                  evals=[(dtr, "train"), (dva, "validation")], callbacks=[cb], verbose_eval=False)
    except tripwire.TrainingStopped:
        assert action == "raise"
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "stopped" and cb.stopped_by is not None and cb.stopped_by.rule == "tree_depth"
    assert cb.stop_reason is not None and cb.stop_reason == run.stop_reasons[0]
    assert cb.stop_reason.startswith("[warning] tree_depth at step 0 (train): ")

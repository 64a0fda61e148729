"""Trial 29f F8: ``run.tensor('labels').value(7)`` (``mode=None``) read mode train, where labels
had no step 7, and the error did not say that mode eval, the mode of the ``confusion`` finding that
named step 7, has it. A read that was not given a mode now names the other modes that have the
step and the ``mode=`` to pass; a read given a mode says nothing more."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire import TensorNotFoundError


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("t29f") / "run"
    with tripwire.Session({"out_dir": str(path), "save": {"interval": 10, "modes": {"eval": {"interval": 1}}}, "rules": [],
                           "collections": {"labels": {"reductions": ["raw", "mean"]},
                                           "weights": {"reductions": ["l2", "histogram"]}}}) as s:
        for step in range(30):
            plan = s.begin_step("train", step)
            if plan:
                plan.add("labels", np.arange(4, dtype=np.int64), "labels")
                plan.add("w", np.ones(3, dtype=np.float32), "weights")
            s.end_step()
        for step in range(1, 8):
            plan = s.begin_step("eval", step)
            if plan:
                plan.add("labels", np.arange(4, dtype=np.int64) + step, "labels")
                plan.add("w", np.ones(3, dtype=np.float32), "weights")
            s.end_step()
    return path


def test_a_raw_read_without_mode_names_the_mode_that_has_the_step(run_dir: Path) -> None:
    run = tripwire.open_run(run_dir)
    eval_steps = run.tensor("labels").steps(mode="eval")
    assert 7 in eval_steps and 7 not in run.tensor("labels").steps(mode="train")
    with pytest.raises(TensorNotFoundError, match=r"mode=None read mode 'train', and 'eval' has a value at step 7: "
                                                  r"pass mode='eval'"):
        run.tensor("labels").value(7)
    np.testing.assert_array_equal(run.tensor("labels").value(7, mode="eval"), np.arange(4) + 7)


def test_reductions_and_histograms_say_it_too(run_dir: Path) -> None:
    t = tripwire.open_run(run_dir).tensor("w")
    with pytest.raises(TensorNotFoundError, match=r"'eval' has a value at step 7: pass mode='eval'"):
        t.value("l2", 7)
    with pytest.raises(TensorNotFoundError, match=r"'eval' has a value at step 7: pass mode='eval'"):
        t.reduction_values(7)
    with pytest.raises(TensorNotFoundError, match=r"'eval' has a value at step 7: pass mode='eval'"):
        t.histogram(7)


def test_a_read_given_its_mode_or_a_step_no_mode_has_gets_no_hint(run_dir: Path) -> None:
    t = tripwire.open_run(run_dir).tensor("labels")
    with pytest.raises(TensorNotFoundError) as given:
        t.value(7, mode="train")
    assert "pass mode=" not in str(given.value)
    with pytest.raises(TensorNotFoundError) as nowhere:
        t.value(29)
    assert "pass mode=" not in str(nowhere.value)

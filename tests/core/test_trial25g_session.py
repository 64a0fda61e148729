"""Trial 25g: two WARNINGs of a session's end that sent the user looking for a fault that was not
there, after a Lightning fit: ``trainer.test()`` said a collection of fc1's weights and gradients
"matched no tensor ... captured nothing" (test mode offers no parameter; the fit had captured them),
and ``trainer.predict`` advised a save interval that still captures no loss (a prediction has none)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from tripwire import Session


def test_a_collection_of_parameters_in_a_session_without_training_says_where_it_matched_nothing(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = {"collections": {"first_layer": {"include": [r"^fc1\.", r"^gradients/fc1\."], "reductions": ["l2"]}},
              "save": {"interval": 1}}
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s = Session(config, out_dir=str(tmp_path / "run"))
        for step in range(3):  # a trainer.test() after the fit: a session of its own, no training step
            plan = s.begin_step("test", step)
            plan.add("fc1/output", np.ones((4, 3), dtype=np.float32), "activations")
            s.end_step()
        s.close()
    said = [r.getMessage() for r in caplog.records if "matched no tensor" in r.getMessage()]
    assert len(said) == 1, said
    assert "collection 'first_layer' matched no tensor in test" in said[0]
    assert "so it captured nothing in test" in said[0]
    assert "this session ran no training step: weights, biases and gradients are offered in training only" in said[0]


def test_a_collection_that_matched_nothing_in_training_is_named_without_that_note(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = {"collections": {"first_layer": {"include": [r"^fc9\."], "reductions": ["l2"]}}, "save": {"interval": 1}}
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s = Session(config, out_dir=str(tmp_path / "run"))
        for step in range(3):
            plan = s.begin_step("train", step)
            plan.add("fc1.weight", np.ones((4, 3), dtype=np.float32), "weights")
            s.end_step()
        s.close()
    said = [r.getMessage() for r in caplog.records if "matched no tensor" in r.getMessage()]
    assert len(said) == 1 and "matched no tensor in train" in said[0] and "no training step" not in said[0], said


@pytest.mark.parametrize("framework", ["lightning", "keras"])
def test_no_advice_to_save_losses_in_predict_where_a_prediction_has_none(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, framework: str) -> None:
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s = Session({"save": {"interval": 50}}, framework=framework, out_dir=str(tmp_path / "run"))
        for step in range(1, 21):  # trainer.predict (its steps count from 1): none is a save step, none offers a loss
            s.begin_step("predict", step)
            s.end_step()
        s.close()
    assert not [r.getMessage() for r in caplog.records if "was a save step" in r.getMessage()]


def test_a_hand_written_loop_is_still_told_its_predict_saved_nothing(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # (a hand-written loop may hand a prediction's loss to the session: the advice stays)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s = Session({"save": {"interval": 50}}, out_dir=str(tmp_path / "run"))
        for step in range(1, 21):
            s.begin_step("predict", step)
            s.end_step()
        s.close()
    assert [r.getMessage() for r in caplog.records if "was a save step (interval 50"
            in r.getMessage()]

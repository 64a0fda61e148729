"""Trial 38a: a hand-written loop's stop line named the finding's step alone where training stopped at
a later one (a NaN loss kept at step 7, judged at save step 10), while the other rank's line of the
same stop named the step (``stopping training at train step 10``); now the session's line names it as
the callbacks' lines do, where it is not the finding's."""

from __future__ import annotations

import logging

import pytest

import tripwire


def _stop_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "stopping training" in r.getMessage()]


def test_the_stop_line_names_the_step_training_stops_at_beside_the_findings(caplog: pytest.LogCaptureFixture) -> None:
    session = tripwire.Session(write=False, rules=[{"name": "exploding_tensor", "actions": ["stop_training"]}],
                               save_interval=10)
    stopped_at = None
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        for step in range(20):
            loss = float("nan") if step == 7 else 1.0 / (step + 1)
            if session.step("train", step, {"loss": (loss, "losses")}).stop:
                stopped_at = step
                break
    session.close()
    assert stopped_at == 10 and session.stopped_by is not None and session.stopped_by.step == 7
    assert _stop_lines(caplog) == ["tripwire: stopping training at train step 10: rule 'exploding_tensor' at step 7 "
                                   "(train)"]


def test_the_stop_line_of_a_finding_at_the_step_it_stops_names_it_once(caplog: pytest.LogCaptureFixture) -> None:
    session = tripwire.Session(write=False, rules=[{"name": "exploding_tensor", "actions": ["stop_training"]}],
                               save_interval=10)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        for step in range(20):
            loss = float("nan") if step == 10 else 1.0
            if session.step("train", step, {"loss": (loss, "losses")}).stop:
                break
    session.close()
    assert _stop_lines(caplog) == ["tripwire: stopping training: rule 'exploding_tensor' at step 10 (train)"]


def test_a_rank_stopped_by_another_ranks_finding_says_whose_rule_it_was(caplog: pytest.LogCaptureFixture) -> None:
    """Trial 38i: a tripwire watch stop request for rank 1's finding stopped rank 0, whose line read
    "rank 0: stopping training at train step 40: rule 'loss_over' at step 30 (train)"."""
    from tripwire import Finding
    from tripwire.integrations._hooks import say_stop

    found = Finding(rule="loss_over", step=30, mode="train", message="loss 283 at step 30 is above 50.0", worker=1)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        say_stop(found, "train", 40, rank=0)
        say_stop(found, "train", 40, rank=1)
    assert _stop_lines(caplog) == [
        "tripwire: rank 0: stopping training at train step 40: rank 1's rule 'loss_over' at step 30 (train)",
        "tripwire: rank 1: stopping training at train step 40: rule 'loss_over' at step 30 (train)"]


def test_a_rank_stopped_at_an_eval_step_by_another_ranks_rule_names_the_train_step_before(
        caplog: pytest.LogCaptureFixture) -> None:
    """Trial 38p: at a validation's end, rank 1's line named the train step before the eval step, rank
    0's (its distributed_stop) did not."""
    from tripwire import Finding
    from tripwire.integrations._hooks import say_stop

    stop = Finding(rule="distributed_stop", step=4, mode="eval", message="rank 1's rule ...", worker=0, source="check",
                   details={"stopped_by": [{"rank": 1, "rule": "exploding_tensor", "step": 13, "mode": "train",
                                            "message": "loss holds the value nan"}], "train_step": 19})
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        say_stop(stop, "eval", 4, rank=0, train_step=19)
    assert _stop_lines(caplog) == ["tripwire: rank 0: stopping training at eval step 4, after train step 19: rank 1's "
                                   "rule 'exploding_tensor' at step 13 (train)"]

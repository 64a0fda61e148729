"""An ``end_step`` that stops saving what the rules read says so in a WARNING (trial 20b).

smdebug users limit capture with ``end_step``; in tripwire that turns the rules off after that step:
a loss flat and then NaN after ``end_step=20`` ended ``complete`` with no finding and no word why."""

from __future__ import annotations

import logging

import pytest

import tripwire

CUT = "Those rules judge no later step"


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and CUT in r.getMessage()]


def test_a_top_level_end_step_names_the_rules_it_cuts_off(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        session = tripwire.Session(write=False, rules=["loss_not_decreasing", "exploding_tensor"], end_step=20)
    said = _warnings(caplog)
    assert len(said) == 1, said
    assert said[0].startswith("tripwire: save.end_step=20 (train): rules 'loss_not_decreasing', 'exploding_tensor'")
    assert "read nothing from train step 20 on" in said[0]
    assert "collections: {weights: {save: {end_step: N}}}" in said[0]
    session.close()


def test_an_end_step_0_with_listed_steps_names_the_steps_the_rules_still_read(caplog: pytest.LogCaptureFixture) -> None:
    # trial 23l: save: {steps: [3, 7], end_step: 0} said the rules "read nothing from step 0 on"
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        session = tripwire.Session(write=False, rules=["exploding_tensor"], save={"steps": [7, 3], "end_step": 0})
    said = _warnings(caplog)
    assert len(said) == 1 and "save.end_step=0 (train): rule 'exploding_tensor' read nothing from train step 0 on but " \
                              "the listed steps 3, 7" in said[0], said
    session.close()


def test_an_end_step_on_a_collection_no_rule_reads_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        session = tripwire.Session(write=False, rules=["loss_not_decreasing"],
                                   collections={"losses": None, "weights": {"save": {"end_step": 20}}})
        plain = tripwire.Session(write=False, rules=["loss_not_decreasing"])
    assert _warnings(caplog) == []
    session.close()
    plain.close()


def test_an_end_step_on_a_collection_a_rule_reads_names_its_key(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        session = tripwire.Session(write=False, rules=["exploding_gradient"],
                                   collections={"losses": None, "gradients": {"save": {"end_step": 30}}})
    said = _warnings(caplog)
    assert len(said) == 1 and said[0].startswith(
        "tripwire: collections.gradients.save.end_step=30 (train): rule 'exploding_gradient' read nothing")
    session.close()


def test_no_rules_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        tripwire.Session(write=False, rules=[], end_step=20).close()
    assert _warnings(caplog) == []

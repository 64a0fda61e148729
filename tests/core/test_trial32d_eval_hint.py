"""Trial 32d F8: a fit whose validation batches were no save step heard at its end "nothing of
relu_outputs was captured in eval. To save every eval batch: save: {modes: {eval: {interval: 1}}}",
where ``relu_outputs`` was added by ``dead_relu`` alone, a rule of mode train: no rule reads ReLU
outputs in eval, and the advice only adds work. The hint names the collections something wants in
that mode: the config's, and those a rule asks for in it."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest

from tripwire import Session


def _said(caplog: pytest.LogCaptureFixture, **config: Any) -> list[str]:
    """The end-of-run hints of a session whose 8 eval batches (steps 1-8, interval 10) were no save
    step, both modes offering a ReLU output and a loss."""
    caplog.clear()
    relu = np.maximum(np.linspace(-1.0, 1.0, 8), 0.0)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s = Session(save_interval=10, write=False, **config)
        for step in range(20):
            plan = s.begin_step("train", step)
            plan.add("fc1/relu", relu, "relu_outputs")
            plan.add("loss", 1.0, "losses")
            s.end_step()
        for step in range(1, 9):
            plan = s.begin_step("eval", step)
            plan.add("fc1/relu", relu, "relu_outputs")
            plan.add("val_loss", 1.0, "losses")
            s.end_step()
        s.close()
    return [r.getMessage() for r in caplog.records if "was a save step" in r.getMessage()]


def test_a_collection_only_a_train_rule_asked_for_is_not_named_for_eval(caplog: pytest.LogCaptureFixture) -> None:
    [said] = _said(caplog, rules=["dead_relu"])
    assert "nothing of losses, metrics was captured in eval" in said, said
    assert "relu_outputs" not in said, said


def test_a_rule_that_reads_it_in_eval_has_it_named(caplog: pytest.LogCaptureFixture) -> None:
    [said] = _said(caplog, rules=[{"name": "dead_relu", "modes": ["train", "eval"]}])
    assert "nothing of losses, metrics, relu_outputs was captured in eval" in said, said


def test_a_collection_the_config_names_is_named(caplog: pytest.LogCaptureFixture) -> None:
    [said] = _said(caplog, rules=["dead_relu"], include_collections=["relu_outputs"])
    assert "relu_outputs was captured in eval" in said, said


def test_nothing_is_said_where_only_train_rules_wanted_anything(caplog: pytest.LogCaptureFixture) -> None:
    """A config naming only what a train rule reads: no hint for eval at all."""
    assert _said(caplog, rules=["dead_relu"], collections=["relu_outputs"]) != []  # (the config names it)
    assert _said(caplog, rules=["dead_relu"], collections=[]) == []

"""Trial 26c, F9: ``Session(rules=["defualt"])`` logged a WARNING and then raised a ConfigError with
the same "did you mean"; a tensor name offered twice in one step with two values kept the last
without a word."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from tripwire import ConfigError, Session


def test_a_misspelled_rule_is_said_once_by_the_session(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="tripwire"):
        with pytest.raises(ConfigError, match=r"rules\[0\]: unknown rule 'defualt'; did you mean 'default'\?"):
            Session(rules=["defualt"], write=False)
    said = [r.getMessage() for r in caplog.records if "defualt" in r.getMessage()]
    assert said == [], said  # (the error says it; no WARNING before it)
    # load_config alone still warns (a rule registered later under that name would be taken there)
    from tripwire import load_config

    with caplog.at_level(logging.DEBUG, logger="tripwire"):
        caplog.clear()
        load_config({"rules": ["defualt"]})
    assert any("'defualt' is not a registered rule; did you mean 'default'?" in r.getMessage() for r in caplog.records)


def test_a_name_offered_twice_in_one_step_with_another_value_is_an_error() -> None:
    s = Session({"save": {"interval": 1}}, write=False)
    plan = s.begin_step("train", 3)
    plan.add("loss", 1.0, "losses")
    with pytest.raises(ConfigError, match=r"add\('loss'\): offered twice at train step 3 with different values .*"
                                          r"give the other value a name of its own"):
        plan.add("loss", 2.0, "losses")
    s.end_step()
    # kept between save steps (every-step losses), too
    k = Session({"save": {"interval": 10}}, write=False)
    k.step("train", 0, {"loss": (1.0, "losses")})
    plan = k.begin_step("train", 1)
    assert not plan and plan.add("loss", np.float32(0.5), "losses")
    with pytest.raises(ConfigError, match=r"add\('loss'\): offered twice at train step 1"):
        plan.add("loss", np.float32(0.7), "losses")
    k.end_step()
    k.close()
    s.close()


def test_the_same_tensor_or_an_equal_value_offered_again_is_one_entry(tmp_path: Path) -> None:
    import torch

    s = Session({"save": {"interval": 1}, "collections": ["activations", "relu_outputs", "losses"]},
                out_dir=str(tmp_path / "run"))
    relu = torch.relu(torch.tensor([-1.0, 2.0, float("nan")]))
    plan = s.begin_step("train", 0)
    assert plan.add("fc/output", relu, "activations") and plan.add("fc/output", relu, "relu_outputs")
    assert plan.add("fc/output", relu.clone(), "activations")  # (a copy of the same numbers: NaN too)
    plan.add("loss", torch.tensor(0.5), "losses")
    plan.add("loss", 0.5, "losses")
    s.end_step()
    # a step number repeated by a later begin_step (a loop that counts wrong) is stored as it comes
    q = Session({"save": {"interval": 10}}, write=False)
    for value in (1.0, 2.0):
        plan = q.begin_step("train", 5)
        plan.add("loss", value, "losses")
        q.end_step()
    q.close()
    s.close()
    from tripwire import open_run

    run = open_run(tmp_path / "run")
    assert sorted(run.collections()["relu_outputs"]) == ["fc/output"]
    assert run.series("loss")[1].tolist() == [0.5]

"""Trials 28e and 28i, core/_session.py (and the unfed wording of core/rules/_common.py).

- 28e F3: ``StepPlan.select()``, a question, counted as an offer: closing warned "'fc.weight', offered
  as weights, is not captured" of a tensor never offered.
- 28e F10: "had nothing to read: this run has no 'gradients' collection" right after a line listing the
  config's collections, gradients among them.
- 28e F11: "collection 'first_layer' matched no tensor ...; names offered look like:" listed the first
  names offered, not the near misses (Keras's ``fc1/kernel`` for an include of ``^fc1\\.``).
- 28e F4: a training appended to a run of another framework's was told of "an earlier training's"
  records only.
- 28i F2: a check's finding the run held already was left out of a training appended to the run (the
  same XGBoost callback fitted twice), where only a training that continues the run should hold it.
- A failing action's ERROR line repeated the finding's whole message; a sparse torch tensor offered
  twice under one name (as another object) was "offered twice".
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
import numpy as np
import pytest

import tripwire
from tripwire import ActionError, ConfigError, Finding, Session


def _messages(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


# ------------------------------------------------------------------------------ F3: select is a question
def test_select_is_a_question_no_offer_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    s = Session(out_dir=str(tmp_path / "run"), rules=["default"])
    with caplog.at_level(logging.INFO, logger="tripwire"):
        plan = s.begin_step("train", 0)
        assert plan.select("fc.weight", "weights") == ()  # (asked, not offered)
        plan.add("loss", np.float32(1.0), "losses")
        s.end_step()
        s.close()
    assert not _messages(caplog, "offered as weights"), caplog.text
    assert not _messages(caplog, "went to no collection"), caplog.text


def test_an_offer_no_collection_takes_is_still_said_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    s = Session(out_dir=str(tmp_path / "run"), rules=["default"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        for step in range(3):
            plan = s.begin_step("train", step)
            assert plan.select("fc.weight", "weights") == ()
            assert plan.add("fc.weight", np.ones(3), "weights") is False
            plan.add("loss", np.float32(1.0), "losses")
            s.end_step()
        s.close()
    said = _messages(caplog, "offered as weights, is not captured")
    assert len(said) == 1 and "'fc.weight', offered as weights" in said[0] and "name 'weights'" in said[0]


def test_an_offer_taken_at_other_steps_is_not_said(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # the loss offered every step, saved every 10: taken at the save steps, never "not captured"
    s = Session(out_dir=str(tmp_path / "run"), rules=[], collections={"losses": {"every_step": False}},
                save_interval=10)
    with caplog.at_level(logging.INFO, logger="tripwire"):
        for step in range(25):
            s.step("train", step, {"loss": (np.float32(1.0), "losses")})
        s.close()
    assert not _messages(caplog, "is not captured"), caplog.text
    assert tripwire.open_run(tmp_path / "run").series("loss")[0].tolist() == [0, 10, 20]


# ------------------------------------------------------------------------------ F10: the unfed wording
def test_unfed_rules_are_said_as_what_was_captured(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    s = Session(out_dir=str(tmp_path / "run"), rules=["default"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s.step("train", 0, {"loss": (np.float32(1.0), "losses")})
        s.close()
    [said] = _messages(caplog, "had nothing to read")
    assert ("rules 'vanishing_gradient', 'exploding_gradient' had nothing to read: no tensor of the 'gradients' "
            "collection was captured (the run holds tensors of: losses): the rules asked for the collection, but the "
            "training offered no such tensor, so these rules never judged") in said
    assert "this run has no" not in said


def test_unfed_rules_whose_collection_patterns_left_the_offers_out(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    s = Session(out_dir=str(tmp_path / "run"), rules=["vanishing_gradient"], save_interval=1,
                collections={"losses": None, "gradients": {"include": ["^nothing$"]}})
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s.step("train", 0, {"loss": (np.float32(1.0), "losses"), "gradients/fc.weight": (np.ones(4), "gradients")})
        s.close()
    [said] = _messages(caplog, "had nothing to read")
    assert ("no tensor of the 'gradients' collection was captured (the run holds tensors of: losses): the config has "
            "the collection, and the training offered tensors of its kind that the include/exclude patterns of "
            "'gradients' leave out (named below)") in said
    assert _messages(caplog, "collection 'gradients' matched no tensor")


def test_unfed_message_names_several_collections() -> None:
    from tripwire.rules._common import unfed_message

    assert unfed_message("class_imbalance", ["labels", "predictions"], []) == (
        "rule 'class_imbalance' had nothing to read: no tensor of the 'labels' or 'predictions' collections was "
        "captured (the run holds tensors of: none)")


# ------------------------------------------------------------------------------ F11: near misses first
def test_a_collection_that_matched_nothing_lists_the_near_misses_first(tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    # Keras's names ('/') under the config.md example's Lightning patterns ('.')
    s = Session(out_dir=str(tmp_path / "run"), rules=[], save_interval=1, framework="keras",
                collections={"losses": None, "activations": None, "weights": None, "gradients": None,
                             "first_layer": {"include": ["^fc1\\.", "^gradients/fc1\\."], "reductions": ["raw"]}})
    offered = {"fc2/output": "activations", "fc/output": "activations", "fc1/relu/input": "activations",
               "lr/0": "activations", "fc/kernel": "weights", "fc/bias": "weights", "fc1/kernel": "weights",
               "gradients/fc/kernel": "gradients", "gradients/fc1/kernel": "gradients"}
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s.step("train", 0, {name: (np.ones(3), kind) for name, kind in offered.items()})
        s.close()
    [said] = _messages(caplog, "collection 'first_layer' matched no tensor")
    names = said.split("names offered look like: ")[1].split(" (")[0].split(", ")
    assert names[:3] == ["gradients/fc1/kernel", "fc1/kernel", "fc1/relu/input"], said
    assert ("('gradients/fc1/kernel', 'fc1/kernel', 'fc1/relu/input' match the include patterns where '/' and '.' "
            "are taken as the same separator: the names here use '/')") in said


def test_nearest_names_ranks_by_likeness_without_a_separator_match() -> None:
    from tripwire._session import _nearest_names

    ranked, swapped = _nearest_names(["lr/0", "decoder.out", "encoder.layer1.weight", "encoder.layer2.weight"],
                                     ["^encoder\\.layer1x"])
    assert ranked[0] == "encoder.layer1.weight" and swapped == []


# ------------------------------------------------------------------------------ F4: the earlier framework
def _train(session: Session, steps: range) -> None:
    for step in steps:
        session.step("train", step, {"loss": (np.float32(1.0 / (step + 1)), "losses")})


def test_an_appended_training_names_the_earlier_trainings_framework(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "run"
    first = Session(out_dir=str(out), rules=[], framework="lightning")
    _train(first, range(3))
    first.close()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        second = Session(out_dir=str(out), rules=[], framework="keras")
        _train(second, range(3))
        second.close()
        third = Session(out_dir=str(out), rules=[], framework="keras")
        _train(third, range(3))
        third.close()
    said = _messages(caplog, "already holds records of worker 0")
    assert len(said) == 2
    assert "(an earlier lightning training's; this is a keras training)" in said[0]
    assert "(an earlier training's)" in said[1]  # (the same framework: nothing more to say)
    assert json.loads((out / "run.json").read_text())["framework"] == "lightning"


def test_the_earlier_framework_falls_back_to_run_json(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "run"
    first = Session(out_dir=str(out), rules=[], framework="xgboost")
    _train(first, range(2))
    first.close()
    meta = out / "workers" / "worker-00000.json"
    data = json.loads(meta.read_text())
    data.pop("environment")  # (a meta file without it: run.json says whose the run is)
    meta.write_text(json.dumps(data))
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        second = Session(out_dir=str(out), rules=[])
        _train(second, range(2))
        second.close()
    [said] = _messages(caplog, "already holds records of worker 0")
    assert "(an earlier xgboost training's; this is a python training)" in said


# ------------------------------------------------------------------------------ 28i F2: held checks
def _check(step: int) -> Finding:
    return Finding(rule="eval_is_train", step=step, mode="train", message="the evaluation set is the training data")


def test_a_training_appended_to_the_run_records_its_own_checks(tmp_path: Path) -> None:
    out = tmp_path / "run"
    for _ in range(2):  # (the same XGBoost callback fitted twice: a session each, appended)
        s = Session(out_dir=str(out), rules=[])
        s.record_finding(_check(0))
        _train(s, range(5))
        s.close()
    assert [(f.rule, f.step) for f in tripwire.open_run(out).findings] == [("eval_is_train", 0)] * 2


@pytest.mark.parametrize("how", ["continues", "load_state_dict"])
def test_a_training_that_continues_the_run_holds_its_checks(tmp_path: Path, how: str) -> None:
    out = tmp_path / "run"
    first = Session(out_dir=str(out), rules=[])
    first.record_finding(_check(0))
    _train(first, range(5))
    state = first.state_dict()
    first.close()
    second = Session(out_dir=str(out), rules=[])
    if how == "continues":
        second.continues()
    else:
        second.load_state_dict(state)
    got = second.record_finding(_check(5))
    _train(second, range(5, 8))
    second.close()
    assert second.findings == [got]  # (the session keeps it)
    assert [(f.rule, f.step) for f in tripwire.open_run(out).findings] == [("eval_is_train", 0)]


# ------------------------------------------------------------------------------ an action that fails
def _refuses(finding: Finding) -> None:
    raise ActionError("the pager is down")


def _breaks(finding: Finding) -> None:
    raise RuntimeError("boom")


def test_a_failing_action_names_the_rule_step_and_mode(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rules = [{"name": "exploding_tensor", "actions": ["record", _refuses, _breaks]}]
    s = Session(rules=rules, save_interval=1, write=False)
    with caplog.at_level(logging.ERROR, logger="tripwire"):
        for step, loss in enumerate([1.0, math.nan]):
            s.step("train", step, {"loss": (np.float32(loss), "losses")})
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors == ["tripwire: action '_refuses' failed for exploding_tensor at step 1 (train): the pager is down",
                      "tripwire: action '_breaks' failed for exploding_tensor at step 1 (train)"]
    assert [f.step for f in s.findings] == [1]


# ------------------------------------------------------------------------------ a sparse tensor offered twice
def test_a_sparse_tensor_offered_twice_as_another_object_is_the_same_value(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    grad = torch.sparse_coo_tensor(torch.tensor([[0, 2]]), torch.tensor([1.5, -2.0]), (4,), check_invariants=True)
    s = Session(out_dir=str(tmp_path / "run"), rules=[], save_interval=1, collections=["gradients"])
    plan = s.begin_step("train", 0)
    assert plan.add("gradients/emb.weight", grad, "gradients")
    assert plan.add("gradients/emb.weight", grad.clone(), "gradients")  # (the same numbers: one entry)
    with pytest.raises(ConfigError, match=r"add\('gradients/emb.weight'\): offered twice at train step 0"):
        plan.add("gradients/emb.weight", grad * 2, "gradients")
    s.end_step()
    s.close()
    l2 = tripwire.open_run(tmp_path / "run").series("gradients/emb.weight", "l2")[1]
    assert l2.tolist() == pytest.approx([2.5])


def test_unfed_rules_name_the_config_where_it_has_the_collection(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    # session 31 (trial 31h F6): "the config has the collection" was said where the rules added it; where
    # the config does have it, the line still says so
    s = Session(out_dir=str(tmp_path / "run"), rules=["default"], include_collections=["gradients"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s.step("train", 0, {"loss": (np.float32(1.0), "losses")})
        s.close()
    [said] = _messages(caplog, "had nothing to read")
    assert "(the run holds tensors of: losses): the config has the collection, but the training offered no such " \
           "tensor" in said, said

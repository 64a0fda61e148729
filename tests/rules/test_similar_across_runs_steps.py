"""similar_across_runs in the training judges every step both runs stored since its last evaluation
(trial 21b: the every-step losses between save steps went unjudged in-process, tripwire watch found them)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

import tripwire
from tripwire import _watch
from tripwire.rules import SimilarAcrossRuns

REF = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05, 0.04]


def train(out: Path, losses: list[float], rules: list = ()) -> tripwire.Session:  # type: ignore[assignment]
    s = tripwire.Session(out_dir=str(out), rules=list(rules), save_interval=5)
    for i, loss in enumerate(losses):
        s.step("train", i, {"loss": (loss, "losses")})
    s.close()
    return s


def test_a_difference_between_save_steps_is_reported_at_its_step(tmp_path: Path) -> None:
    ref = tmp_path / "ref"
    train(ref, REF)
    other = list(REF)
    other[1] = 0.95  # the save steps 0, 5 and 10 agree; the losses kept at every step differ at step 1
    s = train(tmp_path / "b", other, [{"name": "similar_across_runs", "other": str(ref), "actions": ["record"]}])
    found = [f for f in s.findings if f.rule == "similar_across_runs"]
    assert [(f.step, f.details["value"], f.details["reference"]) for f in found] == [(1, 0.95, 0.9)]
    assert "is 0.95 at step 1, the reference run" in found[0].message
    # tripwire watch over the stored pair (its findings removed: not "recorded before") says the same
    shutil.rmtree(tmp_path / "b" / "findings")
    watched = _watch.watch(str(tmp_path / "b"), {"rules": [{"name": "similar_across_runs", "other": str(ref)}]}, once=True)
    assert [f.step for f in watched if f.rule == "similar_across_runs"] == [1]


def test_the_first_differing_step_since_the_last_evaluation(tmp_path: Path) -> None:
    ref = tmp_path / "ref"
    train(ref, REF)
    other = list(REF)
    other[7] = 9.0  # between the save steps 5 and 10
    other[8] = 8.0
    other[10] = 0.5  # a save step, after them
    s = train(tmp_path / "b", other, [{"name": "similar_across_runs", "other": str(ref), "actions": ["record"],
                                       "repeat": True}])
    assert [f.step for f in s.findings if f.rule == "similar_across_runs"] == [7]


def test_same_losses_at_every_step_are_quiet(tmp_path: Path) -> None:
    ref = tmp_path / "ref"
    train(ref, REF)
    s = train(tmp_path / "b", REF, [{"name": "similar_across_runs", "other": str(ref)}])
    assert [f for f in s.findings if f.rule == "similar_across_runs"] == []


def test_steps_already_judged_stay_judged_after_a_resume(tmp_path: Path) -> None:
    ref = tmp_path / "ref"
    train(ref, REF)
    h = tripwire.History()
    for i, loss in enumerate(REF[:6]):
        h.add_step("train", i, 0, float(i), [("loss", ("raw",))], np.array([loss if i != 2 else 5.0]))
    rule = SimilarAcrossRuns(other=str(ref))
    found = rule.evaluate(h, 5, "train")
    assert [f.step for f in found] == [2]
    again = SimilarAcrossRuns(other=str(ref))
    again.load_state_dict(rule.state_dict())  # a resumed training: steps up to 5 were judged
    assert again.evaluate(h, 5, "train") == []
    for i in range(6, 11):
        h.add_step("train", i, 0, float(i), [("loss", ("raw",))], np.array([REF[i]]))
    assert again.evaluate(h, 10, "train") == []

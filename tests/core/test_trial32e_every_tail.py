"""Trial 32e F2: a rule that looks back over every step since its last evaluation
(``exploding_tensor``, ``similar_across_runs``) with ``every`` above 1 never judged the steps after its
last evaluation: a NaN loss there passed ``close()`` and ``tripwire watch`` (exit status 0). The end of
a training now evaluates such a rule once more at each mode's last step, its findings dated at their
own step; the session and ``tripwire watch`` alike."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

import tripwire
from tripwire import _watch
from tripwire._cli import main

NAN = float("nan")


def _train(out: Path, n: int, bad: dict[int, float], rules: list, interval: int = 10,
           evals: dict[int, float] | None = None) -> tripwire.Session:
    s = tripwire.Session(out_dir=str(out), rules=rules, save={"interval": interval})
    for i in range(n):
        s.step("train", i, {"loss": (bad.get(i, 1.0), "losses")})
    for j, v in (evals or {}).items():
        s.step("eval", j, {"val_loss": (v, "losses")}, summary=True)
    s.close()
    return s


@pytest.mark.parametrize("n, nan_at", [(30, 25), (35, 31), (50, 45), (30, 29)])
def test_a_nan_after_the_last_evaluation_is_found_at_close(tmp_path: Path, n: int, nan_at: int) -> None:
    s = _train(tmp_path / "r", n, {nan_at: NAN}, [{"name": "exploding_tensor", "every": 20, "actions": ["record"]}])
    found = [f for f in s.findings if f.rule == "exploding_tensor"]
    assert [(f.step, f.mode) for f in found] == [(nan_at, "train")]  # dated at its own step
    assert f"at step {nan_at} (train)" in found[0].message


def test_the_watch_finds_it_too_and_fails_the_gate(tmp_path: Path) -> None:
    out = tmp_path / "r"
    _train(out, 30, {25: NAN}, [])  # (the training's session had no rule: nothing recorded before)
    config = {"rules": [{"name": "exploding_tensor", "every": 20}]}
    watched = _watch.watch(str(out), config, once=True)
    assert [(f.rule, f.step) for f in watched] == [("exploding_tensor", 25)]
    cfg = tmp_path / "et.yaml"
    cfg.write_text(yaml.safe_dump(config))
    assert main(["watch", str(out), "--config", str(cfg), "--once", "--no-record"]) == 1


def test_the_session_and_the_watch_agree_on_steps_and_modes(tmp_path: Path) -> None:
    """An eval NaN after the last eval evaluation, beside the train one: each at its own step and mode."""
    rules = [{"name": "exploding_tensor", "every": 3, "repeat": True, "actions": ["record"]}]
    out = tmp_path / "r"
    s = _train(out, 5, {4: NAN}, rules, interval=1, evals={0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0, 4: NAN})
    mine = sorted((f.mode, f.step) for f in s.findings if f.rule == "exploding_tensor")
    assert mine == [("eval", 4), ("train", 4)]
    shutil.rmtree(out / "findings")
    watched = _watch.watch(str(out), {"rules": rules}, once=True)
    assert sorted((f.mode, f.step) for f in watched if f.rule == "exploding_tensor") == mine


def test_every_one_and_a_healthy_tail_are_unchanged(tmp_path: Path) -> None:
    # every 1: judged at every record already, no evaluation more; a healthy tail: nothing found
    s = _train(tmp_path / "a", 30, {25: NAN}, [{"name": "exploding_tensor", "actions": ["record"]}])
    assert [f.step for f in s.findings if f.rule == "exploding_tensor"] == [25]
    s = _train(tmp_path / "b", 30, {}, [{"name": "exploding_tensor", "every": 20, "actions": ["record"]}])
    assert [f for f in s.findings if f.rule == "exploding_tensor"] == []


def test_patience_counts_the_last_evaluation_as_one(tmp_path: Path) -> None:
    # patience 2: the tail's NaN is one evaluation that holds the condition, not two
    s = _train(tmp_path / "r", 30, {25: NAN}, [{"name": "exploding_tensor", "every": 20, "patience": 2,
                                                "actions": ["record"]}])
    assert [f for f in s.findings if f.rule == "exploding_tensor"] == []


def test_a_stop_asked_by_the_last_evaluation_comes_after_the_training(tmp_path: Path) -> None:
    s = _train(tmp_path / "r", 30, {25: NAN}, [{"name": "exploding_tensor", "every": 20}])
    assert [f.step for f in s.findings if f.rule == "exploding_tensor"] == [25]
    assert s.stopped_by is None  # (the training had ended: the run ends complete, as for the kept losses)
    assert tripwire.open_run(str(tmp_path / "r")).status == "complete"


def test_new_training_judges_the_earlier_trainings_tail(tmp_path: Path) -> None:
    s = tripwire.Session(out_dir=str(tmp_path / "r"), save={"interval": 10},
                         rules=[{"name": "exploding_tensor", "every": 20, "actions": ["record"]}])
    for i in range(30):
        s.step("train", i, {"loss": (NAN if i == 27 else 1.0, "losses")})
    s.new_training(continued=False)
    assert [f.step for f in s.findings if f.rule == "exploding_tensor"] == [27]
    for i in range(30, 60):
        s.step("train", i, {"loss": (1.0, "losses")})
    s.close()
    assert [f.step for f in s.findings if f.rule == "exploding_tensor"] == [27]
    shutil.rmtree(tmp_path / "r" / "findings")
    watched = _watch.watch(str(tmp_path / "r"), {"rules": [{"name": "exploding_tensor", "every": 20}]}, once=True)
    assert [f.step for f in watched if f.rule == "exploding_tensor"] == [27]


def test_similar_across_runs_compares_the_tail_too(tmp_path: Path) -> None:
    ref = tmp_path / "ref"
    _train(ref, 30, {}, [])
    rule = {"name": "similar_across_runs", "other": str(ref), "every": 20, "actions": ["record"]}
    s = _train(tmp_path / "b", 30, {26: 2.0}, [rule])
    assert [(f.step, f.details["value"]) for f in s.findings if f.rule == "similar_across_runs"] == [(26, 2.0)]

"""Trial 32a F2: a run of one custom collection ``mine`` (tensor ``w``, a NaN at step 2) watched with
``exploding_tensor`` and ``loss_not_decreasing``: ``tripwire watch`` printed the ``exploding_tensor``
finding on ``w``, then "rule 'exploding_tensor' had nothing to read: no tensor of the 'losses'
collection was captured"; the session's close said the same of both rules. A rule that made a
finding had something to read: neither says so of it; ``loss_not_decreasing``, which read nothing,
is still named, in both."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import yaml

from tripwire import Collection, ReductionConfig, Session
from tripwire._cli import main

RULES = ["exploding_tensor", "loss_not_decreasing"]


def _red(out: Path, caplog: pytest.LogCaptureFixture, nan: bool = True) -> tuple[Session, list[str]]:
    """t_red.py of the trial: a custom collection of any kind; ``w`` holds a NaN at step 2."""
    mine = Collection("mine", include=[".*"], reduction=ReductionConfig(reductions=["nonfinite_count", "mean"]))
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s = Session(out_dir=str(out), collections=[mine], save_interval=1, rules=RULES, actions=["log", "record"])
        for step in range(4):
            w = np.ones((5, 6), dtype=np.float32)
            if nan and step == 2:
                w[2, 2] = np.nan
            plan = s.begin_step("train", step)
            plan.add("w", w, "weights")
            s.end_step()
        s.close()
    return s, [r.getMessage() for r in caplog.records if "had nothing to read" in r.getMessage()]


def test_the_session_does_not_say_a_rule_that_found_something_had_nothing_to_read(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    s, said = _red(tmp_path / "red", caplog)
    assert [(f.rule, f.step) for f in s.findings] == [("exploding_tensor", 2)]
    assert len(said) == 1, said
    assert said[0].startswith("tripwire: rule 'loss_not_decreasing' had nothing to read: no tensor of the 'losses' "
                              "collection was captured (the run holds tensors of: mine)"), said


def test_the_watch_does_not_say_it_either(tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys) -> None:
    out = tmp_path / "red"
    _red(out, caplog)
    (out / "findings" / "in-process-00000.jsonl").unlink()  # (the watch finds it anew, as in the trial)
    config = tmp_path / "watch.yaml"
    config.write_text(yaml.safe_dump({"rules": RULES}))
    capsys.readouterr()
    assert main(["watch", str(out), "--config", str(config), "--once", "--no-record", "--json"]) == 1
    captured = capsys.readouterr()
    lines = [json.loads(line) for line in captured.out.strip().splitlines()]
    assert [(x["rule"], x["step"]) for x in lines if x["type"] == "finding"] == [("exploding_tensor", 2)]
    summary = lines[-1]
    assert summary["unfed"] == {"loss_not_decreasing": ["losses"]}, summary
    assert summary["unjudged"] == ["loss_not_decreasing"], summary
    assert "rule 'exploding_tensor' had nothing to read" not in captured.err, captured.err
    assert "rule 'loss_not_decreasing' had nothing to read" in captured.err, captured.err


def test_a_finding_recorded_by_the_training_counts_too(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                        capsys) -> None:
    out = tmp_path / "red"
    _red(out, caplog)
    config = tmp_path / "watch.yaml"
    config.write_text(yaml.safe_dump({"rules": RULES}))
    capsys.readouterr()
    assert main(["watch", str(out), "--config", str(config), "--once", "--no-record", "--json"]) == 1
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["recorded_before"] == 1 and summary["unfed"] == {"loss_not_decreasing": ["losses"]}, summary


def test_exploding_tensor_judging_a_healthy_custom_collection_had_something_to_read(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys) -> None:
    # the same run without its NaN: exploding_tensor (collections=None) read ``mine`` and found
    # nothing; neither the session nor the watch says it had nothing to read (it asks for the
    # losses to be captured, but reads every captured collection but the derived ones)
    out = tmp_path / "red"
    s, said = _red(out, caplog, nan=False)
    assert s.findings == []
    assert [m.split(" had nothing")[0] for m in said] == ["tripwire: rule 'loss_not_decreasing'"], said
    config = tmp_path / "watch.yaml"
    config.write_text(yaml.safe_dump({"rules": ["exploding_tensor"]}))
    capsys.readouterr()
    assert main(["watch", str(out), "--config", str(config), "--once", "--no-record", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["unfed"] == {} and summary["unjudged"] == [], summary


def test_exploding_tensor_told_its_collections_reads_only_those() -> None:
    from tripwire.rules import ExplodingTensor

    assert ExplodingTensor().reads_every_collection_but() == frozenset(
        {"optimizer", "hyperparameters", "feature_importance", "trees"})
    assert ExplodingTensor(collections=["gradients"]).reads_every_collection_but() is None

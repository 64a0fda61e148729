"""Trial 41h F3: ``tripwire watch --once`` of an evaluation alone (``trainer.validate``, Keras's
``evaluate``) told the gradient rules to "capture it in the training's config", and the loss rules,
which read nothing either, passed as judged; a complete run of no record got five such lines."""

from __future__ import annotations

from pathlib import Path

import pytest

import tripwire
from tripwire._cli import main

TRAIN_ONLY = ("loss_not_decreasing", "oscillating_loss", "vanishing_gradient", "exploding_gradient",
              "loss_scale_collapse")


def test_an_evaluation_alone_is_judged_by_the_rules_that_apply(tmp_path: Path, capsys) -> None:
    with tripwire.Session(out_dir=tmp_path / "run", save_interval=1) as s:
        for step in range(3):
            s.step("eval", step, {"val_loss": (0.5, "losses")})
    assert main(["watch", str(tmp_path / "run"), "--once", "--no-record"]) == 0
    captured = capsys.readouterr()
    assert "capture it" not in captured.err
    for rule in TRAIN_ONLY:
        assert (f"tripwire watch: rule {rule!r} does not apply to this run, not judged: the run holds no training "
                f"step, only eval steps (an evaluation alone: trainer.validate or trainer.test, model.evaluate), and "
                f"the rule judges train steps") in captured.err, captured.err
    assert "exploding_tensor" not in captured.err  # (it judged the eval losses)


def test_test_steps_alone_are_judged_by_no_default_rule_and_said(tmp_path: Path, capsys) -> None:
    """Trial 41j F3: Keras's evaluate (mode test) alone: exploding_tensor judges train and eval steps,
    so no rule judged it, and nothing said so (exit 0)."""
    with tripwire.Session(out_dir=tmp_path / "run", save_interval=1) as s:
        s.step("test", 0, {"test_loss": (float("nan"), "losses")}, summary=True)
    assert main(["watch", str(tmp_path / "run"), "--once", "--no-record"]) == 0
    err = capsys.readouterr().err
    assert ("rule 'exploding_tensor' does not apply to this run, not judged: the run holds no training step, only "
            "test steps (an evaluation alone: trainer.validate or trainer.test, model.evaluate), and the rule judges "
            "train, eval steps") in err, err


def test_a_run_of_no_record_says_so_once(tmp_path: Path, capsys) -> None:
    tripwire.Session(out_dir=tmp_path / "run").close()
    assert main(["watch", str(tmp_path / "run"), "--once", "--no-record"]) == 3
    captured = capsys.readouterr()
    assert captured.err.splitlines() == ["tripwire watch: the training ended (complete) before its first record: no "
                                         "rule had anything to judge"], captured.err
    assert captured.out.strip().endswith("no finding; nothing judged (the training ended before its first record); "
                                         "exit status 3")


@pytest.mark.parametrize("status", ["running"])
def test_a_live_run_of_eval_records_waits_for_its_training(tmp_path: Path, status: str) -> None:
    s = tripwire.Session(out_dir=tmp_path / "run", save_interval=1)
    s.step("eval", 0, {"val_loss": (0.5, "losses")})
    try:
        watcher = tripwire.Watcher(tmp_path / "run", record=False)
        watcher.poll()
        assert watcher.run is not None and watcher.run.status == status
        assert watcher.not_applicable() == {}  # (a training may come: not judged yet)
    finally:
        s.close()


def test_once_before_a_live_training_s_first_record(tmp_path: Path, capsys) -> None:
    """Trial 41j F5: --once of a live training before its first record told each rule to "capture it
    in the training's config"."""
    s = tripwire.Session(out_dir=tmp_path / "run")
    try:
        assert main(["watch", str(tmp_path / "run"), "--once", "--no-record"]) == 3
    finally:
        s.close()
    err = capsys.readouterr().err
    assert "capture it" not in err, err
    assert "tripwire watch: the training has written no step record yet: no rule had anything to judge" in err

"""Trial 27w: ``tripwire watch`` follow-ups of trials 27g, 27f, 27s1 and 27c2.

1. (27g F5) A training that failed before its first record (torch raised at step 0 inside ``with
   session:``) got, for every rule, "had nothing to read: this run has no 'losses' collection ...;
   capture it in the training's config": wrong advice, the config captured losses. The watch now says
   that the training failed before its first record, with its exception, and that no rule had
   anything to judge (exit status 3, as for any failed run).
2. (27f) An XGBoost run whose evaluation set is the training data: the callback said one WARNING
   (``eval_is_train``), the watch said overfit's ``train='loss'`` matched nothing (and
   ``validation='val_loss'`` read nothing). It now says what the callback says: no evaluation set is
   held out, so XGBoost logged no validation metric for overfit's defaults.
3. (27s1) A hand loop that restarts its step number every epoch: the watch read each epoch as written
   over by the next (as a resume), so its rules saw the last epoch's training values only and found
   what the in-process rules did not. A record is written over only by a later writing session (a
   resume, a training appended: the records' global steps go back), as the training's own session
   kept them all.
4. (27c2) A finding an integration's check recorded (``Session.record_finding``) looked exactly like
   a rule's in the run: it is now marked ``source: check``, and the watch tells checks by it (older
   runs still by name).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

import tripwire
from tripwire._cli import main
from tripwire._watch import Watcher


def _strict(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"not strict JSON: {name}")
    return json.loads(text, parse_constant=refuse)


# ------------------------------------------------------------------ 1. failed before its first record
def _failed_at_step_0(path: Path) -> Path:
    with pytest.raises(IndexError, match="Target 10 is out of bounds"):
        with tripwire.Session({"out_dir": str(path), "save": {"interval": 10},
                               "collections": ["losses", "gradients"]}) as s:
            s.begin_step("train", 0)
            raise IndexError("Target 10 is out of bounds.")
    assert tripwire.open_run(path).stop_reasons == {0: "IndexError: Target 10 is out of bounds."}
    return path


def test_a_training_that_failed_before_its_first_record_is_said_so_not_capture_advice(tmp_path: Path,
                                                                                       capsys) -> None:
    run = _failed_at_step_0(tmp_path / "run")
    cfg = tmp_path / "rules.yaml"
    cfg.write_text("rules: [default, overfit]\n")
    assert main(["watch", str(run), "--config", str(cfg), "--once"]) == 3
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    # trial 27g F5: "rule 'exploding_tensor' had nothing to read: this run has no 'losses' collection (it has:
    # none); capture it in the training's config", once per rule: the config captured losses
    assert "capture it" not in captured.err and "had nothing to read" not in captured.err, captured.err
    assert err == ["tripwire watch: the training failed before its first record (worker 0: IndexError: Target 10 is "
                   "out of bounds.): no rule had anything to judge"], err
    assert captured.out.splitlines() == [
        f"tripwire watch: {str(run)!r} (failed), 7 rules watched over no records: no finding; nothing judged (the "
        "training failed before its first record); exit status 3"]
    assert main(["watch", str(run), "--config", str(cfg), "--once", "--json"]) == 3
    summary = _strict(capsys.readouterr().out.splitlines()[-1])
    assert summary["status"] == "failed" and summary["records"] == {}
    assert summary["stop_reasons"] == {"0": "IndexError: Target 10 is out of bounds."}
    assert summary["notes"] == ["the training failed before its first record (worker 0: IndexError: Target 10 is out "
                                "of bounds.): no rule had anything to judge"]


def test_a_failed_training_that_wrote_records_names_its_exception(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    with pytest.raises(RuntimeError, match="CUDA out of memory"):
        with tripwire.Session({"out_dir": str(run), "save": {"interval": 1}, "collections": ["losses"]}) as s:
            for step in range(5):
                s.step("train", step, {"loss": (1.0 / (step + 1), "losses")})
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
    cfg = tmp_path / "rules.yaml"
    cfg.write_text("rules: [exploding_tensor]\n")
    assert main(["watch", str(run), "--config", str(cfg), "--once"]) == 3
    err = capsys.readouterr().err
    assert ("tripwire watch: the training failed (worker 0: RuntimeError: CUDA out of memory. Tried to allocate 2.00 "
            "GiB): judged what it wrote") in err, err


# -------------------------------------------------------------- 3. steps restarted every epoch
EPOCHS, PER_EPOCH = 8, 44


def _rising(start: float, end: float, n: int) -> list[float]:
    return [start * math.exp(k / (n - 1) * math.log(end / start)) for k in range(n)]


def _hand_loop(path: Path, rules: list[Any], train: list[float], val: list[float], *, reset: bool = True) -> None:
    """A hand loop (27g's ``loop.py --step-reset``): ``PER_EPOCH`` train steps and one validation an
    epoch; the step is the batch index within the epoch (restarts at 0), the loss kept at every step
    and saved every 10 steps."""
    config = {"out_dir": str(path), "save": {"interval": 10}, "rules": rules, "actions": ["record"],
              "collections": ["losses"]}
    with tripwire.Session(config) as s:
        s.set_planned_steps(EPOCHS * PER_EPOCH)
        g = 0
        for epoch in range(EPOCHS):
            for i in range(PER_EPOCH):
                s.step("train", i if reset else g, {"loss": (train[g], "losses")})
                g += 1
            s.step("eval", epoch, {"val_loss": (val[epoch], "losses")}, summary=True)


def _same_as_in_process(tmp_path: Path, name: str, train: list[float], val: list[float]) -> list[tuple[Any, ...]]:
    """The findings of the rules in-process, and of tripwire watch over the same loop run without
    rules: equal (rule, step, mode, message); returns them."""
    rules = ["default", "overfit", "loss_diverging"]
    _hand_loop(tmp_path / f"{name}_inproc", rules, train, val)
    _hand_loop(tmp_path / f"{name}_plain", [], train, val)
    inproc = [(f.rule, f.step, f.mode, f.message) for f in tripwire.open_run(tmp_path / f"{name}_inproc").findings]
    watcher = Watcher(tmp_path / f"{name}_plain", {"rules": rules, "actions": ["record"]}, echo=lambda f: None)
    watched = [(f.rule, f.step, f.mode, f.message) for f in watcher.watch(once=True)]
    assert watched == inproc
    return inproc


def test_a_step_count_restarted_every_epoch_is_replayed_as_the_training_judged_it(tmp_path: Path) -> None:
    # trial 27g: training loss 2.3 -> 268 with the step restarted every epoch: the in-process rules find no
    # overfitting (both got worse); the watch read each epoch as written over by the next and found overfit
    found = _same_as_in_process(tmp_path, "diverged", _rising(2.3, 268.0, EPOCHS * PER_EPOCH),
                                _rising(7.3, 335.0, EPOCHS))
    assert "overfit" not in [f[0] for f in found]


def test_a_step_count_restarted_every_epoch_finds_overfitting_as_in_process(tmp_path: Path) -> None:
    found = _same_as_in_process(tmp_path, "overfit", _rising(2.3, 0.01, EPOCHS * PER_EPOCH),
                                [2.0, 1.0, 0.8, 1.5, 2.5, 3.5, 4.5, 5.5])
    assert "overfit" in [f[0] for f in found]


def test_a_resume_from_an_earlier_checkpoint_still_writes_over_the_dead_attempts_records(tmp_path: Path) -> None:
    # trial 26i's case is kept: a later writing session (its global steps go back) that went back over steps
    # writes over them; the replay reads the resumed training's records of those steps only
    out = tmp_path / "run"
    config = {"out_dir": str(out), "save": {"interval": 1}, "collections": ["losses"]}
    s = tripwire.Session(config)
    state = None
    for step in range(10):
        s.step("train", step, {"loss": (1.0, "losses")})
        if step == 5:
            state = s.state_dict()
    s.flush()
    s.writer.abandon()  # type: ignore[union-attr]  (killed: no end marker)
    resumed = tripwire.Session(config)
    resumed.load_state_dict(state)
    for step in range(6, 12):
        resumed.step("train", step, {"loss": (2.0, "losses")})
    resumed.close()
    watcher = Watcher(out, {"rules": ["exploding_tensor"]}, echo=lambda f: None)
    watcher.watch(once=True)
    view = watcher.view
    assert view is not None
    steps, values = view.series("loss")
    assert steps.tolist() == list(range(12))
    assert values.tolist() == [1.0] * 6 + [2.0] * 6


# -------------------------------------------------------------------------------- 4. checks marked
def test_record_finding_marks_a_check_and_watch_tells_it_by_the_mark(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    # a check named as a rule the watch watches: only the mark tells it from that rule's finding
    told = tripwire.Finding("loss_not_decreasing", 3, "train", "the integration's own check: no held-out data")
    with tripwire.Session({"out_dir": str(run), "save": {"interval": 1}, "collections": ["losses"]}) as s:
        for step in range(5):
            s.step("train", step, {"loss": (1.0 / (step + 1), "losses")})
        recorded = s.record_finding(told)
    assert [f.source for f in s.findings] == ["check"] and s.findings == [recorded]
    held = tripwire.open_run(run).findings
    assert [(f.rule, f.source) for f in held] == [("loss_not_decreasing", "check")]
    cfg = tmp_path / "rules.yaml"
    cfg.write_text("rules: [loss_not_decreasing]\n")
    watcher = Watcher(run, cfg, echo=lambda f: None)
    watcher.watch(once=True)
    assert [f.rule for f in watcher.checks] == ["loss_not_decreasing"] and watcher.earlier == []
    assert main(["watch", str(run), "--config", str(cfg), "--once", "--json"]) == 1
    lines = [_strict(line) for line in capsys.readouterr().out.splitlines()]
    assert (lines[0]["type"], lines[0]["source"]) == ("check", "check")
    # a finding given a source of its own keeps it
    mine = tripwire.Finding("my_tool", 0, "train", "odd", source="my_tool")
    s2 = tripwire.Session({"out_dir": str(tmp_path / "r2"), "save": {"interval": 1}})
    s2.record_finding(mine)
    s2.close()
    assert [f.source for f in s2.findings] == ["my_tool"]


def test_an_older_runs_check_is_still_told_by_its_name(tmp_path: Path, capsys) -> None:
    # a run written before the mark: its check's source is in-process; told by its name, as before
    run = tmp_path / "run"
    with tripwire.Session({"out_dir": str(run), "save": {"interval": 1}, "collections": ["losses"]}) as s:
        for step in range(5):
            s.step("train", step, {"loss": (1.0 / (step + 1), "losses")})
    line = tripwire.Finding("loss_output_mismatch", 0, "train", "softmax under from_logits=True").to_dict()
    assert line["source"] == "in-process"
    with open(run / "findings" / "in-process-00000.jsonl", "a") as f:
        f.write(json.dumps(line) + "\n")
    cfg = tmp_path / "rules.yaml"
    cfg.write_text("rules: [exploding_tensor]\n")
    assert main(["watch", str(run), "--config", str(cfg), "--once"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("recorded before, by the training (a check, not a rule): [warning] loss_output_mismatch")

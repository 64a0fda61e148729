"""Trial 29j: custom rules and actions in a session and in ``tripwire watch``.

F1. At ``close()`` every rule was judged again at the run's last step, where only the every-step
    losses kept since the last save step were written: a gradient rule read its last gradient save
    a second time, and README's ``grad_too_small`` with ``patience: 2`` fired on one bad save,
    dated at step 99 where no gradient exists; ``tripwire watch`` did the same. Only the rules that
    read the kept collections (or state no requirement) are judged there.
F2. A ``stop_training`` asked at ``close()``, after the loop ran every step, marked the run
    ``stopped`` (status, stop_reasons, stopped_by) and logged "stopping training": it stops nothing.
F9. ``tripwire watch``'s eval findings lacked ``details.train_step`` ("after train step N").
F11. An action that failed in ``tripwire watch`` changed neither the exit status nor the summary.
"""

from __future__ import annotations

import json
import logging
import shutil
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire._cli import main
from tripwire._watch import Watcher

RULES_MODULE = '''
import numpy as np
import tripwire

CALLS = []


def grad_too_small(history, step, mode):
    """The README's rule: fc.weight's gradient l2 below 1e-8."""
    got = history.latest("gradients/fc.weight", "l2", mode)
    CALLS.append(("grad", step))
    return f"fc.weight's gradient l2 is {got[1]:.2g}" if got and got[1] < 1e-8 else None


def loss_seen(history, step, mode):
    """Reads the losses: judged wherever they are written."""
    CALLS.append(("loss", step))
    return None


def val_low(history, step, mode):
    """An eval metric below 0.9."""
    got = history.latest("val_acc", "raw", mode)
    return f"val_acc {got[1]:.3g} < 0.9" if got is not None and got[1] < 0.9 else None


def spike(history, step, mode):
    """A loss above 5 at any step since the last judgement."""
    for s in history.steps_between(mode, step - 10, step):
        v = history.value("loss", "raw", s, mode)
        if v is not None and v > 5:
            return f"loss {v} at step {s}"
    return None


def broken_action(finding):
    raise ConnectionError("webhook endpoint refused the connection")
'''


@pytest.fixture()
def rules29j(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    (tmp_path / "rules29j.py").write_text(RULES_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib
    import sys

    sys.modules.pop("rules29j", None)
    module = importlib.import_module("rules29j")
    yield module
    sys.modules.pop("rules29j", None)


def _grad_rules(module: Any) -> list[Any]:
    grad = tripwire.FunctionRule(module.grad_too_small, patience=2, actions=["record"],
                                 requirements=[tripwire.Requirement("gradients", ("l2",))])
    loss = tripwire.FunctionRule(module.loss_seen, actions=["record"],
                                 requirements=[tripwire.Requirement("losses", ("raw",))])
    return [grad, loss]


def _one_bad_gradient_save(out: Path, module: Any, *, validate_at_end: bool = False) -> tripwire.Session:
    """100 steps, gradients saved at 0, 10, ..., 90, only the one at step 90 vanishing."""
    s = tripwire.Session(rules=_grad_rules(module), out_dir=out)
    rng = np.random.default_rng(0)
    for i in range(100):
        plan = s.begin_step("train", i)
        plan.add("loss", 1.0 / (i + 1), "losses")
        if plan.wants("gradients"):
            plan.add("gradients/fc.weight", rng.normal(size=(4, 4)) * (1e-12 if i == 90 else 1.0), "gradients")
        s.end_step()
    if validate_at_end:
        s.step("eval", 0, {"val_loss": (1.0, "losses")}, summary=True)
    s.close()
    return s


@pytest.mark.parametrize("validate_at_end", [False, True])
def test_a_gradient_rule_is_not_judged_again_where_only_kept_losses_were_written(
        tmp_path: Path, rules29j: Any, validate_at_end: bool) -> None:
    s = _one_bad_gradient_save(tmp_path / "run", rules29j, validate_at_end=validate_at_end)
    grad_steps = [step for what, step in rules29j.CALLS if what == "grad"]
    assert grad_steps == list(range(0, 100, 10))  # (was ..., 90, 99: step 99 saved no gradient)
    assert [step for what, step in rules29j.CALLS if what == "loss"][-1] == 99  # the losses rule still judges them
    assert s.findings == []  # (patience 2 fired on one bad save)
    assert tripwire.open_run(tmp_path / "run").status == "complete"


def test_watch_judges_the_kept_losses_with_the_same_rules_as_the_session(tmp_path: Path, rules29j: Any) -> None:
    _one_bad_gradient_save(tmp_path / "run", rules29j)
    rules29j.CALLS.clear()
    cfg = {"rules": [{"name": "rules29j:grad_too_small", "patience": 2,
                      "requirements": [{"collection": "gradients", "reductions": ["l2"]}]},
                     {"name": "rules29j:loss_seen", "requirements": [{"collection": "losses", "reductions": ["raw"]}]}],
           "actions": ["record"]}
    watcher = Watcher(tmp_path / "run", cfg, echo=lambda f: None, record=False)
    assert watcher.watch(once=True) == []
    assert [step for what, step in rules29j.CALLS if what == "grad"] == list(range(0, 100, 10))
    assert [step for what, step in rules29j.CALLS if what == "loss"][-1] == 99


def test_a_rule_without_requirements_is_still_judged_at_the_last_kept_step(tmp_path: Path, rules29j: Any) -> None:
    # what a rule that states no requirement reads is not known: judged wherever a record is written
    s = tripwire.Session(rules=[tripwire.FunctionRule(rules29j.loss_seen)], out_dir=tmp_path / "run", save_interval=10)
    for i in range(15):
        s.step("train", i, {"loss": (1.0, "losses")})
    s.close()
    assert [step for _, step in rules29j.CALLS] == [0, 10, 14]


# ------------------------------------------------------------------------------------------- F2
def _spike_at_23(out: Path, module: Any, actions: list[str]) -> tuple[tripwire.Session, int]:
    rule = tripwire.FunctionRule(module.spike, actions=actions,
                                 requirements=[tripwire.Requirement("losses", ("raw",))])
    s = tripwire.Session(rules=[rule], out_dir=out, save_interval=10)
    ran = 0
    for i in range(25):
        ran += 1
        if s.step("train", i, {"loss": (9.0 if i == 23 else 1.0, "losses")}).stop:
            break
    return s, ran


def test_a_stop_asked_after_the_training_ended_is_no_stop(tmp_path: Path, rules29j: Any,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    s, ran = _spike_at_23(tmp_path / "run", rules29j, ["log", "stop_training"])
    with caplog.at_level(logging.INFO, logger="tripwire"):
        s.close()
    assert ran == 25
    assert [(f.rule, f.step) for f in s.findings] == [("spike", 24)]  # the finding is recorded
    assert s.stopped_by is None and s.why_stopped is None
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete" and run.stop_reasons == {}
    assert [(f.rule, f.step) for f in run.findings] == [("spike", 24)]
    said = [r.getMessage() for r in caplog.records]
    assert not any("stopping training" in m for m in said)
    info = [r for r in caplog.records if "after the training had ended" in r.getMessage()]
    assert len(info) == 1 and info[0].levelno == logging.INFO
    assert "rule 'spike' at step 24 (train) asked to stop training (stop_training)" in info[0].getMessage()


def test_a_stop_asked_during_training_still_stops_it(tmp_path: Path, rules29j: Any) -> None:
    rule = tripwire.FunctionRule(rules29j.spike, actions=["stop_training"],
                                 requirements=[tripwire.Requirement("losses", ("raw",))])
    s = tripwire.Session(rules=[rule], out_dir=tmp_path / "run", save_interval=10)
    stopped_at = None
    for i in range(40):
        if s.step("train", i, {"loss": (9.0 if i == 13 else 1.0, "losses")}).stop:
            stopped_at = i
            break
    s.close()
    assert stopped_at == 20 and s.stopped_by is not None
    assert tripwire.open_run(tmp_path / "run").status == "stopped"


def test_a_raise_action_at_close_still_raises(tmp_path: Path, rules29j: Any) -> None:
    s, _ = _spike_at_23(tmp_path / "run", rules29j, ["raise"])
    with pytest.raises(tripwire.TrainingStopped, match="spike"):
        s.close()
    assert tripwire.open_run(tmp_path / "run").status == "stopped"


# ------------------------------------------------------------------------------------------- F9
def _train_and_validate(out: Path, module: Any) -> tripwire.Session:
    rule = tripwire.FunctionRule(module.val_low, modes=["eval"], actions=["record"],
                                 requirements=[tripwire.Requirement("metrics", ("raw",), modes=("eval",))])
    s = tripwire.Session(rules=[rule], out_dir=out, save_interval=10)
    for epoch in range(2):
        for i in range(15 * epoch, 15 * epoch + 15):
            s.step("train", i, {"loss": (1.0 / (i + 1), "losses")})
        s.step("eval", epoch, {"val_acc": (0.5, "metrics")}, summary=True)
    s.close()
    return s


def test_watch_eval_findings_name_the_train_step_they_came_after(tmp_path: Path, rules29j: Any,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    s = _train_and_validate(tmp_path / "run", rules29j)
    [mine] = s.findings
    assert mine.details == {"train_step": 14}
    cfg = tmp_path / "rules.yaml"
    cfg.write_text(textwrap.dedent("""
        rules:
          - {name: "rules29j:val_low", modes: [eval], requirements: [{collection: metrics, reductions: [raw], modes: [eval]}]}
        actions: [record]
    """))
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "run", copy)
    shutil.rmtree(copy / "findings")
    assert main(["watch", str(copy), "--config", str(cfg), "--once"]) == 1
    out = capsys.readouterr().out
    assert f"{mine}" in out and "(eval, after train step 14)" in out
    [watched] = [f for f in tripwire.open_run(copy).findings if f.source == "watch"]
    assert (watched.step, watched.message, watched.details) == (mine.step, mine.message, mine.details)


# ------------------------------------------------------------------------------------------ F11
def test_an_action_that_fails_in_watch_is_counted_and_exits_2(tmp_path: Path, rules29j: Any,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    _train_and_validate(tmp_path / "run", rules29j)
    shutil.rmtree(tmp_path / "run" / "findings")  # (the watch makes the finding again, and acts on it)
    cfg = tmp_path / "rules.yaml"
    cfg.write_text(textwrap.dedent("""
        rules:
          - {name: "rules29j:val_low", modes: [eval], requirements: [{collection: metrics, reductions: [raw], modes: [eval]}]}
        actions: [record, "rules29j:broken_action"]
    """))
    assert main(["watch", str(tmp_path / "run"), "--config", str(cfg), "--once", "--no-record", "--json"]) == 2
    captured = capsys.readouterr()
    summary = json.loads(captured.out.splitlines()[-1])
    assert summary["exit_code"] == 2 and summary["new"] == 1
    assert summary["failed_actions"] == [{"action": "rules29j:broken_action", "rule": "val_low", "worker": 0,
                                          "step": 0, "mode": "eval",
                                          "error": "ConnectionError: webhook endpoint refused the connection"}]
    assert "1 action failed ('rules29j:broken_action' for val_low at step 0 (eval)" in summary["error"]
    assert ("tripwire watch: error: 1 action failed ('rules29j:broken_action' for val_low at step 0 (eval); each "
            "logged above with its error): the finding was printed, not acted on as configured") in captured.err
    # an action that works leaves the exit status as it was (1: a finding)
    cfg.write_text(cfg.read_text().replace('"rules29j:broken_action"', "log"))
    assert main(["watch", str(tmp_path / "run"), "--config", str(cfg), "--once", "--no-record", "--json"]) == 1
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["failed_actions"] == []

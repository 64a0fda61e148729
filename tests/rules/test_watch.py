"""``tripwire watch``: rules over a run while a real writer (another thread/process) writes it."""

from __future__ import annotations

import logging

import argparse
import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire import _watch
from tripwire._watch import Watcher, watch
from tripwire import ConfigError
from tripwire.rules import Rule


def _train(out: Path, steps: int, loss_fn, delay: float = 0.0, rules=None, stop_log: list | None = None) -> None:
    with tripwire.Session(out_dir=str(out), save_interval=1, rules=rules or []) as s:
        for i in range(steps):
            d = s.step("train", i, {"loss": (loss_fn(i), "losses")})
            if d.stop:
                if stop_log is not None:
                    stop_log.append((i, d.stopped_by))
                break
            if delay:
                time.sleep(delay)


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tripwire")
    _watch.register(parser.add_subparsers())
    args = parser.parse_args(["watch", *argv])
    return args.func(args)


def test_watch_stops_a_running_training(tmp_path: Path) -> None:
    out = tmp_path / "run"
    stopped: list = []
    t = threading.Thread(target=_train, args=(out, 3000, lambda i: 2.3, 0.002), kwargs={"stop_log": stopped})
    t.start()
    try:
        cfg = {"rules": [{"name": "loss_not_decreasing", "actions": ["stop_training"]}]}
        found = watch(out, cfg, interval=0.05, timeout=60, echo=lambda f: None)
    finally:
        t.join(60)
    assert [f.rule for f in found] == ["loss_not_decreasing"] and found[0].step == 200
    assert stopped, "the in-process session did not honour the stop request"
    step, by = stopped[0]
    assert step < 2999 and by.rule == "loss_not_decreasing"
    run = tripwire.open_run(out)
    assert run.is_complete and run.status == "stopped"
    assert [f.source for f in run.findings] == ["watch"]
    lines = (out / "findings" / "watch-00000.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["rule"] == "loss_not_decreasing"


def test_watch_once_and_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    _train(out, 300, lambda i: 1.0)
    cfg = tmp_path / "rules.yaml"
    cfg.write_text("rules: [default]\n")
    assert _cli([str(out), "--config", str(cfg), "--once"]) == 1
    assert capsys.readouterr().out.startswith("[warning] loss_not_decreasing at step 200")
    # a restarted watcher does not repeat findings already written, but the run still has them: a CI
    # gate run twice over the same broken run fails twice (it exited 0 the second time)
    assert _cli([str(out), "--config", str(cfg), "--once"]) == 1
    assert capsys.readouterr().out.startswith("recorded before, by an earlier watch: [warning] loss_not_decreasing at step 200")
    assert len((out / "findings" / "watch-00000.jsonl").read_text().splitlines()) == 1
    healthy = tmp_path / "healthy"
    _train(healthy, 300, lambda i: 1.0 / (1 + i))
    # a losses-only run: the default set's gradient rules had nothing to read (not all was judged)
    assert _cli([str(healthy), "--config", str(cfg), "--once"]) == 3
    cfg.write_text("rules: [loss_not_decreasing, exploding_tensor]\n")
    assert _cli([str(healthy), "--config", str(cfg), "--once"]) == 0


def test_watch_prints_each_finding_once(tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog) -> None:
    """The default echo prints a finding on stdout; the ``log`` action (the run's default actions)
    logged it again on stderr, so ``2>&1`` showed it twice."""
    out = tmp_path / "run"
    _train(out, 300, lambda i: 1.0)
    cfg = tmp_path / "rules.yaml"
    cfg.write_text("rules: [loss_not_decreasing]\nactions: [log, record]\n")
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        assert _cli([str(out), "--config", str(cfg), "--once"]) == 1
    printed = capsys.readouterr()
    assert printed.out.count("loss_not_decreasing at step") == 1 and "loss_not_decreasing" not in printed.err
    assert not [r for r in caplog.records if "loss_not_decreasing" in r.getMessage()]
    from tripwire._watch import Watcher

    other = tmp_path / "other"
    _train(other, 300, lambda i: 1.0)
    seen: list[tripwire.Finding] = []  # a custom echo (the Python API): the log action logs as configured
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        Watcher(other, cfg, echo=seen.append).watch(once=True)
    assert [f.rule for f in seen] == ["loss_not_decreasing"]
    assert [r for r in caplog.records if "loss_not_decreasing" in r.getMessage()]


def test_watch_names_rules_the_run_cannot_feed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    _train(out, 20, lambda i: 1.0 / (1 + i))  # losses only
    cfg = tmp_path / "rules.yaml"
    cfg.write_text("rules: [loss_not_decreasing, weight_update_ratio, dead_relu]\n")
    assert _cli([str(out), "--config", str(cfg), "--once"]) == 3  # no finding, but not all was judged
    err = capsys.readouterr().err
    assert ("rule 'weight_update_ratio' had nothing to read: no tensor of the 'optimizer' collection was captured "
            "(the run holds tensors of: losses)") in err
    assert "rule 'dead_relu' had nothing to read: no tensor of the 'relu_outputs' collection was captured" in err
    assert "loss_not_decreasing" not in err
    assert Watcher(out, {"rules": ["loss_not_decreasing"]}).unfed() == {}


def test_watch_leaves_out_what_the_runs_integration_cannot_feed(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    # a run of an integration that captures no gradients (XGBoost's kinds): the default set's
    # gradient rules were left out in process, and watch leaves them out too (it advised capturing
    # gradients in the training's config, which that integration cannot do)
    out = tmp_path / "run"
    provides = ("feature_importance", "hyperparameters", "labels", "metrics", "predictions", "trees")
    with tripwire.Session(out_dir=str(out), save_interval=1, rules=["default"], framework="xgboost",
                          provides=provides) as s:
        # (as XGBoost's callback does: the loss rules read its train-logloss)
        s.bind_inputs({name: {"loss": "train-logloss"} for name in ("loss_not_decreasing", "oscillating_loss")})
        for i in range(5):
            s.step("train", i, {"train-logloss": (0.6 - 0.01 * i, "metrics")})
    assert tripwire.open_run(out).info["provides"] == sorted(provides)
    assert _cli([str(out), "--once"]) == 0
    err = capsys.readouterr().err
    assert "vanishing_gradient" not in err and "exploding_gradient" not in err
    cfg = tmp_path / "rules.yaml"
    cfg.write_text("rules: [vanishing_gradient]\n")  # named alone: refused, as the training's callback would
    assert _cli([str(out), "--config", str(cfg), "--once"]) == 2
    assert "needs 'gradients', which the xgboost integration does not capture" in capsys.readouterr().err


def test_watch_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli([str(tmp_path / "missing"), "--once"]) == 2
    assert "no tripwire run" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules: [no_such_rule]\n")
    out = tmp_path / "run"
    _train(out, 3, lambda i: 1.0)
    assert _cli([str(out), "--config", str(bad), "--once"]) == 2
    assert "unknown rule 'no_such_rule'" in capsys.readouterr().err
    assert _cli([str(out), "--interval", "0"]) == 2
    assert "--interval: got 0.0; accepted: a number of seconds > 0" in capsys.readouterr().err
    assert _cli([str(out), "--interval", "nan"]) == 2
    assert "--interval: got nan" in capsys.readouterr().err
    # a negative timeout was accepted and the watch ended at once with exit status 0
    assert _cli([str(out), "--timeout", "-1"]) == 2
    assert "--timeout: got -1.0; accepted: a number of seconds >= 0" in capsys.readouterr().err
    with pytest.raises(ConfigError, match=r"timeout: got -1; accepted: a number >= 0.0"):
        watch(out, timeout=-1)
    # a URL was waited for, for ever (there is no remote run store)
    assert _cli(["s3://team-runs/run1"]) == 2
    assert "remote stores such as s3:// are not supported" in capsys.readouterr().err


def test_watch_uses_the_runs_own_rules_and_every_worker(tmp_path: Path) -> None:
    out = tmp_path / "run"
    sessions = [tripwire.Session(out_dir=str(out), rank=r, world_size=2, save_interval=1, rules=["exploding_tensor"], write=True) for r in (0, 1)]
    for i in range(5):
        for r, s in enumerate(sessions):
            s.step("train", i, {"loss": (float("nan") if (r == 1 and i == 3) else 1.0, "losses")})
    for s in sessions:
        s.close()
    w = Watcher(out, echo=lambda f: None)
    assert w.watch(once=True) == []  # the training recorded it: not made again
    assert [(f.rule, f.worker, f.step) for f in w.earlier] == [("exploding_tensor", 1, 3)]
    import shutil

    shutil.rmtree(out / "findings")  # without the training's findings, watch finds it itself
    found = Watcher(out, echo=lambda f: None).watch(once=True)
    assert [(f.rule, f.worker, f.step) for f in found] == [("exploding_tensor", 1, 3)]


def test_watch_reports_stalled_training(tmp_path: Path) -> None:
    out = tmp_path / "run"
    s = tripwire.Session(out_dir=str(out), save_interval=1)
    s.step("train", 0, {"loss": (1.0, "losses")})
    s.flush()
    w = Watcher(out, {"rules": [{"name": "stalled_training", "threshold": 0.2}]}, echo=lambda f: None)
    assert w.poll() == []
    time.sleep(0.4)
    found = w.poll()
    assert [f.rule for f in found] == ["stalled_training"] and "no new data" in found[0].message
    s.close()


def test_watch_follows_a_writer_in_another_process(tmp_path: Path) -> None:
    out = tmp_path / "run"
    script = textwrap.dedent(f"""
        import time, tripwire
        with tripwire.Session(out_dir={str(out)!r}, save_interval=1) as s:
            for i in range(40):
                s.step("train", i, {{"loss": (float("nan") if i == 30 else 1.0 / (i + 1), "losses")}})
                time.sleep(0.01)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script])
    try:
        found = watch(out, {"rules": ["exploding_tensor"]}, interval=0.05, timeout=60, echo=lambda f: None)
    finally:
        proc.wait(60)
    assert [(f.rule, f.step) for f in found] == [("exploding_tensor", 30)]


def _rule_fn(history: Any, step: int, mode: str) -> None:
    return None


class _MyRule(Rule):
    name = "my_rule"

    def check(self, history: Any, step: int, mode: str) -> None:
        return None


def test_rules_given_as_objects_are_stored_so_that_watch_can_rebuild_them() -> None:
    """A run's config names rules given in code by what rebuilds them: a built-in rule by its name
    and changed parameters, a function or a Rule subclass by module:qualname."""
    from tripwire.rules import FunctionRule, Overfit
    from tripwire.rules._registry import build_rules, object_spec

    specs = [object_spec(_rule_fn), object_spec(FunctionRule(_rule_fn)), object_spec(Overfit(patience=4, tolerance=0.2)),
             object_spec(_MyRule())]
    assert specs[0] == specs[1] == {"name": f"{__name__}:_rule_fn"}
    assert specs[2]["name"] == "overfit" and specs[2]["patience"] == 4 and specs[2]["tolerance"] == 0.2
    assert specs[3] == {"name": f"{__name__}:_MyRule"}
    rebuilt = build_rules(specs[1:])
    assert [r.name for r in rebuilt] == ["_rule_fn", "overfit", "my_rule"]
    assert rebuilt[1].patience == 4 and rebuilt[1].tolerance == 0.2

    def local(history: Any, step: int, mode: str) -> None:
        return None

    # a FunctionRule keeps the common parameters and actions it was given (watch rebuilt it with
    # the default actions)
    spec = object_spec(FunctionRule(_rule_fn, patience=2, modes=["eval"], actions=["log", "stop_training"]))
    assert spec == {"name": f"{__name__}:_rule_fn", "patience": 2, "modes": ["eval"], "actions": ["log", "stop_training"]}
    again = build_rules([spec])[0]
    assert (again.patience, again.modes) == (2, ("eval",)) and [a.name for a in again.actions] == ["log", "stop_training"]

    with pytest.raises(ConfigError, match="defined inside a function"):
        build_rules([object_spec(local)])
    with pytest.raises(ConfigError, match=r"defined in the training script \(__main__\).*--config"):
        build_rules([{"name": "__main__:not_here"}])


class _Limited(Rule):
    """A user's rule class with parameters of its own."""

    name = "limited"

    def __init__(self, limit: float = 1.0, names: tuple[str, ...] = ("loss",), **common: Any) -> None:
        super().__init__(**common)
        self.limit, self.names = limit, tuple(names)

    def check(self, history: Any, step: int, mode: str) -> None:
        return None


def test_a_users_rule_keeps_its_parameters_name_and_requirements_in_the_runs_config(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a class instance was stored without its parameters (watch judged with limit=1.0 what the
    # training judged with 5.0), a FunctionRule without its name and requirements (watch made its
    # finding again under the function's name, and fired its actions again), and a class registered
    # in the training by its registered name (unknown where the run is read)
    from tripwire.rules import FunctionRule, Requirement, _registry
    from tripwire.rules._registry import build_rules, object_spec, register_rule

    spec = object_spec(_Limited(limit=5.0, names=("loss", "val_loss"), patience=2))
    assert spec == {"name": f"{__name__}:_Limited", "limit": 5.0, "names": ["loss", "val_loss"], "patience": 2}
    rebuilt = build_rules([spec])[0]
    assert (rebuilt.limit, rebuilt.names, rebuilt.patience) == (5.0, ("loss", "val_loss"), 2)

    named = FunctionRule(_rule_fn, name="lossy", requirements=[Requirement("gradients", ("l2",))])
    spec = object_spec(named)
    assert spec["rule_name"] == "lossy" and spec["requirements"][0]["collection"] == "gradients"
    again = build_rules([spec])[0]
    assert again.name == "lossy" and again.requirements() == named.requirements()

    registered = type("_Registered", (_Limited,), {"name": "registered_here", "__module__": __name__})
    monkeypatch.setitem(_registry._REGISTRY, "registered_here", registered)
    monkeypatch.setitem(globals(), "_Registered", registered)
    assert register_rule(registered) is registered
    spec = object_spec(registered(limit=2.0))
    assert spec == {"name": f"{__name__}:_Registered", "limit": 2.0}
    assert build_rules([spec])[0].limit == 2.0
    assert object_spec(tripwire.rules.Overfit())["name"] == "overfit"  # a built-in rule: its name
    # trial 16b: a rule instance's own actions were left out (a watch rebuilt it with the defaults:
    # no stop_training); a FunctionRule and a dict spec kept theirs
    spec = object_spec(_Limited(limit=5.0, actions=["log", "stop_training"]))
    assert spec == {"name": f"{__name__}:_Limited", "limit": 5.0, "actions": ["log", "stop_training"]}
    assert [a.name for a in build_rules([spec])[0].actions] == ["log", "stop_training"]
    spec = object_spec(tripwire.rules.LossNotDecreasing(patience=2, actions=["stop_training"]))
    assert spec == {"name": "loss_not_decreasing", "patience": 2, "actions": ["stop_training"]}


# ------------------------------------------------ findings the run already holds (session 10)
COUNTED: list[tripwire.Finding] = []


def _counted(finding: tripwire.Finding) -> None:
    """An action (``tests.rules.test_watch:_counted``) that keeps what it was called with."""
    COUNTED.append(finding)


def _big_loss(history: Any, step: int, mode: str) -> str | None:
    """A function rule: the latest loss is above 5."""
    latest = history.latest("loss", "raw", mode)
    return f"loss {latest[1]} > 5" if latest is not None and latest[1] > 5 else None


def _train_with_counted_rules(out: Path) -> None:
    """Losses 1, 1, nan, nan, 1, 9: the training's exploding_tensor (repeating) fires at steps 2
    and 3, and its actions record and call :func:`_counted`."""
    losses = [1.0, 1.0, float("nan"), float("nan"), 1.0, 9.0]
    rules = [{"name": "exploding_tensor", "repeat": True, "actions": ["record", f"{__name__}:_counted"]}]
    with tripwire.Session(out_dir=str(out), save_interval=1, rules=rules) as s:
        for i, loss in enumerate(losses):
            s.step("train", i, {"loss": (loss, "losses")})


def test_watch_exits_1_on_findings_the_training_recorded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``tripwire watch RUN --once`` over a run whose training recorded findings: they are the
    run's, printed as recorded before, exit status 1, not made again, no stop asked for them."""
    out = tmp_path / "run"
    COUNTED.clear()
    _train_with_counted_rules(out)
    assert [f.step for f in COUNTED] == [2, 3]
    COUNTED.clear()
    assert _cli([str(out), "--once", "--stop"]) == 1
    printed = capsys.readouterr().out.splitlines()
    # (trial 27c: the watch's summary line last)
    assert [line.split(": ")[0] for line in printed] == ["recorded before, by the training"] * 2 + ["tripwire watch"]
    assert "exploding_tensor at step 2 (train)" in printed[0] and "exploding_tensor at step 3 (train)" in printed[1]
    assert printed[2].endswith(": 2 findings (2 recorded before); exit status 1")
    assert not (out / "findings" / "watch-00000.jsonl").exists()  # nothing made again
    assert tripwire.open_run(out).stop_requests() == []  # --stop: they were acted on when recorded
    assert COUNTED == []
    # the rules watched are those of --config: the run's exploding_tensor findings do not count
    cfg = tmp_path / "rules.yaml"
    cfg.write_text("rules: [loss_not_decreasing]\n")
    assert _cli([str(out), "--config", str(cfg), "--once"]) == 0
    printed = capsys.readouterr().out  # (trial 27c: the summary line alone, where it printed nothing)
    assert "exploding_tensor" not in printed and printed.endswith(": no finding; exit status 0\n")
    assert len(printed.splitlines()) == 1


def test_replaying_a_run_does_not_fire_its_actions_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``tripwire watch RUN`` (the run's own rules with their actions) re-sent a notification for
    each finding the training had recorded; a rule new to the run still acts on what it finds."""
    out = tmp_path / "run"
    COUNTED.clear()
    _train_with_counted_rules(out)
    COUNTED.clear()
    w = Watcher(out, echo=lambda f: None)
    assert w.watch(once=True) == []
    assert COUNTED == [] and [f.step for f in w.earlier] == [2, 3]
    cfg = tmp_path / "rules.yaml"
    cfg.write_text(f"rules: [{{name: '{__name__}:_big_loss', actions: ['{__name__}:_counted']}}]\n")
    assert _cli([str(out), "--config", str(cfg), "--once"]) == 1
    assert [(f.rule, f.step, f.source) for f in COUNTED] == [("_big_loss", 5, "watch")]
    assert capsys.readouterr().out.startswith("[warning] _big_loss at step 5 (train): loss 9.0 > 5")
    assert [f.source for f in tripwire.open_run(out).findings] == ["in-process", "in-process", "watch"]


def test_a_finding_recorded_while_watching_is_not_made_again(tmp_path: Path) -> None:
    """While the training runs the watched rule itself, watch does not make its finding a second
    time nor fire its actions again; ``--stop`` still asks the training to stop for it."""
    out = tmp_path / "run"
    COUNTED.clear()
    rules = [{"name": "exploding_tensor", "actions": ["record", f"{__name__}:_counted"]}]
    s = tripwire.Session(out_dir=str(out), save_interval=1, rules=rules)
    s.step("train", 0, {"loss": (1.0, "losses")})
    s.flush()
    w = Watcher(out, stop=True, echo=lambda f: None)
    assert w.poll() == [] and w.earlier == []
    s.step("train", 1, {"loss": (float("nan"), "losses")})
    s.flush()
    assert w.poll() == []
    assert [(f.rule, f.step, f.source) for f in w.recorded] == [("exploding_tensor", 1, "in-process")]
    assert len(COUNTED) == 1  # the training's own call only
    assert w.stop_requested is w.recorded[0]
    assert tripwire.open_run(out).stop_requests()[0]["finding"]["step"] == 1
    s.close()


def test_watch_names_reductions_the_run_did_not_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A rule whose reduction the run lacks (tensor_variance reads ``variance``) was skipped
    silently (exit status 0, no output); watch names it, with what the run stored."""
    import numpy as np

    out = tmp_path / "run"
    cfg = {"save": {"interval": 1}, "collections": {"weights": {"reductions": ["l2", "std"]}, "losses": None}}
    with tripwire.Session({**cfg, "out_dir": str(out)}) as s:
        for i in range(3):
            s.step("train", i, {"fc1.weight": (np.full(4, 0.5 + i), "weights"), "loss": (1.0, "losses")})
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules: [{name: tensor_variance, collection: weights, max_variance: 1.0e-6}, loss_not_decreasing,\n"
                     "        {name: unchanged_tensor, collection: weights}]\n")
    assert _cli([str(out), "--config", str(rules), "--once"]) == 3  # tensor_variance judged nothing
    err = capsys.readouterr().err
    assert ("tripwire watch: rule 'tensor_variance' had nothing to read in 'weights': this run stored no 'variance' "
            "of it (it stored: l2, std); add it to collections.weights.reductions in the training's config") in err
    assert ("tripwire watch: rule 'unchanged_tensor' read only part of what it needs in 'weights': this run stored "
            "no 'mean' of it (it stored: l2, std)") in err
    assert "loss_not_decreasing" not in err
    # a training that ran the rule stored what it reads (the session adds it): nothing to say
    fed = tmp_path / "fed"
    with tripwire.Session({**cfg, "out_dir": str(fed), "rules": [{"name": "tensor_variance", "collection": "weights",
                                                                 "max_variance": 1.0e-6, "actions": ["record"]}]}) as s:
        for i in range(3):
            s.step("train", i, {"fc1.weight": (np.full(4, 0.5), "weights"), "loss": (1.0, "losses")})
    fed_rules = {"rules": [{"name": "tensor_variance", "collection": "weights", "max_variance": 1.0e-6}]}
    assert Watcher(fed, fed_rules).unstored() == []


def test_a_rule_named_in_yaml_by_its_registered_name_is_recorded_by_module_and_qualname(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from tripwire.rules import _registry

    registered = type("_RegisteredByName", (_Limited,), {"name": "limited_by_name", "__module__": __name__})
    monkeypatch.setitem(_registry._REGISTRY, "limited_by_name", registered)
    monkeypatch.setitem(globals(), "_RegisteredByName", registered)
    config = tripwire.load_config({"rules": [{"name": "limited_by_name", "limit": 3.0}, "overfit"]})
    rules = config.to_dict()["rules"]
    assert rules == [{"name": f"{__name__}:_RegisteredByName", "limit": 3.0}, {"name": "overfit"}]
    monkeypatch.delitem(_registry._REGISTRY, "limited_by_name")  # (the reading process never registered it)
    rebuilt = _registry.build_rules(rules)
    assert rebuilt[0].name == "limited_by_name" and rebuilt[0].limit == 3.0


# ------------------------------------------------ not judged, ended without closing (session 13)
def _raises(history: Any, step: int, mode: str) -> None:
    raise ZeroDivisionError("bug")


def _fires_at_3(history: Any, step: int, mode: str) -> str | None:
    return "fires at step 3" if step == 3 else None


def test_a_rule_that_raised_in_a_watch_is_judged_again_by_the_next_one(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # its error record held the rule for good (a fixed rule of the same name was skipped, exit 0),
    # and a rule that raised left the gate green (exit 0)
    out = tmp_path / "run"
    _train(out, 6, lambda i: 1.0)
    buggy, fixed = tmp_path / "buggy.yaml", tmp_path / "fixed.yaml"
    buggy.write_text(f"rules: [{{name: '{__name__}:_raises', rule_name: r}}]\n")
    fixed.write_text(f"rules: [{{name: '{__name__}:_fires_at_3', rule_name: r}}]\n")
    assert _cli([str(out), "--config", str(buggy), "--once"]) == 3
    assert "tripwire watch: 'r' raised: not judged" in capsys.readouterr().err
    assert _cli([str(out), "--config", str(fixed), "--once"]) == 1
    assert "[warning] r at step 3 (train): fires at step 3" in capsys.readouterr().out



def test_a_rule_that_raises_again_in_the_next_watch_is_recorded_once(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # trial 23d: each watch of a run whose rule raises appended another copy of the same error record
    out = tmp_path / "run"
    _train(out, 6, lambda i: 1.0)
    buggy = tmp_path / "buggy.yaml"
    buggy.write_text(f"rules: [{{name: '{__name__}:_raises', rule_name: r}}]\n")
    for _ in range(3):
        assert _cli([str(out), "--config", str(buggy), "--once"]) == 3
        assert "tripwire watch: 'r' raised: not judged" in capsys.readouterr().err  # (said each time)
    errors = [f for f in tripwire.open_run(out).findings if f.kind == "error"]
    assert [(f.rule, f.source) for f in errors] == [("r", "watch")]


def test_watch_ends_when_the_training_died_without_closing_the_run(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # a watch of a run whose training was killed waited for ever (the run stays "running")
    out = tmp_path / "run"
    script = textwrap.dedent(f"""
        import os, signal, tripwire
        s = tripwire.Session(out_dir={str(out)!r}, save_interval=1)
        for i in range(5):
            s.step("train", i, {{"loss": (1.0, "losses")}})
        s.flush()
        print("written", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    subprocess.run([sys.executable, "-c", script], timeout=60)
    run = tripwire.open_run(out)
    assert run.status == "running" and run.abandoned_workers() == [0]
    started = time.monotonic()
    # (exit 3: a gate must not pass a training that did not finish; it exited 0, trial 18a)
    assert _cli([str(out), "--config", str(_rules_yaml(tmp_path)), "--interval", "0.05", "--timeout", "60"]) == 3
    assert time.monotonic() - started < 30
    assert "worker 0 ended without closing the run (killed, out of memory, a crash)" in capsys.readouterr().err
    assert _cli([str(out), "--config", str(_rules_yaml(tmp_path)), "--once"]) == 3
    assert "worker 0 ended without closing the run (killed, out of memory, a crash)" in capsys.readouterr().err
    # a live writer holds its shard; a closed run has its end marker
    live = tripwire.Session(out_dir=str(tmp_path / "live"), save_interval=1)
    live.step("train", 0, {"loss": (1.0, "losses")})
    live.flush()
    assert tripwire.open_run(tmp_path / "live").abandoned_workers() == []
    assert _cli([str(tmp_path / "live"), "--config", str(_rules_yaml(tmp_path)), "--once"]) == 3
    assert "the run has not ended (--once): judged what was written by now" in capsys.readouterr().err
    live.close()
    assert tripwire.open_run(tmp_path / "live").abandoned_workers() == []
    assert _cli([str(tmp_path / "live"), "--config", str(_rules_yaml(tmp_path)), "--once"]) == 0
    failed = tripwire.Session(out_dir=str(tmp_path / "failed"), save_interval=1)
    failed.step("train", 0, {"loss": (1.0, "losses")})
    failed.close("failed")
    assert _cli([str(tmp_path / "failed"), "--config", str(_rules_yaml(tmp_path)), "--once"]) == 3
    assert "the training failed (the run's status is failed)" in capsys.readouterr().err


def test_a_watch_whose_timeout_runs_out_before_the_run_ends_exits_3(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    live = tripwire.Session(out_dir=str(tmp_path / "live"), save_interval=1)
    live.step("train", 0, {"loss": (1.0, "losses")})
    live.flush()
    try:
        assert _cli([str(tmp_path / "live"), "--config", str(_rules_yaml(tmp_path)), "--interval", "0.05",
                     "--timeout", "0.3"]) == 3
    finally:
        live.close()
    assert "--timeout=0.3 s ran out before the run ended" in capsys.readouterr().err


def _rules_yaml(tmp_path: Path) -> Path:
    cfg = tmp_path / "rules.yaml"
    cfg.write_text("rules: [exploding_tensor]\n")
    return cfg


def test_a_rule_that_reads_any_of_its_collections_is_fed_by_one_of_them(tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    # trial 19a: all_zero (weights and gradients) on a run of gradients only judged them (and fired),
    # yet close said it "never judged" and `tripwire watch --once` exited 3 on the healthy twin
    out = tmp_path / "run"
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        with tripwire.Session(out_dir=str(out), rules=["all_zero"], actions=["record"], save_interval=1) as s:
            for i in range(5):
                s.step("train", i, {"loss": (1.0 / (i + 1), "losses"), "gradients/fc.weight": (np.ones(4) / (i + 1), "gradients")})
    assert "all_zero" not in caplog.text
    cfg = tmp_path / "rules.yaml"
    cfg.write_text("rules: [all_zero]\n")
    assert _cli([str(out), "--config", str(cfg), "--once"]) == 0
    # one that names only a collection the run does not hold is still said to have read nothing
    cfg.write_text("rules: [{name: exploding_tensor, collections: [weights]}]\n")
    assert _cli([str(out), "--config", str(cfg), "--once"]) == 3

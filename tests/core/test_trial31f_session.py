"""Trial 31f: F5, a checkpoint (``state_dict()``) in the middle of a save interval was an evaluation
more, and a ``patience: 2`` loss rule fired on two high losses ten steps apart, where it did not
without the checkpoint, nor in ``tripwire watch``; F8, a team's registered rule names could not be
made known to a config (``imports:``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import tripwire
from tripwire import ConfigError, FunctionRule, Requirement

LOSSES = [1.0] * 21
LOSSES[6] = LOSSES[10] = 9.0


def _over5(calls: list[int]) -> Any:
    def over5(history: Any, step: int, mode: str) -> str | None:
        calls.append(step)
        value = history.value("loss", "raw", step, mode)
        return f"loss {value}" if value is not None and value > 5 else None

    return over5


def _train(out: Path | None, checkpoint_after: int | None, losses: list[float] = LOSSES,
           resume: bool = False) -> tuple[list[int], list[tuple[str, int]], Any]:
    """A hand-written loop, saving every 10 steps (the losses of every step kept between), with a
    patience-2 rule that reads the loss; a checkpoint (state_dict) after ``checkpoint_after``; with
    ``resume``, the training goes on in a new session loaded from it."""
    calls: list[int] = []
    rule = FunctionRule(_over5(calls), name="over5", requirements=[Requirement("losses", ("raw",))], patience=2)
    kw: dict[str, Any] = {"out_dir": str(out)} if out is not None else {"write": False}
    session = tripwire.Session(rules=[rule], actions=["record"], save_interval=10, **kw)
    state = None
    for step, loss in enumerate(losses):
        plan = session.begin_step("train", step)
        if plan.keeps("losses"):
            plan.add("loss", loss, "losses")
        session.end_step()
        if step == checkpoint_after:
            state = session.state_dict()
            if resume:  # (the first process ends without closing: killed, a resume from the checkpoint)
                session = tripwire.Session(rules=[FunctionRule(_over5(calls), name="over5", patience=2,
                                                               requirements=[Requirement("losses", ("raw",))])],
                                           actions=["record"], save_interval=10, **kw)
                session.load_state_dict(state)
    session.close()
    return calls, [(f.rule, f.step) for f in session.findings], state


WATCHED = '''
def over5(history, step, mode):
    value = history.value("loss", "raw", step, mode)
    return f"loss {value}" if value is not None and value > 5 else None
'''


def test_a_checkpoint_mid_interval_changes_nothing_the_rules_judge(tmp_path: Path, monkeypatch: Any) -> None:
    (tmp_path / "watched31f.py").write_text(WATCHED)
    monkeypatch.syspath_prepend(str(tmp_path))
    straight = _train(tmp_path / "straight", None)
    assert straight[:2] == ([0, 10, 20], [])
    for after in (3, 6, 9):
        calls, found, state = _train(tmp_path / f"ckpt{after}", after)
        assert (calls, found) == ([0, 10, 20], []), after
        # the checkpoint holds the losses it wrote before their save step, to judge them there
        assert state["written_early"] == {"step": after, "collections": ["losses"], "finite": True, "count": after}
        # and the run holds them: a checkpoint never holds a loss the run lacks
        run = tripwire.open_run(tmp_path / f"ckpt{after}")
        assert run.series("loss", "raw", "train")[0].tolist() == list(range(21))
        watched = tripwire.watch(tmp_path / f"ckpt{after}", {"rules": [
            {"name": "watched31f:over5", "patience": 2,
             "requirements": [{"collection": "losses", "reductions": ["raw"]}]}]}, once=True, record=False)
        assert [(f.rule, f.step) for f in watched] == found
    # two high losses at two save steps in a row still fire, checkpoint or not
    adjacent = [1.0] * 21
    adjacent[10] = adjacent[20] = 9.0
    assert _train(None, None, adjacent)[1] == [("over5", 20)] == _train(None, 6, adjacent)[1]


def test_a_session_resumed_from_a_mid_interval_checkpoint_judges_as_the_training_straight_through() -> None:
    calls, found, _ = _train(None, 6, resume=True)
    assert (calls, found) == ([0, 10, 20], [])
    # the losses the checkpoint wrote are judged at the resumed training's end where no save step came
    calls, found, _ = _train(None, 6, LOSSES[:7], resume=True)
    assert calls == [0, 6] and found == []


def test_a_nan_loss_written_by_a_checkpoint_is_judged_where_it_would_have_been() -> None:
    # a NaN loss kept before a validation is judged as a train step before the validation's record,
    # checkpoint or not (exploding_tensor, at the last kept train step)
    def run(checkpoint: bool) -> list[tuple[str, int, str]]:
        s = tripwire.Session(rules=["exploding_tensor"], actions=["record"], write=False, save_interval=10)
        for step in range(8):
            plan = s.begin_step("train", step)
            plan.add("loss", float("nan") if step == 4 else 1.0, "losses")
            s.end_step()
            if checkpoint and step == 5:
                s.state_dict()
                assert s.findings == []  # (not judged at the checkpoint)
        s.step("eval", 0, {"val_loss": (1.0, "losses")})
        s.close()
        return [(f.rule, f.step, f.mode) for f in s.findings]

    assert run(False) == run(True) == [("exploding_tensor", 4, "train")]


# ------------------------------------------------------------------------------------------- F8
TEAM = '''
import tripwire
from tripwire.rules import Rule, Requirement, register_rule


@register_rule
class LossJump31f(Rule):
    """The loss above 5."""

    name = "loss_jump_31f_{tag}"

    def requirements(self):
        return [Requirement("losses", ("raw",))]

    def check(self, history, step, mode):
        value = history.value("loss", "raw", step, mode)
        return self.finding(step, mode, f"loss {{value}}") if value is not None and value > 5 else None
'''


@pytest.fixture
def team(tmp_path: Path, monkeypatch: Any) -> tuple[str, str]:
    tag = tmp_path.name.replace("-", "_")
    module = f"team31f_imports_{tag}"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(TEAM.format(tag=tag)))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    yield module, f"loss_jump_31f_{tag}"
    sys.modules.pop(module, None)


def test_imports_makes_a_team_s_registered_rule_names_known(team: tuple[str, str], tmp_path: Path) -> None:
    module, rule = team
    with pytest.raises(ConfigError, match=rf"unknown rule '{rule}'"):
        tripwire.Session(rules=[rule], write=False)
    config = tripwire.load_config({"imports": [module], "rules": [{"name": rule, "patience": 2}]})
    assert config.imports == (module,) and config.to_dict()["imports"] == [module]
    assert f"imports=['{module}']" in repr(config)
    session = tripwire.Session(config, write=False, save_interval=1, actions=["record"])
    for step, loss in enumerate([9.0, 9.0, 1.0]):
        session.step("train", step, {"loss": (loss, "losses")})
    session.close()
    assert [(f.rule, f.step) for f in session.findings] == [(rule, 1)]
    assert tripwire.load_config({"imports": module, "rules": [rule]}).imports == (module,)  # (one: a list of one)
    assert tripwire.load_config(tripwire.load_config({"imports": [module], "rules": [rule]}).to_dict()).imports == (module,)
    # tripwire validate of a file naming the rule by its registered name
    (tmp_path / "team.yaml").write_text(f"imports: [{module}]\nrules: [{rule}]\n")
    done = subprocess.run([sys.executable, "-m", "tripwire", "validate", "team.yaml"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    assert done.returncode == 0 and "team.yaml: valid" in done.stdout, done.stderr


def test_imports_errors_name_the_key_the_module_and_the_error(team: tuple[str, str]) -> None:
    with pytest.raises(ConfigError, match=r"^imports\[1\]: cannot import module 'no_such_team_31f': ModuleNotFoundError: "
                                          r"No module named 'no_such_team_31f' \(it imports from the current directory and "
                                          r"PYTHONPATH\)"):
        tripwire.load_config({"imports": [team[0], "no_such_team_31f"], "rules": ["default"]})
    with pytest.raises(ConfigError, match=r"^imports\[0\]: got 'teamrules:LossJump' \('teamrules' is its module"):
        tripwire.load_config({"imports": ["teamrules:LossJump"]})
    with pytest.raises(ConfigError, match=r"^imports: got 5; accepted: a module name or a list of them"):
        tripwire.load_config({"imports": 5})


def test_imports_a_module_whose_import_raises(tmp_path: Path, monkeypatch: Any) -> None:
    (tmp_path / "team31f_raises.py").write_text("raise RuntimeError('no GPU here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises(ConfigError, match=r"^imports\[0\]: importing module 'team31f_raises' raised RuntimeError: "
                                              r"no GPU here"):
            tripwire.load_config({"imports": ["team31f_raises"], "rules": ["default"]})
    finally:
        sys.modules.pop("team31f_raises", None)

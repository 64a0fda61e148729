"""Trial 29j F6 and F8: custom actions.

F6: an action mapping's other keys (``{name: 'team:write_file', path: team.jsonl}``) are passed to the
function as keywords; a key it does not take, or a parameter it needs and is not given, failed only at
the first finding (TypeError, the alert lost). They are checked against the signature when the action is
resolved: ``tripwire validate``, a session being made.

F8: a custom action got the finding alone; one with a ``run`` parameter is given the run's context
(``RunContext``: run directory, run_id, host, pid, worker, world size, framework), the facts ``notify``
sends, so that two runs posting to one channel can be told apart.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

import tripwire
from tripwire import ConfigError
from tripwire import _actions as A
from tripwire._actions import RunContext, bind_run, resolve_action
from tripwire._cli import main
from tripwire._watch import Watcher

CALLS: list[tuple[tripwire.Finding, dict[str, Any]]] = []


def write_file(finding: tripwire.Finding) -> None:
    """An action that takes the finding alone (the trial's ``teamrules:write_file``)."""
    CALLS.append((finding, {}))


def post(finding: tripwire.Finding, channel: str = "ml-alerts", *, urgent: bool = False) -> None:
    """An action with optional parameters."""
    CALLS.append((finding, {"channel": channel, "urgent": urgent}))


def page(finding: tripwire.Finding, *, team: str) -> None:
    """An action with a required keyword-only parameter."""
    CALLS.append((finding, {"team": team}))


def webhook(finding: tripwire.Finding, run: RunContext | None = None, channel: str = "x") -> None:
    """An action that takes the run's context."""
    CALLS.append((finding, {"run": run, "channel": channel}))


def always(history: Any, step: int, mode: str) -> str | None:
    """A rule that fires at step 0."""
    return "boom" if step == 0 else None


def loss_above_5(history: Any, step: int, mode: str) -> str | None:
    """A rule: the latest loss is above 5."""
    latest = history.latest("loss", "raw", mode)
    return f"loss {latest[1]} > 5" if latest is not None and latest[1] > 5 else None


@pytest.fixture(autouse=True)
def _clear() -> None:
    CALLS.clear()


def _config(tmp_path: Path, action: str) -> Path:
    cfg = tmp_path / "rules.yaml"
    cfg.write_text(f"rules:\n  - name: '{__name__}:always'\n    actions: [{action}]\n")
    return cfg


# ------------------------------------------------------------------------------------------- F6
def test_validate_refuses_a_parameter_the_action_does_not_take(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _config(tmp_path, f"{{name: '{__name__}:write_file', path: team.jsonl}}")
    assert main(["validate", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert (f"rules[0].actions[0].path: action '{__name__}:write_file' takes no parameter 'path': write_file(finding: "
            f"'tripwire.Finding') has no parameter 'path', and the action mapping's other keys are passed to it as "
            f"keywords (write_file(finding, path=...)) (accepted: none besides the finding)") in err
    with pytest.raises(ConfigError, match=r"rules\[0\]\.actions\[0\]\.path: action .*write_file' takes no "
                                          r"parameter 'path'"):
        tripwire.Session(str(cfg), write=False)  # the training refuses it before its first step too


def test_a_misspelled_parameter_is_named_with_what_the_action_accepts(tmp_path: Path) -> None:
    spec = tripwire.ActionSpec(f"{__name__}:post", {"chanel": "ml"})
    with pytest.raises(ConfigError, match=r"^actions\[0\]\.chanel: action '.*:post' takes no parameter 'chanel': .*"
                                          r"\(post\(finding, chanel=\.\.\.\)\); did you mean 'channel'\? "
                                          r"\(accepted: channel, urgent\)$"):
        resolve_action(spec, "actions[0]")


def test_a_required_keyword_not_given_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^actions\[0\]: action '.*:page' needs the parameter 'team': "
                                          r"page\(finding.*\*, team: 'str'\).*give it there, \{name: '.*:page', "
                                          r"team: \.\.\.\}$"):
        tripwire.Session({"rules": [f"{__name__}:always"], "actions": [f"{__name__}:page"]}, write=False)


def test_a_callable_that_cannot_take_the_finding_is_refused() -> None:
    def no_finding(*, channel: str = "x") -> None:
        pass

    with pytest.raises(ConfigError, match=r"^actions\[0\]: action 'no_finding' cannot be called with the finding: "
                                          r".*no_finding\(\*, channel: 'str' = 'x'\) takes no positional parameter"):
        tripwire.Session(rules=[f"{__name__}:always"], actions=[no_finding], write=False)


def test_run_is_not_a_parameter_to_give_where_the_action_takes_the_context() -> None:
    with pytest.raises(ConfigError, match=r"^actions\.run: action '.*:webhook': 'run' is the run's context .*"
                                          r"accepted: channel$"):
        resolve_action({"name": f"{__name__}:webhook", "run": "mine"})


def test_given_parameters_reach_the_action_as_keywords(tmp_path: Path) -> None:
    cfg = _config(tmp_path, f"{{name: '{__name__}:post', channel: team-a, urgent: true}}, "
                            f"{{name: '{__name__}:page', team: infra}}")
    assert main(["validate", str(cfg)]) == 0
    with tripwire.Session(str(cfg), write=False) as s:
        s.step("train", 0, {"loss": (1.0, "losses")})
    assert [kw for _, kw in CALLS] == [{"channel": "team-a", "urgent": True}, {"team": "infra"}]
    assert resolve_action(write_file).fn is write_file  # (a function of the finding alone is called as it is)


# ------------------------------------------------------------------------------------------- F8
def test_an_action_with_a_run_parameter_gets_the_bound_context_with_the_findings_worker() -> None:
    action = resolve_action({"name": f"{__name__}:webhook", "channel": "c"})
    plain = resolve_action(f"{__name__}:post")
    assert action.wants_run and isinstance(action.fn, A.CustomCall)
    assert not plain.wants_run and plain.fn is post  # (no run parameter: called with the finding as before)
    finding = tripwire.Finding("r", 3, "train", "boom", worker=1)
    action.fire(finding)  # fired by hand: nothing bound a context
    assert CALLS[-1][1] == {"run": None, "channel": "c"}
    context = RunContext(run="/runs/a", run_id="abc", host="h", pid=7, world_size=2, framework="lightning")
    bind_run([action, plain], context)
    action.fire(finding)
    plain.fire(finding)
    got = CALLS[-2][1]["run"]
    assert got == dataclasses.replace(context, worker=1) and got.out_dir == "/runs/a"
    assert CALLS[-1][1] == {"channel": "ml-alerts", "urgent": False}
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.run_id = "other"  # type: ignore[misc]
    assert RunContext(run="none (this session writes no run)").out_dir is None


def test_watched_run_context_names_the_watched_run_and_its_training(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with tripwire.Session(out_dir=str(out), rules=[]) as s:
        s.step("train", 0, {"loss": (1.0, "losses")})
    run = tripwire.open_run(out)
    ctx = A.watched_run_context(run, 0)
    assert ctx == RunContext(run=str(out.resolve()), run_id=run.run_id, host=socket.gethostname(), pid=os.getpid(),
                             world_size=1, framework="python")
    assert ctx.run_id and ctx.out_dir == str(out.resolve())


def test_two_sessions_give_their_actions_different_contexts(tmp_path: Path) -> None:
    for name in ("a", "b"):
        with tripwire.Session(rules=[tripwire.FunctionRule(always, name="team_alert")], actions=[webhook],
                              out_dir=str(tmp_path / name), framework="python") as s:
            s.step("train", 0, {"loss": (1.0, "losses")})
    (fa, a), (fb, b) = [(f, kw["run"]) for f, kw in CALLS]
    assert (fa.rule, fb.rule) == ("team_alert", "team_alert")
    assert isinstance(a, RunContext) and isinstance(b, RunContext)
    assert (a.out_dir, b.out_dir) == (str((tmp_path / "a").resolve()), str((tmp_path / "b").resolve()))
    assert a.run_id == tripwire.open_run(tmp_path / "a").run_id != b.run_id
    assert (a.host, a.pid, a.worker, a.world_size, a.framework) == (socket.gethostname(), os.getpid(), 0, 1, "python")


def test_an_action_of_tripwire_watch_gets_the_watched_runs_context(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with tripwire.Session(out_dir=str(out), save_interval=1, rules=[]) as s:
        for i, loss in enumerate([1.0, 9.0]):
            s.step("train", i, {"loss": (loss, "losses")})
    rules = [{"name": f"{__name__}:loss_above_5", "actions": [f"{__name__}:webhook"]}]
    found = Watcher(out, {"rules": rules}, echo=lambda f: None).watch(once=True)
    assert [(f.step, f.source) for f in found] == [(1, "watch")]
    [(finding, kw)] = CALLS
    assert kw["run"] == dataclasses.replace(A.watched_run_context(tripwire.open_run(out), 0), worker=0)


def test_run_context_as_a_dict_holds_its_out_dir() -> None:
    """Trial 37c: docs/config.md lists out_dir among the RunContext's fields and says
    ``dataclasses.asdict(run)`` makes a dict of it; out_dir was a property, not in the dict."""
    import dataclasses

    ctx = tripwire.RunContext("/runs/a", run_id="r1", worker=0)
    assert dataclasses.asdict(ctx)["out_dir"] == "/runs/a"
    assert dataclasses.asdict(dataclasses.replace(ctx, run="none (this session writes no run)"))["out_dir"] is None


def test_a_mapping_naming_a_callable_says_how_to_give_its_keywords() -> None:
    """Trial 37c: ``{"name": my_fn, "tag": "y"}`` was "accepted: a string", with no word on how a
    callable takes keywords; functools.partial, which the message names, works."""
    import functools

    def my_fn(finding, tag="x"):  # type: ignore[no-untyped-def]
        return None

    with pytest.raises(tripwire.ConfigError, match=r"rules\[0\]\.actions\[0\]\.name: got the callable .*"
                                                   r"functools\.partial\(my_fn, tag='y'\)"):
        tripwire.Session(rules=[{"name": "exploding_tensor", "actions": [{"name": my_fn, "tag": "y"}]}], write=False)
    tripwire.Session(rules=[{"name": "exploding_tensor", "actions": [functools.partial(my_fn, tag="y")]}],
                     write=False).close()

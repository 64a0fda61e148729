"""Trial 26f (and 26c): ``tripwire validate`` imports ``module:attribute`` references as a training
started from the current directory does, names every error of an action mapping, and suggests only
rules for a rule reference's missing attribute."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire._cli import main

_RULE = "def too_high(history, step, mode):\n    return None\n"
_ACTION = "def page(finding):\n    pass\n"


def _beside_a_config(tmp_path: Path, module: str, yaml: str, source: str = _RULE) -> Path:
    """``tmp_path/cfg/rules.yaml`` and the module it names, ``tmp_path/cfg/<module>.py``, beside it."""
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / f"{module}.py").write_text(source)
    cfg = tmp_path / "cfg" / "rules.yaml"
    cfg.write_text(yaml)
    return cfg


@pytest.fixture
def clean_imports(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """main() puts the current directory (and, for watch, the config's folder) on sys.path; the modules
    a test imports are forgotten after it."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield
    # (not a copy of sys.modules put in its place: the import system keeps its own, and a module first
    # imported by the test, multiprocessing by a session's start, was then half-imported)
    for name in set(sys.modules) - before:
        if str(getattr(sys.modules[name], "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]


def test_validate_refuses_a_rule_module_beside_the_config_as_the_training_does(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, clean_imports: None) -> None:
    # trial 26f finding 1: validate said "valid" (it searched the YAML's folder) and the callback made
    # from the same directory raised "cannot import module 'mypackage.rules'"
    cfg = _beside_a_config(tmp_path, "rules26f_beside", "rules: [rules26f_beside:too_high]\n")
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "cfg/rules.yaml"]) == 2
    err = capsys.readouterr().err
    folder = str(tmp_path / "cfg")
    assert "rules[0]: cannot import module 'rules26f_beside' for 'rules26f_beside:too_high'" in err
    assert f"'rules26f_beside' lies in the config's folder {folder}, which a training started from this " \
           f"directory does not search: start the training (and validate) from {folder}, or set " \
           f"PYTHONPATH={folder}" in err
    with pytest.raises(tripwire.ConfigError, match="cannot import module 'rules26f_beside'"):
        tripwire.Session(str(cfg.relative_to(tmp_path)), out_dir=str(tmp_path / "run"))  # the training agrees
    assert main(["validate", "cfg/rules.yaml", "--framework", "xgboost"]) == 2  # (as that callback would)
    assert "lies in the config's folder" in capsys.readouterr().err


def test_validate_passes_the_module_where_the_training_would_import_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, clean_imports: None) -> None:
    _beside_a_config(tmp_path, "rules26f_there", "rules: [rules26f_there:too_high]\n")
    monkeypatch.chdir(tmp_path / "cfg")  # started from the config's folder
    assert main(["validate", "rules.yaml"]) == 0
    assert "rules.yaml: valid" in capsys.readouterr().out
    monkeypatch.chdir(tmp_path)  # or with the folder on PYTHONPATH
    sys.modules.pop("rules26f_there", None)
    sys.path.insert(0, str(tmp_path / "cfg"))
    assert main(["validate", "cfg/rules.yaml"]) == 0


def test_validate_names_the_config_folder_for_an_action_module_too(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, clean_imports: None) -> None:
    _beside_a_config(tmp_path, "actions26f_beside", "actions: [log, actions26f_beside:page]\n", _ACTION)
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "cfg/rules.yaml"]) == 2
    err = capsys.readouterr().err
    assert "cannot load action 'actions26f_beside:page'" in err and "lies in the config's folder" in err


def test_validate_says_nothing_of_the_folder_where_the_module_is_nowhere(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, clean_imports: None) -> None:
    _beside_a_config(tmp_path, "unrelated26f", "rules: [nowhere26f:too_high]\n")
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "cfg/rules.yaml"]) == 2
    err = capsys.readouterr().err
    assert "No module named 'nowhere26f'" in err and "config's folder" not in err


def test_watch_with_a_config_still_imports_rules_beside_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, clean_imports: None) -> None:
    # watch runs the rules itself: the config's folder stays on its sys.path (as tripwire tune's)
    _beside_a_config(tmp_path, "rules26f_watch", "rules: [rules26f_watch:too_high]\n")
    with tripwire.Session({"out_dir": str(tmp_path / "run"), "save": {"interval": 1}}) as s:
        for step in range(3):
            s.step("train", step, {"loss": (1.0 / (step + 1), "losses")})
    monkeypatch.chdir(tmp_path)
    assert main(["watch", "run", "--config", "cfg/rules.yaml", "--once"]) == 0, capsys.readouterr().err


# ---------------------------------------------------------------- trial 26c F7: an action's every error
def _errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], yaml: str) -> list[str]:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(yaml)
    assert main(["validate", str(cfg)]) == 2
    err = capsys.readouterr().err
    return [line.strip() for line in err.splitlines()[1:]] if "errors in" in err else [err.split("error: ", 1)[1].strip()]


_ARN = "arn:aws:sns:us-east-1:123456789012:t"


def test_validate_names_every_error_of_one_action_mapping(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # trial 26c F7 (bad/d03.yaml): only regionn was named; timeout: 0 once regionn was fixed
    errors = _errors(tmp_path, capsys, f'actions: [{{name: notify, topic_arn: "{_ARN}", timeout: 0, regionn: x}}]\n')
    assert errors == ["actions[0].regionn: unknown key 'regionn'; did you mean 'region'? (accepted keys: "
                      "endpoint_url, region, subject, timeout, topic_arn)",
                      "actions[0].timeout: got 0; accepted: a number in (0.0, 3600.0]"]


def test_validate_names_the_errors_beside_a_bad_or_missing_required_parameter(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # bad/b15_notify.yaml: a bad ARN hid timeout: 0
    errors = _errors(tmp_path, capsys, 'actions: [{name: notify, topic_arn: "not-an-arn", timeout: 0}]\n')
    assert errors == ["actions[0].topic_arn: got 'not-an-arn'; accepted: an SNS topic ARN, arn:aws:sns:REGION:ACCOUNT:NAME",
                      "actions[0].timeout: got 0; accepted: a number in (0.0, 3600.0]"]
    errors = _errors(tmp_path, capsys, "actions: [{name: notify, timeout: 0}]\n")
    assert errors == ["actions[0]: the notify action needs 'topic_arn', got {'timeout': 0}; accepted: topic_arn, an SNS "
                      "topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME), with endpoint_url, region, subject and timeout "
                      "optional",
                      "actions[0].timeout: got 0; accepted: a number in (0.0, 3600.0]"]


def test_validate_narrows_actions_nested_one_alone_and_a_rules_own(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nested = _errors(tmp_path, capsys, 'actions: [log, {notify: {topic_arn: "x", timeout: 0}}]\n')
    assert nested == ["actions[1].topic_arn: got 'x'; accepted: an SNS topic ARN, arn:aws:sns:REGION:ACCOUNT:NAME",
                      "actions[1].timeout: got 0; accepted: a number in (0.0, 3600.0]"]
    # one action, not in a list: its keys were checked as actions of their own ("needs a 'name' key" x3)
    alone = _errors(tmp_path, capsys, f'actions: {{name: notify, topic_arn: "{_ARN}", timeout: 0, regionn: x}}\n')
    assert len(alone) == 2 and alone[1] == "actions[0].timeout: got 0; accepted: a number in (0.0, 3600.0]"
    assert not any("needs a 'name'" in e for e in alone)
    rule = _errors(tmp_path, capsys, "rules: [default, {name: overfit, patience: 0, actions: [log, {name: log, "
                                     "level: loud, extra: 1}]}]\n")
    assert rule == ["rules[1]: overfit.patience: got 0; accepted: an integer >= 1",
                    "rules[1].actions[1].extra: unknown key 'extra' (accepted keys: level)",
                    "rules[1].actions[1].level: got 'loud'; accepted: debug, info, warning, error, critical"]


# ---------------------------------------------------- trial 26c F9: a rule reference's missing attribute
_RULES_MODULE = '''
import numpy as np
from tripwire.rules import FunctionRule, Rule, check_float


class SpikeRule(Rule):
    name = "spike26f"

    def check(self, history, step, mode):
        return None


def too_high(history, step, mode):
    return None
'''


def test_a_missing_rule_attribute_suggests_rules_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      clean_imports: None) -> None:
    # trial 26c F9: brokenrules:nope said "did you mean 'np'?" (the numpy import)
    (tmp_path / "brokenrules26f.py").write_text(_RULES_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(tripwire.ConfigError, match=r"^rules\[0\]: module 'brokenrules26f' has no attribute 'nope'; "
                                                   r"rules it defines: SpikeRule, too_high$"):
        tripwire.Session(rules=["brokenrules26f:nope"], out_dir=str(tmp_path / "run"))
    for typo, meant in (("too_hig", "too_high"), ("SpikeRul", "SpikeRule")):
        with pytest.raises(tripwire.ConfigError, match=f"did you mean '{meant}'"):
            tripwire.Session(rules=[f"brokenrules26f:{typo}"], out_dir=str(tmp_path / "run"))
    with pytest.raises(tripwire.ConfigError) as exc:  # an imported helper, the Rule base: not rules of it
        tripwire.Session(rules=["brokenrules26f:check_flot"], out_dir=str(tmp_path / "run"))
    assert "did you mean" not in str(exc.value)
    (tmp_path / "norules26f.py").write_text("import numpy as np\n")
    with pytest.raises(tripwire.ConfigError, match="has no attribute 'nope'; it defines no rule"):
        tripwire.Session(rules=["norules26f:nope"], out_dir=str(tmp_path / "run"))


def test_an_integral_float_is_the_integer_for_every_integer_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # trial 26c F9: save.interval: 5.0 and num_steps: 100.0 validate; they are 5 and 100 (as every
    # integer key takes them: docs/config.md), and a fraction is an error naming the key
    cfg = tmp_path / "floats.yaml"
    cfg.write_text("save: {interval: 5.0}\nwriter: {queue_size: 64.0}\n"
                   "rules: [{name: loss_not_decreasing, num_steps: 100.0}]\n")
    assert main(["validate", str(cfg)]) == 0
    config = tripwire.load_config(str(cfg))
    assert config.save.interval == 5 and type(config.save.interval) is int
    with tripwire.Session(str(cfg), out_dir=str(tmp_path / "run")) as s:
        (rule,) = s.rules
        assert rule.num_steps == 100 and type(rule.num_steps) is int
        s.step("train", 0, {"loss": (np.float32(1.0), "losses")})
    capsys.readouterr()
    cfg.write_text("save: {interval: 5.5}\nrules: [{name: loss_not_decreasing, num_steps: 100.5}]\n")
    assert main(["validate", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "save.interval: got 5.5; accepted: an integer >= 1" in err
    assert "num_steps: got 100.5; accepted: an integer >= " in err

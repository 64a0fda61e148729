"""Contract tests over every registered built-in rule."""

from __future__ import annotations

import argparse
import inspect
import json
import logging
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire import _rules_cli
from tripwire._config import BUILTIN_COLLECTIONS, is_valid_reduction
from tripwire.rules import RULE_SETS, available_rules
from tripwire.rules._registry import _BUILTIN_MODULES

BUILTIN = sorted(_BUILTIN_MODULES)


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("ref") / "run"
    with tripwire.Session(out_dir=str(out), save_interval=1) as s:
        for i in range(3):
            s.step("train", i, {"loss": (1.0 / (i + 1), "losses")})
    return str(out)


def required_params(name: str, reference_run: str) -> dict[str, Any]:
    return {"other": reference_run} if name == "similar_across_runs" else {}


def own_params(cls: type) -> dict[str, inspect.Parameter]:
    out: dict[str, inspect.Parameter] = {}
    for klass in cls.__mro__:
        if klass is tripwire.Rule:
            break
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        for n, p in inspect.signature(init).parameters.items():
            if n not in ("self", "common") and p.kind is not p.VAR_KEYWORD:
                out.setdefault(n, p)
    return out


def test_every_builtin_module_is_registered_under_its_name() -> None:
    rules = available_rules()
    assert sorted(rules) == BUILTIN
    for name in BUILTIN:
        assert rules[name].__module__ == f"tripwire.rules.{name}"


def test_rules_package_exports_every_rule_class_sorted() -> None:
    assert tripwire.rules.__all__ == sorted(tripwire.rules.__all__)
    for cls in available_rules().values():
        assert getattr(tripwire.rules, cls.__name__) is cls
        assert cls.__name__ in tripwire.rules.__all__


@pytest.mark.parametrize("name", BUILTIN)
def test_docstring_states_formula_and_every_default(name: str) -> None:
    cls = available_rules()[name]
    doc = _rules_cli.rule_doc(cls)
    assert doc["condition"].startswith("Condition"), name
    assert "``" in doc["condition"]  # the formula
    defaults = doc["defaults"]
    assert defaults.startswith("Defaults"), name
    for pname, p in own_params(cls).items():
        assert f"``{pname}" in defaults, f"{name}: parameter {pname} missing from the Defaults paragraph"
        if p.default is not p.empty and isinstance(p.default, (int, float)) and not isinstance(p.default, bool):
            m = re.search(rf"``{pname}=([^`]+)``", defaults)
            assert m is not None, (name, pname)
            assert float(m.group(1)) == float(p.default), (name, pname, m.group(1), p.default)


@pytest.mark.parametrize("name", BUILTIN)
def test_state_dict_round_trip(name: str, reference_run: str) -> None:
    cls = available_rules()[name]
    rule = cls(**required_params(name, reference_run))
    session = tripwire.Session(write=False, rules=[rule], save_interval=1, collections=list(BUILTIN_COLLECTIONS))
    rng = np.random.default_rng(0)
    for i in range(6):
        session.step("train", i, {"loss": (1.0, "losses"), "fc.weight": (rng.normal(size=(3, 3)), "weights")})
        session.step("eval", i, {"val_loss": (1.0, "losses"), "labels": (np.arange(4), "labels"),
                                 "predictions": (np.arange(4), "predictions")})
    state = json.loads(json.dumps(rule.state_dict()))  # JSON-safe
    fresh = cls(**required_params(name, reference_run))
    fresh.load_state_dict(state)
    assert fresh.state_dict() == state


@pytest.mark.parametrize("name", BUILTIN)
def test_requirements_use_builtin_collections_and_valid_reductions(name: str, reference_run: str) -> None:
    rule = available_rules()[name](**required_params(name, reference_run))
    reqs = rule.requirements()
    assert reqs, name
    for req in reqs:
        assert req.collection in BUILTIN_COLLECTIONS
        for r in req.reductions:
            assert r == "raw" or is_valid_reduction(r), (name, r)
    # the session captures exactly what the rule asks for
    session = tripwire.Session(write=False, rules=[rule], collections=[])
    for req in reqs:
        col = session.collections[req.collection]
        for r in req.reductions:
            assert r in col.reduction.reductions or (r == "raw" and col.reduction.raw)
        if req.raw_arrays:
            assert col.reduction.raw


@pytest.mark.parametrize("name", BUILTIN)
def test_named_inputs_are_parameters_naming_tensors_of_required_collections(name: str, reference_run: str) -> None:
    rule = available_rules()[name](**required_params(name, reference_run))
    params = rule.params()
    for param, pattern in rule.named_inputs().items():
        assert params[param] == pattern and isinstance(pattern, str), (name, param)
        assert {r.collection for r in rule.requirements()} & set(rule.input_collections), name


@pytest.mark.parametrize("name", BUILTIN)
def test_bad_parameters_raise_config_error(name: str, reference_run: str) -> None:
    cls = available_rules()[name]
    base = required_params(name, reference_run)
    checked = 0
    for pname, p in own_params(cls).items():
        if pname in ("other",):
            continue
        default = p.default
        if isinstance(default, bool):
            bad: Any = "yes"
        elif isinstance(default, (int, float)):
            bad = -1e9 if pname not in ("tanh_threshold",) else 0.0
        elif isinstance(default, str) and pname == "tensor":
            bad = 42
        elif isinstance(default, str):
            bad = "(" if pname not in ("train_mode", "validation_mode", "collection", "importance_type", "reduction") else "nope"
        elif default is None and pname == "higher_is_better":
            bad = "maybe"
        elif default is None and pname == "num_steps":  # None: scaled by the planned training length
            bad = -1
        else:
            bad = 42
        with pytest.raises(tripwire.ConfigError, match=rf"{name}\.{pname}: got"):
            cls(**{**base, pname: bad})
        checked += 1
    with pytest.raises(tripwire.ConfigError, match=r"patience: got 0"):
        cls(**{**base, "patience": 0})
    assert checked >= 1 or name == "stalled_training"


@pytest.mark.parametrize("name", BUILTIN)
def test_unknown_parameter_in_yaml_is_named(name: str) -> None:
    with pytest.raises(tripwire.ConfigError, match=r"unknown parameter of rule"):
        tripwire.rules.build_rules([{"name": name, "no_such_parameter": 1}])
    # object.__init__'s *args/**kwargs are not parameters: neither listed as accepted nor taken
    with pytest.raises(tripwire.ConfigError, match=r"accepted: (?!.*\bargs\b)") as info:
        tripwire.rules.build_rules([{"name": name, "args": 3}])
    assert "kwargs" not in str(info.value)


def test_a_rule_given_in_an_unknown_form_is_shown_with_the_accepted_forms() -> None:
    with pytest.raises(tripwire.ConfigError, match=r"got \('overfit', \{'patience': 3\}\) \(tuple\); accepted: a rule name"):
        tripwire.rules.build_rules([("overfit", {"patience": 3})])


def test_rule_modules_import_no_framework() -> None:
    code = (
        "import sys, tripwire, tripwire.rules\n"
        "tripwire.rules.available_rules()\n"
        "import tripwire._watch, tripwire._rules_cli\n"
        "bad = [m for m in ('torch', 'lightning', 'keras', 'xgboost', 'mxnet', 'tensorflow', 'jax', 'pandas') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.parametrize("name", BUILTIN)
def test_rule_module_source_has_no_framework_import(name: str) -> None:
    src = Path(sys.modules[available_rules()[name].__module__].__file__).read_text()  # type: ignore[arg-type]
    for fw in ("torch", "lightning", "keras", "xgboost", "mxnet", "tensorflow"):
        assert f"import {fw}" not in src and f"from {fw}" not in src


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="tripwire")
    sub = parser.add_subparsers()
    _rules_cli.register(sub)
    args = parser.parse_args(argv)
    rc = args.func(args)
    return rc, capsys.readouterr().out


def test_cli_lists_every_rule_with_parameters(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = _cli(["rules"], capsys)
    assert rc == 0
    for name in BUILTIN:
        assert f"\n{name}\n" in f"\n{out}"
    assert "num_steps=None" in out and "min_decrease=0.05" in out and "Condition" in out
    rc, out = _cli(["rules", "--json"], capsys)
    data = json.loads(out)
    assert [d["name"] for d in data] == BUILTIN
    by_name = {d["name"]: d for d in data}
    assert by_name["similar_across_runs"]["parameters"]["other"] is None  # required: checked in __init__
    assert by_name["vanishing_gradient"]["parameters"]["patience"] == 3


def test_cli_shows_the_default_set(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = _cli(["rules", "--set", "default", "--json"], capsys)
    assert rc == 0
    assert [d["name"] for d in json.loads(out)] == list(RULE_SETS["default"])
    rc, out = _cli(["rules", "--set", "nope"], capsys)
    assert rc == 2


def test_default_set_expands_to_registered_rules() -> None:
    rules = tripwire.rules.build_rules(["default"])
    assert [r.name for r in rules] == list(RULE_SETS["default"])
    assert {"exploding_tensor", "loss_not_decreasing"} <= {r.name for r in rules}


def test_tripwire_cli_wires_rules_and_watch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tripwire import _cli

    assert _cli.main(["rules", "--set", "default"]) == 0
    assert "rule set 'default'" in capsys.readouterr().out
    run = tmp_path / "run"
    with tripwire.Session(out_dir=str(run), save_interval=1) as s:
        for i in range(3):
            s.step("train", i, {"loss": (float("nan") if i == 2 else 1.0, "losses")})
    cfg = tmp_path / "rules.yaml"
    cfg.write_text("rules: [exploding_tensor]\n")
    assert _cli.main(["watch", str(run), "--config", str(cfg), "--once"]) == 1
    assert "exploding_tensor" in capsys.readouterr().out


def test_rules_cli_describes_a_custom_rule_named_module_attribute(tmp_path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """``tripwire rules myrules:LossAbove`` refused the form its own error offered; it imports the
    module from the working directory, as a config would, and shows the class's docstring."""
    (tmp_path / "cli_custom_rules.py").write_text(
        '"""Two rules in one module."""\n'
        "from tripwire.rules import Rule\n"
        "class LossAbove(Rule):\n"
        '    """Loss above a limit.\n\n    Condition: ``loss > limit``."""\n'
        "    name = 'cli_loss_above'\n"
        "    def __init__(self, limit: float = 3.0, **common):\n"
        "        super().__init__(**common)\n"
        "    def check(self, history, step, mode):\n"
        "        return None\n"
        "def loss_is_big(history, step, mode):\n"
        '    """The loss is big."""\n'
        "class Undocumented(Rule):\n"
        "    name = 'cli_undocumented'\n"
        "    def check(self, history, step, mode):\n"
        "        return None\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    rc, out = _cli(["rules", "cli_custom_rules:LossAbove"], capsys)
    assert rc == 0 and out.startswith("cli_custom_rules:LossAbove\n  Loss above a limit.\n  Condition: `loss > limit`.")
    assert "  its findings' rule: cli_loss_above\n" in out  # (trial 32f F2: headed by the name a config gives)
    assert "limit=3.0" in out and "Two rules" not in out
    rc, out = _cli(["rules", "cli_custom_rules:loss_is_big"], capsys)
    assert rc == 0 and "The loss is big." in out
    rc, out = _cli(["rules", "cli_custom_rules:Undocumented"], capsys)  # not the base class's docstring
    assert rc == 0 and out.startswith("cli_custom_rules:Undocumented\n  (no description: Undocumented has no docstring)\n")
    rc, _ = _cli(["rules", "cli_custom_rules:nothing"], capsys)
    assert rc == 2
    with pytest.raises(tripwire.ConfigError, match="module 'cli_custom_rules' has no attribute 'nothing'"):
        _rules_cli.listing(None, "cli_custom_rules:nothing")


def test_docs_reference_section_is_the_generated_one(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/rules.md's Reference is `tripwire rules --markdown`: a changed docstring must be copied
    there (run it and paste from the first rule on), so the docs never describe an older rule."""
    rc, out = _cli(["rules", "--markdown"], capsys)
    assert rc == 0 and out.startswith("### `all_zero`")
    doc = (Path(__file__).parents[2] / "docs" / "rules.md").read_text()
    assert doc[doc.index("### `all_zero`"):] == out
    rc, text = _cli(["rules", "exploding_tensor"], capsys)
    assert "``" not in text and "`nonfinite_count(t) > 0`" in text  # one backtick in a terminal


# ------------------------------------------------ the contract as a check of a user's rule (trial 21b)
@pytest.mark.parametrize("name", BUILTIN)
def test_every_builtin_rule_passes_check_rule(name: str, reference_run: str) -> None:
    tripwire.rules.check_rule(available_rules()[name], **required_params(name, reference_run))


class _Raises(tripwire.Rule):
    name = "contract_raises"

    def check(self, history, step, mode):
        return 1 / 0 if step >= 3 else None


class _Forgets(tripwire.Rule):
    """Keeps a count, and loses it on load_state_dict; keeps a set, which is no plain data."""

    name = "contract_forgets"

    def __init__(self, **common: Any) -> None:
        super().__init__(**common)
        self.count = 0

    def check(self, history, step, mode):
        self.count += 1
        return None

    def state_dict(self):
        return {**super().state_dict(), "count": self.count}

    def load_state_dict(self, state):
        super().load_state_dict(state)


class _SetState(_Forgets):
    name = "contract_set_state"

    def state_dict(self):
        return {**super().state_dict(), "seen": {1, 2}}


class _BadInputs(tripwire.Rule):
    name = "contract_bad_inputs"
    input_collections = ("losses",)

    def named_inputs(self):
        return {"loss": "loss"}

    def check(self, history, step, mode):
        return None


def test_check_rule_names_every_problem_of_a_users_rule() -> None:
    with pytest.raises(tripwire.rules.RuleContractError, match=r"judging a short synthetic training, at train step 3: "
                                                             r"ZeroDivisionError: division by zero"):
        tripwire.rules.check_rule(_Raises)
    with pytest.raises(AssertionError, match=r"a fresh rule loaded with state_dict\(\) gives another state_dict\(\) "
                                             r"back"):
        tripwire.rules.check_rule(_Forgets())
    with pytest.raises(AssertionError, match=r"state_dict\(\) is not plain data"):
        tripwire.rules.check_rule(_SetState)
    with pytest.raises(AssertionError, match=r"named_inputs\(\) names 'loss'='loss', which is not a parameter"):
        tripwire.rules.check_rule(_BadInputs)
    with pytest.raises(AssertionError, match=r"it does not build: ConfigError: .*has no name"):
        tripwire.rules.check_rule(type("NoName", (tripwire.Rule,), {"check": lambda self, h, s, m: None}))
    # a rule function, a mapping, and several problems at once, one line each
    tripwire.rules.check_rule(lambda history, step, mode: None)
    tripwire.rules.check_rule({"name": "overfit", "patience": 2})
    with pytest.raises(AssertionError) as info:
        tripwire.rules.check_rule(type("Both", (_SetState, _BadInputs), {"name": "contract_both"}))
    assert len(info.value.problems) == 2 and "(2 problems)" in str(info.value)


def test_check_rule_fires_none_of_the_rules_actions(caplog: pytest.LogCaptureFixture) -> None:
    # trial 23d: the contract test logged the synthetic training's findings and called the user's own
    # action (one that writes a file, or notifies someone, really ran inside a unit test)
    fired: list[tripwire.Finding] = []
    rule = tripwire.FunctionRule(lambda history, step, mode: "always", name="always_fires",
                                 actions=["log", "stop_training", fired.append])
    with caplog.at_level(logging.INFO, logger="tripwire"):
        tripwire.rules.check_rule(rule)
    assert fired == [] and not [r for r in caplog.records if "always_fires" in r.getMessage()]
    # an action that cannot be built is still a problem of the rule
    with pytest.raises(AssertionError, match=r"cannot load action 'no_such_module_xyz:nope'"):
        tripwire.rules.check_rule(tripwire.FunctionRule(lambda history, step, mode: None, name="bad_action",
                                                        actions=["no_such_module_xyz:nope"]))

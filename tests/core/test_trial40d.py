"""Trial 40d F2: ``tripwire validate`` reported one rule entry with no ``name`` key twice, the second
time quoting a part of it (``got {'patience': 2}``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tripwire._cli import main


def test_a_rule_entry_without_a_name_is_one_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "t.yaml"
    cfg.write_text("rules:\n  - {dead_relu: {threshold: 0.9}, patience: 2}\n  - {name: overfit, patience: 0}\n")
    assert main(["validate", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tripwire validate: error: 2 errors in {cfg}:\n"), err
    lines = err.splitlines()[1:]
    assert len(lines) == 2, err
    assert lines[0].startswith("  rules[0]: a rule mapping needs a 'name' key, got {'dead_relu': {'threshold': 0.9}, "
                               "'patience': 2}"), lines[0]
    assert lines[1].startswith("  rules[1]: overfit.patience: got 0"), lines[1]


MIXED = '''
import tripwire


def loss_over_40d(history, step, mode):
    return None


class NoSuper40d(tripwire.Rule):
    name = "nosuper_40d"

    def __init__(self, **common):
        pass

    def check(self, history, step, mode):
        return None
'''


def _rules_of_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str) -> int:
    """``tripwire rules NAME`` of a module ``text`` written into ``tmp_path``: its exit status."""
    import sys

    (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    try:
        return main(["rules", name])
    finally:
        sys.modules.pop(name, None)


def test_rules_of_a_module_name_the_broken_one_and_the_ones_that_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # F1: the first broken rule was the whole answer, worded as a config's "rules[0]: ..."
    assert _rules_of_module(tmp_path, monkeypatch, "mixedrules40d", MIXED) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "tripwire rules: error: rules: module 'mixedrules40d' defines 1 rule(s) that a config could not build: "
        "mixedrules40d:NoSuper40d: rule 'nosuper_40d' (NoSuper40d): its __init__ does not call super().__init__(**common); "
        "accepted: a Rule subclass whose __init__ passes the common parameters (start_step, patience, every, ...) on "
        "(its other rules build: mixedrules40d:loss_over_40d; tripwire rules mixedrules40d:ATTRIBUTE describes one)\n")


def test_two_lambda_rules_are_told_a_name_that_works() -> None:
    # F3: two lambdas were told "rule_name: <lambda>_2", itself no rule name
    import tripwire

    with pytest.raises(tripwire.ConfigError, match=r"is listed already .*To run two function rules of no usable name "
                                                    r"\(lambdas: '<lambda>'\), give each a name of its own: "
                                                    r"FunctionRule\(fn, name='my_rule'\), or a function defined with def$"):
        tripwire.Session(rules=[lambda h, s, m: None, lambda h, s, m: None], write=False)


def test_watch_of_a_lambda_rule_says_to_define_it_with_def(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # F3: tripwire watch said to use 'myrules:<lambda>', which no one can write
    import subprocess
    import sys

    script = tmp_path / "train.py"  # (a lambda of the training script, __main__, as a user writes it)
    script.write_text("import sys, tripwire\n"
                      "s = tripwire.Session(rules=[lambda h, st, m: None], out_dir=sys.argv[1], save_interval=1)\n"
                      "s.step('train', 0, {'loss': (1.0, 'losses')})\n"
                      "s.close()\n")
    subprocess.run([sys.executable, str(script), str(tmp_path / "r")], check=True, timeout=120)
    assert main(["watch", str(tmp_path / "r"), "--once"]) == 2
    err = capsys.readouterr().err
    assert "define it with def in a module (for example myrules.py, then 'myrules:my_rule')" in err, err
    assert "myrules:<lambda>" not in err


REGISTERED = '''
import tripwire
from tripwire.rules import Requirement


@tripwire.register_rule
class Custom41i(tripwire.Rule):
    name = "custom_41i"

    def requirements(self):
        return [Requirement("first_layer", ("mean",))]

    def check(self, history, step, mode):
        return None


@tripwire.register_rule
class Fine41i(tripwire.Rule):
    name = "fine_41i"

    def check(self, history, step, mode):
        return None


def one_arg_41i(history):
    return None
'''


def test_rules_of_a_module_name_a_registered_rule_and_a_function_that_do_not_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Trial 41i F4/F5: a registered rule whose requirements() raise was listed, exit 0; a function
    reading a history that cannot be called as (history, step, mode) was in neither list."""
    assert _rules_of_module(tmp_path, monkeypatch, "registered41i", REGISTERED) == 2
    err = capsys.readouterr().err
    assert err.startswith("tripwire rules: error: rules: module 'registered41i' defines 2 rule(s) that a config could "
                          "not build: custom_41i (registered41i.Custom41i): rule 'custom_41i' (Custom41i): "
                          "requirements() raised ConfigError: requirement: unknown collection 'first_layer'"), err
    assert ("registered41i:one_arg_41i: 'registered41i:one_arg_41i' is the function registered41i.one_arg_41i taking "
            "(history), which cannot be called as (history, step, mode)") in err, err
    assert "(its other rules build: fine_41i; tripwire rules registered41i:ATTRIBUTE describes one)" in err


RAISES = '''
import tripwire


@tripwire.register_rule
class NeedsGpu41k(tripwire.Rule):
    name = "needs_gpu_41k"

    def __init__(self, **common):
        super().__init__(**common)
        raise RuntimeError("needs a GPU")

    def check(self, history, step, mode):
        return None


def fine_41k(history, step, mode):
    return None
'''


def test_a_rule_whose_init_raises_anything_is_named_not_a_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Trial 41k F1: a registered rule whose __init__ raised a RuntimeError made ``tripwire rules
    MODULE`` and ``tripwire validate`` end in a traceback, exit 1."""
    assert _rules_of_module(tmp_path, monkeypatch, "raises41k", RAISES) == 2
    err = capsys.readouterr().err
    assert ("needs_gpu_41k (raises41k.NeedsGpu41k): building rule 'needs_gpu_41k' (raises41k.NeedsGpu41k) raised "
            "RuntimeError: needs a GPU (its other rules build: raises41k:fine_41k;") in err, err
    cfg = tmp_path / "v.yaml"
    cfg.write_text("imports: [raises41k]\nrules: [default, needs_gpu_41k]\n")
    import sys
    try:
        assert main(["validate", str(cfg)]) == 2
    finally:
        sys.modules.pop("raises41k", None)
    assert ("rules[1]: building rule 'needs_gpu_41k' (raises41k.NeedsGpu41k) raised RuntimeError: needs a GPU"
            in capsys.readouterr().err)

"""Session 43 (trial 43j), configs:

- A config's module (``imports: [teamrules]``, a ``module:attribute`` rule or action) in the current
  directory passed ``tripwire validate`` (which puts the current directory on ``sys.path``) but not
  the training it was written for, ``python scripts/train.py`` run from the project's root: "cannot
  import module 'teamrules' ... (it imports from the current directory and PYTHONPATH)". The library
  now imports it from the current directory too, as the docs say.
- A `collections` mapping whose key is not its Collection's name, and a Collection listed twice, were
  taken (a stored config that could not be loaded back; the first one's settings dropped): refused.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path


def test_a_configs_module_in_the_current_directory_imports_from_a_script_run_elsewhere(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "teamrules_43j.py").write_text(textwrap.dedent('''
        from tripwire.rules import Requirement, Rule, register_rule

        @register_rule
        class Never43j(Rule):
            """Never: fires at no step.

            Condition: ``False``.
            """
            name = "never_43j"
            def requirements(self):
                return [Requirement("losses", ("raw",))]
            def check(self, history, step, mode):
                return None

        def post(finding):
            pass
        '''))
    (tmp_path / "tripwire.yaml").write_text("imports: [teamrules_43j]\nrules: [never_43j]\n"
                                           "actions: [log, 'teamrules_43j:post']\n")
    (tmp_path / "scripts" / "train.py").write_text(textwrap.dedent('''
        import numpy as np, tripwire
        s = tripwire.Session("tripwire.yaml", write=False)
        s.step("train", 0, {"loss": (np.float32(1.0), "losses")})
        print("rules", [r.name for r in s.rules])
        '''))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "scripts/train.py"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "rules ['never_43j']" in out.stdout


def test_a_collection_under_another_name_or_listed_twice_is_refused() -> None:
    """Trial 43j: ``{"gradients": Collection("weights")}`` stored tensors as weights and a config that
    could not be loaded back; ``[Collection("weights", ...), Collection("weights", ...)]`` kept the
    last one's settings, the first's dropped without a word."""
    import pytest

    import tripwire
    from tripwire import Collection, ConfigError, ReductionConfig

    with pytest.raises(ConfigError, match=r"^collections\.gradients: got Collection\('weights', \.\.\.\), a collection "
                                          r"of another name; accepted: a Collection named 'gradients'"):
        tripwire.Session(None, write=False, collections={"gradients": Collection("weights"), "losses": None})
    with pytest.raises(ConfigError, match=r"^collections\[1\]: a collection named 'weights', listed already "
                                          r"\(collections\[0\]\)"):
        tripwire.Session(None, write=False, collections=[Collection("weights", reduction=ReductionConfig(["l2"])),
                                                         Collection("weights", include=["fc"])])
    session = tripwire.Session(None, write=False, collections={"weights": Collection("weights")})
    assert "weights" in session.config.collections


def test_a_nan_parameter_is_said_to_be_refused_as_nan() -> None:
    """Trial 43j F9: ``histogram_range: [0, .nan]`` read "got nan; accepted: a number" (NaN is a float)."""
    import pytest

    from tripwire import ConfigError
    from tripwire._validate import check_float

    with pytest.raises(ConfigError, match=r"^x: got nan; accepted: a number >= 0\.0 \(not NaN\)$"):
        check_float(float("nan"), "x", minimum=0.0)
    with pytest.raises(ConfigError, match=r"^x: got -1\.0; accepted: a number >= 0\.0$"):
        check_float(-1.0, "x", minimum=0.0)


def test_validate_json_holds_the_warnings(tmp_path, capsys) -> None:
    """Trial 43j F5: ``validate --json`` left out the WARNINGs (a collection named like a typo of a
    built-in one) that stderr shows: a script reading the JSON never saw them."""
    import json

    from tripwire._cli import main

    cfg = tmp_path / "c.yaml"
    cfg.write_text("collections: {gradeints: {include: [fc], reductions: [l2]}}\n")
    capsys.readouterr()
    assert main(["validate", str(cfg), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["valid"] is True
    assert len(out["warnings"]) == 1 and "collection 'gradeints' is not built-in (did you mean 'gradients'?)" in \
        out["warnings"][0]


def test_a_yaml_syntax_error_says_what_is_accepted(tmp_path) -> None:
    """Trial 43j F7: a tab, a bad indentation: the YAML parser's words alone, no fix."""
    import pytest

    from tripwire import ConfigError, load_config

    tabs = tmp_path / "tabs.yaml"
    tabs.write_text("rules:\n\t- default\n")
    with pytest.raises(ConfigError, match=r"(?s)is not valid YAML: .*; accepted: indent with spaces: YAML takes no tab "
                                          r"for indentation$"):
        load_config(str(tabs))
    bad = tmp_path / "bad.yaml"
    bad.write_text("save:\n  interval: 5\n    start_step: 2\n")
    with pytest.raises(ConfigError, match=r"(?s)is not valid YAML: .*; accepted: a mapping of keys to values"):
        load_config(str(bad))


def test_an_unclosed_bracket_says_so(tmp_path) -> None:
    """Trial 43n F7: an unclosed ``[`` was told to indent with spaces."""
    import pytest

    from tripwire import ConfigError, load_config

    cfg = tmp_path / "c.yaml"
    cfg.write_text("rules: [default\n")
    with pytest.raises(ConfigError, match=r"(?s)is not valid YAML: .*; accepted: every \[ and \{ closed by its \] and \}"):
        load_config(str(cfg))

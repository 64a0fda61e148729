"""Trial 32f F2: ``tripwire rules teamrules`` listed a module's rule objects under the names of their
functions (``loss_over_rule = FunctionRule(_over, ...)`` as ``_over``, which a config refuses as an
unknown rule; ``grad_rule = FunctionRule(grad_too_small, ...)`` as ``grad_too_small``, beside the
function ``grad_too_small`` itself). Each unregistered entry is listed (text and ``--json``'s
``name``) by the ``module:attribute`` a config accepts, the rule name its findings carry said apart,
and no two entries share a name; every listed name validates as a config's rule."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from tripwire._cli import main

MODULE = '''
import tripwire


@tripwire.register_rule
class LossJump32f(tripwire.Rule):
    name = "loss_jump_32f"

    def requirements(self):
        return [tripwire.Requirement("losses", ("raw",))]

    def check(self, history, step, mode):
        return None


def _over(history, step, mode):
    return None


loss_over_rule = tripwire.FunctionRule(_over, requirements=[tripwire.Requirement("losses", ("raw",))])


def grad_too_small(history, step, mode):
    """Gradient of fc.weight too small."""
    return None


grad_rule = tripwire.FunctionRule(grad_too_small, requirements=[tripwire.Requirement("gradients", ("l2",))])
'''

LISTED = ["loss_jump_32f", "teamrules32f:loss_over_rule", "teamrules32f:grad_too_small", "teamrules32f:grad_rule"]


@pytest.fixture
def teamrules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "teamrules32f.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield tmp_path
    sys.modules.pop("teamrules32f", None)


def test_text_listing_heads_each_entry_by_the_name_a_config_accepts(teamrules: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "teamrules32f"]) == 0
    out = capsys.readouterr().out
    heads = [line for line in out.splitlines() if line and not line.startswith(" ")][:len(LISTED)]
    assert heads == LISTED
    assert "\n_over\n" not in out and "\ngrad_too_small\n" not in out
    # the rule name their findings carry, said apart from the name a config gives
    assert "teamrules32f:loss_over_rule\n" in out and "  its findings' rule: _over\n" in out


def test_json_names_are_the_config_names_and_unique(teamrules: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "teamrules32f", "--json"]) == 0
    items = json.loads(capsys.readouterr().out)
    assert [i["name"] for i in items] == LISTED
    by_name = {i["name"]: i for i in items}
    assert by_name["teamrules32f:loss_over_rule"]["finding_rule"] == "_over"
    assert by_name["teamrules32f:grad_rule"]["finding_rule"] == "grad_too_small"
    assert by_name["teamrules32f:grad_too_small"]["finding_rule"] == "grad_too_small"
    assert "finding_rule" not in by_name["loss_jump_32f"]  # (registered: its name is the config's name)


@pytest.mark.parametrize("name", LISTED)
def test_every_listed_name_validates_as_a_config_rule(teamrules: Path, name: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    cfg = teamrules / "use_listed.yaml"
    cfg.write_text(f"imports: [teamrules32f]\nrules: ['{name}']\n")
    assert main(["validate", str(cfg)]) == 0, capsys.readouterr().err

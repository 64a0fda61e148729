"""Trial 32f, docs/config.md polish: the config examples use a ``teamrules`` module (``imports:
[teamrules]``, ``loss_jump``, ``teamrules:loss_over_rule``; the actions ``teamrules:page``,
``teamrules:write_file``, ``teamrules:post``) that the docs never showed in full (one block defined
``post`` only), so the blocks did not validate as written. config.md shows the whole module: written
out as shown, every block that names it validates, its rules pass ``check_rule``, and ``tripwire
rules teamrules`` lists each by a name a config accepts."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

import tripwire
from tripwire._cli import main
from tripwire.rules import check_rule

CONFIG_MD = Path(__file__).resolve().parents[2] / "docs" / "config.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", CONFIG_MD.read_text(encoding="utf-8"), re.S)


def _module_block() -> str:
    whole = [b for b in _blocks("python") if b.startswith("# teamrules.py\n")]
    assert len(whole) == 1, "docs/config.md shows the whole teamrules.py once, its first line '# teamrules.py'"
    return whole[0]


def _teamrules_blocks() -> list[str]:
    """The YAML blocks of config.md that name teamrules (rules, imports or actions)."""
    return [b for lang in ("yaml", "yml") for b in _blocks(lang) if "teamrules" in b]


@pytest.fixture
def teamrules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "teamrules.py").write_text(_module_block(), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    sys.modules.pop("teamrules", None)
    yield tmp_path
    sys.modules.pop("teamrules", None)


def test_every_block_naming_teamrules_validates_as_written(teamrules: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    blocks = _teamrules_blocks()
    assert len(blocks) >= 2  # (the imports example and the custom actions)
    for i, block in enumerate(blocks):
        cfg = teamrules / f"block{i}.yaml"
        cfg.write_text(block if "rules:" in block else block + "rules: [default]\n", encoding="utf-8")
        assert main(["validate", str(cfg)]) == 0, f"{block}\n{capsys.readouterr().err}"
        capsys.readouterr()


def test_the_module_rules_pass_the_contract_and_list_by_config_names(teamrules: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    import teamrules as module

    check_rule(module.LossJump, factor=3)
    check_rule(module.loss_over_rule)
    assert main(["rules", "teamrules", "--json"]) == 0
    names = [item["name"] for item in json.loads(capsys.readouterr().out)]
    assert {"loss_jump", "teamrules:loss_over_rule"} <= set(names)


def test_the_module_rules_and_actions_work(teamrules: Path) -> None:
    import teamrules as module

    session = tripwire.Session(rules=[{"name": "loss_jump", "factor": 3}, module.loss_over_rule],
                               actions=["record", {"name": "teamrules:write_file", "path": "team.jsonl"}],
                               out_dir=str(teamrules / "run"), save_interval=1)
    for step, loss in enumerate([1.0, 0.9, 5.0, 200.0]):
        session.step("train", step, {"loss": (loss, "losses")})
    session.close()
    found = sorted((f.rule, f.step) for f in session.findings)
    assert found == [("loss_jump", 2), ("loss_over", 3)]  # (each once: repeat=False)
    lines = (teamrules / "team.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["rule"] for line in lines] == ["loss_jump", "loss_over"]


def test_loss_jump_finds_a_jump_between_two_save_steps(teamrules: Path) -> None:
    """Trial 37c: the example compared the last two values at save steps only, so a 10x jump at step 5
    (saves at 0 and 10) was never found, though its docstring promises the step before."""
    import teamrules as module  # noqa: F401  (registers loss_jump)

    session = tripwire.Session(rules=[{"name": "loss_jump", "factor": 3}], write=False)
    for step in range(20):
        plan = session.begin_step("train", step)
        plan.add("loss", 10.0 if step == 5 else 1.0, "losses")
        session.end_step()
    session.close()
    assert [(f.rule, f.step) for f in session.findings] == [("loss_jump", 5)]


def test_rules_md_teamrules_commands_run(teamrules: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Trial 41a: docs/rules.md showed ``tripwire rules teamrules:grad_rule``, which the documented
    teamrules.py does not define (exit 2). Every ``tripwire rules teamrules:...`` line of rules.md
    runs against config.md's module."""
    rules_md = (CONFIG_MD.parent / "rules.md").read_text(encoding="utf-8")
    commands = re.findall(r"^\$ tripwire rules (teamrules:\w+)", rules_md, re.M)
    assert commands, "docs/rules.md shows a custom rule described by tripwire rules"
    for target in commands:
        assert main(["rules", target]) == 0, capsys.readouterr().err
        out = capsys.readouterr().out
        assert target in out and "fn='teamrules." in out

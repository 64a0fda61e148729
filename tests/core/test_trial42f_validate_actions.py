"""Trial 42f F2: ``tripwire validate`` left out an action listed twice where another action of the
same list had an error of its own (``[{name: log, level: LOUD}, record, record]`` named the level
only; the duplicate came once it was fixed), though every error of the file is to be named."""

from __future__ import annotations

from pathlib import Path

import pytest

from tripwire._cli import main


@pytest.mark.parametrize(("text", "said"), [
    ("actions:\n  - {name: log, level: LOUD}\n  - record\n  - record\n",
     ["actions[0].level: got 'LOUD'", "actions[2]: got 'record', listed already (actions[1])"]),
    ("rules:\n  - loss_not_decreasing\n  - name: exploding_tensor\n"
     "    actions: [{name: log, level: LOUD}, record, stop_training, record]\n",
     ["rules[1].actions[0].level: got 'LOUD'", "rules[1].actions[3]: got 'record', listed already (rules[1].actions[1])"]),
])
def test_a_duplicate_action_is_named_beside_another_actions_error(tmp_path: Path, capsys, text: str,
                                                                  said: list[str]) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "2 errors in" in err and all(s in err for s in said), err


@pytest.mark.parametrize(("text", "said"), [
    ("actions:\n  - {name: log, level: LOUD}\n  - record\n  - record\n  - record\n",
     ["actions[0].level", "actions[2]: got 'record', listed already (actions[1])",
      "actions[3]: got 'record', listed already (actions[1])"]),
    ("actions: [log, record, log, record]\n",
     ["actions[2]: got 'log', listed already (actions[0])", "actions[3]: got 'record', listed already (actions[1])"]),
    ("rules:\n  - name: exploding_tensor\n    actions: [log, record, log, record]\n",
     ["rules[0].actions[2]: got 'log', listed already (rules[0].actions[0])",
      "rules[0].actions[3]: got 'record', listed already (rules[0].actions[1])"]),
])
def test_every_duplicate_action_is_named(tmp_path: Path, capsys, text: str, said: list[str]) -> None:
    """Trial 42h F4: only the first action listed twice was named."""
    path = tmp_path / "c.yaml"
    path.write_text(text)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{len(said)} errors in" in err and all(s in err for s in said), err

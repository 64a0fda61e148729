"""Trial 36o: rule parameters nested under ``parameters:`` were refused with no word on where they
go; ``benchmarks/store.py --dir`` of a folder that does not exist ended in a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tripwire

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("key", ["parameters", "params"])
def test_nested_rule_parameters_say_where_they_go(key: str) -> None:
    with pytest.raises(tripwire.ConfigError, match=rf"rules\[0\]\.{key}: unknown parameter of rule 'loss_not_decreasing' "
                                                   r"\(a rule's parameters go in its mapping itself, beside its name: "
                                                   r"\{name: loss_not_decreasing, num_steps: \.\.\.\}"):
        tripwire.load_config({"rules": [{"name": "loss_not_decreasing", key: {"num_steps": 30}}]})
    config = tripwire.load_config({"rules": [{"name": "loss_not_decreasing", "num_steps": 30}]})
    assert config.rules


def test_the_store_benchmark_refuses_a_dir_that_does_not_exist(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "store.py"), "--quick", "--dir",
                           str(tmp_path / "missing")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "is not a directory" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("what", ["class", "function"])
def test_nested_parameters_of_a_users_rule_say_where_they_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             what: str) -> None:
    """Session 37: a rule named ``module:Class`` (or a function) got the bare "unknown parameter"."""
    (tmp_path / "team_rules37.py").write_text(
        "import tripwire\n"
        "class Spiky(tripwire.Rule):\n"
        "    name = 'spiky'\n"
        "    def __init__(self, limit=1.0, **common):\n"
        "        super().__init__(**common)\n"
        "        self.limit = limit\n"
        "    def check(self, history, step, mode):\n"
        "        return None\n"
        "def flat(history, step, mode):\n"
        "    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    target = "team_rules37:Spiky" if what == "class" else "team_rules37:flat"
    with pytest.raises(tripwire.ConfigError, match=r"rules\[0\]\.parameters: unknown parameter of rule .*\(a rule's "
                                                   r"parameters go in its mapping itself, beside its name"):
        tripwire.Session(rules=[{"name": target, "parameters": {"limit": 2.0}}], write=False)

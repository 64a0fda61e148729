"""Trial 32i F1: numpy numbers as rule (and action) parameters become Python numbers when the
config is loaded, so run.json can hold them; a failed atomic JSON write leaves no temporary file."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire._config import ActionSpec, RuleSpec
from tripwire._writer import atomic_write_json


def test_a_numpy_rule_parameter_is_a_python_number_once_loaded() -> None:
    cfg = tripwire.load_config({"rules": [{"name": "loss_not_decreasing", "patience": np.int64(3),
                                           "actions": [{"name": "log", "level": np.str_("warning")}]}]})
    rule = cfg.to_dict()["rules"][0]
    assert rule["patience"] == 3 and type(rule["patience"]) is int
    assert type(rule["actions"][0]["level"]) is str
    json.dumps(cfg.to_dict())  # (raised "Object of type int64 is not JSON serializable")


def test_a_session_with_a_numpy_rule_parameter_writes_run_json(tmp_path: Path) -> None:
    cfg = tripwire.load_config({"rules": [{"name": "loss_not_decreasing", "patience": np.int64(3)}]})
    session = tripwire.Session(cfg, out_dir=tmp_path / "run")
    try:
        stored = json.loads((tmp_path / "run" / "run.json").read_text())
        assert stored["config"]["rules"][0]["patience"] == 3
    finally:
        session.close()
    assert not [p for p in (tmp_path / "run").iterdir() if p.name.endswith(".tmp")]


def test_numpy_values_inside_lists_and_arrays_are_python_ones() -> None:
    spec = ActionSpec.parse({"name": "mypkg:act", "levels": np.array([1, 2]), "w": [np.float32(0.5)]}, "actions[0]")
    assert spec.params == {"levels": [1, 2], "w": [0.5]}
    assert all(type(v) is int for v in spec.params["levels"]) and type(spec.params["w"][0]) is float
    rule = RuleSpec("mypkg:Rule", {"k": {"n": np.int32(4)}})
    assert type(rule.params["k"]["n"]) is int


def test_atomic_write_json_removes_its_temporary_file_when_the_data_is_not_json(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    with pytest.raises(TypeError, match="not JSON serializable"):
        atomic_write_json(target, {"a": object()})
    assert list(tmp_path.iterdir()) == []

"""Trial 37l: ``tripwire watch --json`` printed no summary line for a usage error argparse refuses
(``--interval abc``, an unknown flag), where ``--interval 0`` printed one, and docs/cli.md says the
last line is the summary whatever the exit status but 130; ``validate --json`` printed no object for
a refused ``--framework``, and kept a YAML error's line breaks in ``errors``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tripwire
from tripwire._cli import main


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    with tripwire.Session(out_dir=tmp_path / "run", save_interval=1) as s:
        for step in range(3):
            s.step("train", step, {"loss": (1.0, "losses")})
    return tmp_path / "run"


@pytest.mark.parametrize("bad", [["--interval", "abc"], ["--bogus"]])
def test_watch_json_prints_its_summary_for_a_usage_error(run_dir: Path, bad: list[str],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["watch", str(run_dir), "--once", "--json", *bad])
    assert done.value.code == 2
    out, err = capsys.readouterr()
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["type"] == "summary" and summary["exit_code"] == 2 and summary["run"] == str(run_dir)
    assert summary["error"] and summary["error"] in err


def test_validate_json_prints_its_object_for_a_refused_framework(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("rules: [default]\n")
    with pytest.raises(SystemExit) as done:
        main(["validate", str(config), "--framework", "torch", "--json"])
    assert done.value.code == 2
    got = json.loads(capsys.readouterr().out)
    assert got["valid"] is False and got["framework"] == "torch" and "torch" in got["errors"][0]


def test_validate_json_errors_are_one_line_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "broken.yaml"
    config.write_text("rules: [default\n  - x: : :\n")
    assert main(["validate", str(config), "--json"]) == 2
    out, err = capsys.readouterr()
    (error,) = json.loads(out)["errors"]
    assert "\n" not in error and error in err


def test_a_missing_config_file_is_told_with_what_a_command_line_accepts(tmp_path: Path, run_dir: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Trial 37l: "accepted: the path of a YAML file, a mapping, a Config or None (the defaults)": the
    last three are the Python API's."""
    missing = tmp_path / "missing.yaml"
    assert main(["validate", str(missing), "--json"]) == 2
    out, err = capsys.readouterr()
    assert json.loads(out)["errors"] == [f"config: no such file {str(missing)!r}; accepted: the path of a YAML file"]
    assert err.strip().endswith("accepted: the path of a YAML file")
    assert main(["watch", str(run_dir), "--once", "--config", str(missing)]) == 2
    assert "a mapping" not in capsys.readouterr().err


def test_a_training_appended_from_a_later_step_is_said_to_begin_there(tmp_path: Path) -> None:
    """Trial 37l: a loop that appended to a run from its own step 20 was recorded (and said by
    tripwire inspect) as beginning "from train step 0", the session's counter then."""
    out = tmp_path / "run"
    with tripwire.Session(out_dir=out, save_interval=1) as s:
        for step in range(20):
            s.step("train", step, {"loss": (1.0, "losses")})
    with tripwire.Session(out_dir=out, save_interval=1) as s:
        for step in range(20, 30):
            s.step("train", step, {"loss": (1.0, "losses")})
    trainings = tripwire.open_run(out).trainings[0]
    assert [t["steps"].get("train") for t in trainings] == [None, 20]

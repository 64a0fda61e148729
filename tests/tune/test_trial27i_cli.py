"""Trial 27i: ``tune --resume-if-exists`` with a YAML that changes the job said "continuing the job"
and then refused it in the name of ``--resume``, a flag not given; and a plain ``tune`` on a started
job named ``--resume`` only, where ``--resume-if-exists`` is the documented fix for a scheduled run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tripwire._cli import main

from test_trial27b_cli import YAML, _config  # (tests/tune is on sys.path, as tune_trainables is)


def test_a_changed_yaml_under_resume_if_exists_is_refused_in_its_name_before_any_continuing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    assert main(["tune", "--no-progress", str(config)]) == 0
    config.write_text(YAML.format(max_jobs=3).replace("seed: 0", "seed: 1"))
    capsys.readouterr()
    assert main(["tune", "--resume-if-exists", "--no-progress", str(config)]) == 2
    err = capsys.readouterr().err
    assert "continuing the job" not in err, err
    assert err.count("\n") == 1 and "--resume-if-exists: " in err and "--resume:" not in err, err
    assert "differs from the job journaled in" in err and "['seed']" in err


def test_a_plain_run_of_a_started_job_names_both_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    assert main(["tune", "--no-progress", str(config)]) == 0
    capsys.readouterr()
    assert main(["tune", "--no-progress", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"tripwire tune --resume {config}" in err and f"tripwire tune --resume-if-exists {config}" in err, err

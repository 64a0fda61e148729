"""Trial 28f, finding 2 (3): a URL as a tuning journal (``s3://runs/tuning.db``) was told to create a
local folder ``'s3:/runs'``, wrote the journal in ``./s3:/runs`` where that folder existed, and
``tripwire tune-report s3://...`` read that local file. A URL (``s3://``, ``gs://``, ``file://``,
and the one-slash form ``s3:/`` that ``os.path.normpath`` makes) is refused as the journal of
``Tuner``, ``Tuner.resume``, ``TuningResult.from_journal``, ``tune-report`` and a tune YAML."""

from __future__ import annotations

from pathlib import Path

import pytest
import tune_trainables as tt

from tripwire._cli import main
from tripwire._errors import ConfigError
from tripwire.tune import Continuous, RandomSearch, Tuner, TuningResult

SPACE = {"x": Continuous(0.0, 1.0)}
URLS = ["s3://runs/tuning.db", "s3:/runs/tuning.db", "gs://b/tuning.db", Path("s3://runs/tuning.db")]


@pytest.fixture()
def local_s3_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The repro's ./s3:/runs: a local folder where the journal of an s3:// URL was written."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s3:" / "runs").mkdir(parents=True)
    return tmp_path


@pytest.mark.parametrize("url", URLS, ids=str)
def test_a_url_journal_is_refused_by_the_tuner(local_s3_folder: Path, url: object) -> None:
    shown = str(url)
    with pytest.raises(ConfigError, match=rf"^journal: got '{shown}'; accepted: a local file path \(remote stores "
                                          r"such as (s3|gs):// are not supported; a journal is a local SQLite file"):
        Tuner(tt.train_curve, SPACE, strategy=RandomSearch(3), max_jobs=1, journal=url)  # type: ignore[arg-type]
    assert list((local_s3_folder / "s3:" / "runs").iterdir()) == []   # nothing written in ./s3:/runs


def test_a_file_url_journal_is_answered_with_its_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^journal: got 'file:///tmp/x/tuning.db'; accepted: a local file path "
                                          r"\(not a URL: write the path itself, '/tmp/x/tuning.db'\)"):
        Tuner(tt.train_curve, SPACE, strategy=RandomSearch(3), max_jobs=1, journal="file:///tmp/x/tuning.db")


def test_a_url_journal_is_refused_by_resume_and_from_journal(local_s3_folder: Path) -> None:
    # a journal at ./s3:/runs/tuning.db (what the URL wrote): not read for the URL
    Tuner(tt.train_curve, SPACE, strategy=RandomSearch(3), max_jobs=1, seed=0,
          journal=str(local_s3_folder / "s3:" / "runs" / "tuning.db")).fit()
    for url in ("s3://runs/tuning.db", "s3:/runs/tuning.db"):
        with pytest.raises(ConfigError, match=rf"^Tuner.resume: got '{url}'; accepted: a local file path \(remote"):
            Tuner.resume(url)
        with pytest.raises(ConfigError, match=rf"^TuningResult.from_journal: got '{url}'; accepted: a local file"):
            TuningResult.from_journal(url)
    with pytest.raises(ConfigError, match=r"^warm_start: got 'gs://b/old.db'; accepted: a local file path"):
        Tuner(tt.train_curve, SPACE, strategy=RandomSearch(3), max_jobs=1, warm_start=["gs://b/old.db"])


def test_tune_report_refuses_a_url_journal(local_s3_folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Tuner(tt.train_curve, SPACE, strategy=RandomSearch(3), max_jobs=1, seed=0,
          journal=str(local_s3_folder / "s3:" / "runs" / "tuning.db")).fit()
    capsys.readouterr()
    assert main(["tune-report", "s3://runs/tuning.db"]) == 2   # (it read ./s3:/runs/tuning.db, exit 0)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("tripwire tune-report: error: journal: got 's3://runs/tuning.db'; accepted: a "
                                   "local file path (remote stores such as s3:// are not supported; a journal is a "
                                   "local SQLite file: run the job on a local path")


def test_a_tune_yaml_with_a_url_journal_is_refused_as_written(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "tune.yaml"
    config.write_text("train: tune_trainables:train_curve\nspace:\n  x: {type: continuous, low: 0.0, high: 1.0}\n"
                      "strategy: {type: random, max_resource: 3}\nmax_jobs: 1\njournal: s3://runs/tuning.db\n")
    assert main(["tune", "--no-progress", str(config)]) == 2
    err = capsys.readouterr().err
    # (it was made a path beside the YAML: '<dir>/s3:/runs/tuning.db', and its folder "does not exist")
    assert f"{str(config)!r}: journal: got 's3://runs/tuning.db'; accepted: a local file path (remote stores" in err
    assert "does not exist" not in err

"""Trial 28b, the journal of a long job: the executor given on resume (F5), the wall time of a
SIGKILLed session (F2), a journal copied while its job runs (F3), and a URL as the journal (28f F2)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import tune_trainables as tt

from tripwire._cli import main
from tripwire.tune import Continuous, LocalExecutor, RandomSearch, Tuner, TuningResult
from tripwire.tune._journal import Journal

HERE = Path(tt.__file__).parent
SPACE = {"x": Continuous(0.0, 1.0)}


def _job(path: Path) -> dict[str, Any]:
    with Journal(path, readonly=True) as j:
        return j.job  # type: ignore[return-value]


# ---- F5: the executor given on resume is journaled ------------------------------------------------
FRESH = {"type": "local", "start_method": "spawn", "reuse_workers": False}


def test_an_executor_given_on_resume_is_journaled_and_kept_by_a_plain_resume(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    journal = tmp_path / "ex.db"
    Tuner(tt.train_curve, SPACE, strategy=RandomSearch(3), max_jobs=2, seed=0, journal=str(journal)).fit()
    assert _job(journal)["executor"] == {"type": "local", "start_method": "spawn", "reuse_workers": True}
    # the repro: Tuner.resume(path, executor="dask", max_jobs=420): max_jobs journaled, the executor not
    resumed = Tuner.resume(journal, executor=FRESH, max_jobs=3)
    assert resumed.executor.to_dict() == FRESH            # used ...
    result = resumed.fit()
    assert len(result.trials) == 3 and result.trials[2].status == "completed"
    job = _job(journal)
    assert (job["max_jobs"], job["executor"]) == (3, FRESH)   # ... and journaled, as the limits
    assert result.job["executor"] == FRESH
    again = Tuner.resume(journal)                          # a plain resume (after the next crash, say)
    assert isinstance(again.executor, LocalExecutor) and again.executor.to_dict() == FRESH
    capsys.readouterr()
    assert main(["tune-report", str(journal), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["job"]["executor"] == FRESH


def test_a_dask_executor_given_on_resume_is_journaled(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    journal = tmp_path / "ed.db"
    Tuner(tt.train_curve, SPACE, strategy=RandomSearch(3), max_jobs=1, seed=0, journal=str(journal)).fit()
    Tuner.resume(journal, executor="dask").fit()   # (a finished job: no worker starts)
    assert _job(journal)["executor"] == {"type": "dask", "address": None}
    from tripwire.tune import DaskExecutor

    again = Tuner.resume(journal)
    assert isinstance(again.executor, DaskExecutor) and again.executor.to_dict() == {"type": "dask", "address": None}


def test_a_plain_resume_leaves_the_journaled_executor_as_it_is(tmp_path: Path) -> None:
    journal = tmp_path / "keep.db"
    Tuner(tt.train_curve, SPACE, strategy=RandomSearch(3), max_jobs=1, seed=0, journal=str(journal),
          executor=FRESH).fit()
    Tuner.resume(journal, max_jobs=2).fit()
    assert (_job(journal)["max_jobs"], _job(journal)["executor"]) == (2, FRESH)


YAML = """\
train: tune_trainables:train_curve
space:
  x: {{type: continuous, low: 0.0, high: 1.0}}
strategy: {{type: random, max_resource: 3}}
max_jobs: {max_jobs}
seed: 0
journal: tuning.db
{executor}"""


def test_the_yamls_executor_on_resume_is_journaled(tmp_path: Path) -> None:
    config = tmp_path / "tune.yaml"
    config.write_text(YAML.format(max_jobs=1, executor=""))
    assert main(["tune", "--no-progress", str(config)]) == 0
    config.write_text(YAML.format(max_jobs=2, executor="executor: {type: local, reuse_workers: false}\n"))
    assert main(["tune", "--resume", "--no-progress", str(config)]) == 0
    assert _job(tmp_path / "tuning.db")["executor"] == FRESH
    # `executor: local` in the YAML is the YAML's executor too (it was read as "the journaled one")
    config.write_text(YAML.format(max_jobs=3, executor="executor: local\n"))
    assert main(["tune", "--resume", "--no-progress", str(config)]) == 0
    assert _job(tmp_path / "tuning.db")["executor"] == {"type": "local", "start_method": "spawn",
                                                         "reuse_workers": True}

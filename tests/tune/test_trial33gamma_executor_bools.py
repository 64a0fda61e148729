"""Trial 33f M5 (fixer gamma F2): ``LocalExecutor(reuse_workers="yes")`` and the tune YAML's
``executor: {type: local, reuse_workers: "yes"}`` were accepted (``bool("yes")``: the job ran).
A bool parameter takes a bool only."""

from __future__ import annotations

from pathlib import Path

import pytest
import tune_trainables as tt

from tripwire._cli import main
from tripwire.tune import Continuous, LocalExecutor, RandomSearch, Tuner
from tripwire.tune._errors import ConfigError


@pytest.mark.parametrize("value", ["yes", "false", 1, 0, None, 1.0])
def test_reuse_workers_takes_a_bool_only(value: object) -> None:
    with pytest.raises(ConfigError, match=rf"^reuse_workers: got {value!r}; accepted: true or false$"):
        LocalExecutor(reuse_workers=value)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=rf"^reuse_workers: got {value!r}; accepted: true or false$"):
        Tuner(tt.train_curve, {"x": Continuous(0.0, 1.0)}, max_jobs=1,
              executor={"type": "local", "reuse_workers": value})


@pytest.mark.parametrize("reuse", [True, False])
def test_a_bool_reuse_workers_is_taken_as_it_is(tmp_path: Path, reuse: bool) -> None:
    executor = LocalExecutor(reuse_workers=reuse)
    assert executor.to_dict()["reuse_workers"] is reuse
    result = Tuner(tt.train_curve, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(2), max_jobs=2, seed=0,
                   journal=str(tmp_path / "j.db"), executor=executor).fit()
    assert result.counts()["completed"] == 2
    assert (executor.worker_starts == 1) is reuse  # (False: a fresh worker per trial)


def test_a_yaml_reuse_workers_string_is_refused_before_the_job(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "tune.yaml"
    config.write_text("train: tune_trainables:train_curve\n"
                      "space:\n  x: {type: continuous, low: 0.0, high: 1.0}\n"
                      "strategy: {type: random, max_resource: 2}\nmax_jobs: 1\njournal: j.db\n"
                      "executor: {type: local, reuse_workers: 'yes'}\n")
    assert main(["tune", "--no-progress", str(config)]) == 2
    assert "reuse_workers: got 'yes'; accepted: true or false" in capsys.readouterr().err
    assert not (tmp_path / "j.db").exists()

"""Trial 33d F5: the README and pyproject call the extra ``bohb`` ("the tuner's model-based sampler"),
but ``Hyperband(sampler="bohb")`` was refused (``sampler='bohb' is not one of 'random', 'tpe'``).
``"bohb"`` is another name of ``"tpe"``, in Python and in a tune YAML, stored and journaled as
``"tpe"``; any other name is refused in the house format, with a did-you-mean."""

from __future__ import annotations

from pathlib import Path

import pytest

from tripwire._cli import main
from tripwire._errors import ConfigError
from tripwire.tune import Continuous, Hyperband, Tuner, TuningResult
from tripwire.tune._strategy import strategy_from_dict

from tune_trainables import train_curve  # (tests/tune is on sys.path)

pytest.importorskip("optuna")


def test_bohb_is_the_tpe_sampler_under_one_name() -> None:
    h = Hyperband(1, 9, 3, sampler="bohb", random_fraction=0.25, min_points=3)
    assert h == Hyperband(1, 9, 3, sampler="tpe", random_fraction=0.25, min_points=3)
    assert h.sampler_name == "tpe" and h.to_dict()["sampler"] == "tpe" and "sampler='tpe'" in repr(h)
    from_yaml = strategy_from_dict({"type": "hyperband", "min_resource": 1, "max_resource": 9, "sampler": "bohb",
                                    "random_fraction": 0.25, "min_points": 3})
    assert from_yaml == h


@pytest.mark.parametrize("sampler, match", [
    ("bayes", r"^Hyperband sampler: got 'bayes'; accepted: 'random', 'tpe' \(also 'bohb': the same BOHB-style "
              r"sampler, journaled as 'tpe'\)$"),
    ("tep", r"^Hyperband sampler: got 'tep'; did you mean 'tpe'\?; accepted: 'random', 'tpe' \(also 'bohb'"),
    ("BOHB", r"^Hyperband sampler: got 'BOHB'; did you mean 'bohb'\?; accepted: "),
    (None, r"^Hyperband sampler: got None; accepted: 'random', 'tpe' \(also 'bohb'"),
    (["tpe"], r"^Hyperband sampler: got \['tpe'\]; accepted: "),
])
def test_another_sampler_name_is_refused_in_the_house_format(sampler: object, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        Hyperband(1, 9, 3, sampler=sampler)  # type: ignore[arg-type]
    assert isinstance(info.value, ValueError)
    with pytest.raises(ConfigError, match=r"^strategy \(hyperband\): Hyperband sampler: got "):
        strategy_from_dict({"type": "hyperband", "sampler": sampler})


def _fit(sampler: str, journal: Path) -> TuningResult:
    return Tuner(train_curve, {"x": Continuous(0, 1)}, objective="auc", mode="max",
                 strategy=Hyperband(1, 9, 3, sampler=sampler, min_points=3), max_jobs=14, max_parallel_jobs=1,
                 seed=0, journal=journal).fit()


def test_a_bohb_job_is_the_tpe_job_and_is_journaled_as_tpe(tmp_path: Path) -> None:
    bohb, tpe = _fit("bohb", tmp_path / "bohb.db"), _fit("tpe", tmp_path / "tpe.db")
    assert [t.params for t in bohb.trials] == [t.params for t in tpe.trials]
    assert TuningResult.from_journal(tmp_path / "bohb.db").job["strategy"]["sampler"] == "tpe"


_YAML = """\
train: tune_trainables:train_curve
objective: auc
space:
  x: {{type: continuous, low: 0.0, high: 1.0}}
strategy: {{type: hyperband, min_resource: 1, max_resource: 9, sampler: {sampler}, min_points: 3}}
max_jobs: {max_jobs}
seed: 0
journal: tuning.db
"""


def test_a_yaml_names_either_and_resumes_with_the_other(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "tune.yaml"
    config.write_text(_YAML.format(sampler="bohb", max_jobs=6))
    assert main(["tune", "--no-progress", str(config)]) == 0
    config.write_text(_YAML.format(sampler="tpe", max_jobs=10))
    assert main(["tune", "--resume", "--no-progress", str(config)]) == 0
    result = TuningResult.from_journal(tmp_path / "tuning.db")
    assert len(result.trials) == 10 and result.job["strategy"]["sampler"] == "tpe"
    capsys.readouterr()
    config.write_text(_YAML.format(sampler="bayes", max_jobs=10))
    assert main(["tune", "--resume", "--no-progress", str(config)]) == 2
    err = capsys.readouterr().err
    assert "sampler: got 'bayes'; accepted: 'random', 'tpe' (also 'bohb'" in err and err.count("\n") == 1, err

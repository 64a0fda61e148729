"""Session 24's fresh-user trials: core fixes (validation messages)."""

from __future__ import annotations

import pytest

from tripwire import ConfigError
from tripwire._config import load_config


@pytest.mark.parametrize("value", [-1, "soon"])
def test_an_optional_integer_names_null_in_every_refusal(value: object) -> None:
    # trial 24a: num_boost_round -5 was told "an integer >= 1", 'a' "an integer >= 1 or null"
    with pytest.raises(ConfigError, match=r"^save\.end_step: got .*; accepted: an integer >= 0 or null$"):
        load_config({"save": {"end_step": value}})


def test_long_run_benchmark_quick(tmp_path) -> None:
    # trial 24e: a step's cost and a watch replay's cost per record grew with the run; the benchmark
    # that measures it must run (its figures are printed, not asserted: machines differ)
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "long_run.py"
    out = subprocess.run([sys.executable, str(script), "--quick", "--json", str(tmp_path / "l.json")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "save_interval 1:" in out.stdout and "watch --once" in out.stdout
    results = json.loads((tmp_path / "l.json").read_text())["results"]
    assert [r["interval"] for r in results] == [1, 10] and all(r["step_ratio"] > 0 for r in results)


def test_history_series_are_read_only_views_that_grow(tmp_path) -> None:
    # trial 24e: each read of a growing series concatenated it again (a step cost more the longer
    # the run); the series are now views of columns that grow, and finite_series drops NaN/inf
    import numpy as np

    import tripwire

    s = tripwire.Session(write=False, save_interval=1, rules=[])
    for step, v in enumerate([1.0, 2.0, float("nan"), 4.0, float("inf"), 6.0]):
        s.step("train", step, {"loss": (v, "losses")})
        steps, values = s.history.series("loss")
        assert len(steps) == step + 1 and not values.flags.writeable
    fs, fv = s.history.finite_series("loss")
    assert fs.tolist() == [0, 1, 3, 5] and fv.tolist() == [1.0, 2.0, 4.0, 6.0]
    assert s.history.value("loss", "raw", 3) == 4.0 and s.history.value("loss", "raw", 7) is None
    s.step("train", 2, {"loss": (9.0, "losses")})  # (a step written again, out of order: a scan)
    assert s.history.value("loss", "raw", 2) == 9.0 and s.history.steps_between("train", 1, 5) == [2, 3, 4, 5]
    assert s.history.finite_series("loss")[1].tolist() == [1.0, 2.0, 4.0, 6.0, 9.0]
    cols = s.history.scalar_columns()
    assert cols["step"].tolist() == [0, 1, 2, 3, 4, 5, 2] and np.isnan(cols["value"][2])


def test_a_misspelled_keyword_of_session_or_load_config_is_a_type_error_naming_it() -> None:
    # trial 24h: Session(save_intervall=5) was a ConfigError but no TypeError, naming no class; a
    # callback's trail= was "did you mean 'strict'?", its own trial= not among the accepted
    import tripwire
    from tripwire._config import load_config

    with pytest.raises(TypeError, match=r"^Session\(save_intervall=5\): unknown argument 'save_intervall'; did you "
                                        r"mean 'save_interval'\? \(accepted: config, framework, .*strict\)"):
        tripwire.Session(save_intervall=5)
    with pytest.raises(TypeError, match=r"^load_config\(save_intervall=5\): unknown argument"):
        load_config({}, save_intervall=5)
    pytest.importorskip("xgboost")
    from tripwire.integrations.xgboost import TripwireCallback

    with pytest.raises(TypeError, match=r"^TripwireCallback\(trail=None\): unknown argument 'trail'; did you mean "
                                        r"'trial'\? \(accepted: config, trial, trial_metric, eval_names"):
        TripwireCallback(trail=None)

"""tensor_names(collection=...) of a collection the run knows of but holds no tensor of yet is [],
in the training and in a stored run alike (trial 21b: a validation metric's collection before the first
validation raised, and a rule listing it was disabled at step 0)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire import History


class AnyMetricNaN(tripwire.Rule):
    """Every tensor of ``metrics``, read at every step: one that is NaN."""

    name = "trial21b_any_metric_nan"
    default_modes = ("train", "eval")

    def requirements(self) -> list[tripwire.Requirement]:
        return [tripwire.Requirement("metrics", ("raw",), modes=("train", "eval"))]

    def check(self, history: Any, step: int, mode: str) -> Any:
        for n in history.tensor_names(collection="metrics"):
            got = history.latest(n, "raw", mode)
            if got is not None and got[1] != got[1]:
                return self.finding(step, mode, f"{n} is NaN")
        return None


def test_a_rule_listing_a_collection_before_its_first_tensor_is_not_disabled(tmp_path: Path) -> None:
    s = tripwire.Session(out_dir=str(tmp_path / "run"), rules=[AnyMetricNaN()], save_interval=1)
    for step in range(3):
        s.step("train", step, {"loss": (1.0, "losses")})
    s.step("eval", 2, {"val_acc": (float("nan"), "metrics")})
    s.close()
    assert [(f.rule, f.kind, f.step, f.mode, f.message) for f in s.findings] == [
        ("trial21b_any_metric_nan", "finding", 2, "eval", "val_acc is NaN")]


def test_an_empty_history_knows_the_built_in_collections() -> None:
    h = History()
    assert h.tensor_names(collection="metrics") == [] and h.tensor_names(collection="gradients") == []
    with pytest.raises(tripwire.TensorNotFoundError,
                       match=r"collection 'metricz' not in this run; did you mean 'metrics'\?; available: none"):
        h.tensor_names(collection="metricz")
    h.add_step("train", 0, 0, 0.0, [("loss", ("raw",))], np.ones(1), declare={"loss": ["losses"]})
    assert h.tensor_names(collection="metrics", regex="acc") == []
    with pytest.raises(tripwire.TensorNotFoundError, match=r"collection 'nothing' not in this run; available: losses"):
        h.tensor_names(collection="nothing")


def test_a_history_that_knows_its_config_knows_its_collections_and_the_built_in_ones() -> None:
    h = History()
    h.configured_collections = {"losses", "mine"}
    assert h.tensor_names(collection="mine") == [] and h.tensor_names(collection="weights") == []
    with pytest.raises(tripwire.TensorNotFoundError, match=r"collection 'mien' not in this run; did you mean 'mine'\?; "
                                                           r"available: none \(and, with no tensor yet, the config's mine\)"):
        h.tensor_names(collection="mien")


def test_a_stored_run_answers_as_the_training_did(tmp_path: Path) -> None:
    config = {"out_dir": str(tmp_path / "run"), "save": {"interval": 1}, "rules": [AnyMetricNaN()],
              "collections": {"losses": {}, "mine": {"kinds": ["metrics"], "include": ["^mine/"], "reductions": ["raw"]}}}
    s = tripwire.Session(config)
    s.step("train", 0, {"loss": (1.0, "losses")})
    in_training = s.history.tensor_names(collection="metrics")
    s.close()
    run = tripwire.open_run(tmp_path / "run")
    assert in_training == run.tensor_names(collection="metrics") == []  # configured, nothing captured yet
    assert run.tensor_names(collection="mine") == []
    assert run.tensor_names(collection="losses") == ["loss"]
    # a built-in collection the run was not configured with: [] too, as in the training (trial 21d)
    assert run.tensor_names(collection="weights") == [] == s.history.tensor_names(collection="weights")
    with pytest.raises(tripwire.TensorNotFoundError, match=r"collection 'metric' not in this run; did you mean 'metrics'\?"):
        run.tensor_names(collection="metric")


def test_a_bad_regex_is_an_error_for_an_empty_collection_too() -> None:
    with pytest.raises(tripwire.ConfigError, match=r"regex: invalid regular expression '\('"):
        History().tensor_names(collection="metrics", regex="(")

"""Trial 26h (XGBoost): an unknown rule name given to the callback's constructor was said twice, a
WARNING from load_config ("did you mean ...?") and then the ConfigError with the same "did you
mean"; and a training whose objective has no classes records the class rules it switches off, with
why, in the run (the worker meta's ``switched_off``), where ``tripwire watch`` reads it."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")

import tripwire  # noqa: E402
from tripwire import ConfigError  # noqa: E402
from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402


def test_an_unknown_rule_in_the_constructor_is_said_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        with pytest.raises(ConfigError, match=r"exploding_tensr.*did you mean 'exploding_tensor'"):
            TripwireCallback(out_dir=tmp_path / "run", rules=["exploding_tensr"])
    said = [r.getMessage() for r in caplog.records if "exploding_tensr" in r.getMessage()]
    assert said == [], said  # (the ConfigError says it; no WARNING before it)

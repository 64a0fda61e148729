"""Trial 40b F3 (Keras): ``TripwireCallback(rules=["dead_relus"])`` logged load_config's WARNING on an
unregistered rule name, then its constructor raised the ConfigError with the same "did you mean": said
twice, the first time as if the name might still be taken.

Keras runs on the torch backend, set before keras is imported."""

from __future__ import annotations

import logging
import os

os.environ["KERAS_BACKEND"] = "torch"

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

pytest.importorskip("keras")

from tripwire import ConfigError  # noqa: E402
from tripwire.integrations.keras import TripwireCallback  # noqa: E402


def test_a_misspelled_rule_is_said_once_by_the_keras_callback(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="tripwire"):
        with pytest.raises(ConfigError, match=r"rules\[0\]: unknown rule 'dead_relus'; did you mean 'dead_relu'\?"):
            TripwireCallback(rules=["dead_relus"], out_dir=tmp_path / "r")
    said = [r.getMessage() for r in caplog.records if "dead_relus" in r.getMessage()]
    assert said == [], said  # (the error says it; no WARNING before it)

"""Trial 26h (Lightning, one process): an unknown rule name given to the callback's constructor is
said once (the ConfigError), not first as a WARNING too."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("lightning")

from tripwire import ConfigError  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402


def test_an_unknown_rule_in_the_constructor_is_said_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        with pytest.raises(ConfigError, match=r"exploding_tensr.*did you mean 'exploding_tensor'"):
            TripwireCallback(out_dir=tmp_path / "run", rules=["exploding_tensr"])
    said = [r.getMessage() for r in caplog.records if "exploding_tensr" in r.getMessage()]
    assert said == [], said  # (the ConfigError says it; no WARNING before it)

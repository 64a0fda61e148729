"""Trial 33i F4: the config-time check of a rule's named inputs (trial 33a F1) spoke, for XGBoost, of a
tensor the run never reads: a loss rule left at ``loss='loss'`` reads XGBoost's own
``<evalset>-<metric>`` (``train-logloss``), all of kind metrics, so a config that keeps no metrics
collection is refused naming that, not "remove '^loss$' from collections.losses.exclude"; one that
keeps metrics is taken (the names are known at training only), and the same config in another
framework still gets the generic message."""

from __future__ import annotations

import pytest

pytest.importorskip("xgboost")

from tripwire import ConfigError, Session, load_config  # noqa: E402
from tripwire._session import check_config  # noqa: E402
from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402

NO_METRICS = {"rules": [{"name": "loss_not_decreasing", "num_steps": 5}], "save": {"interval": 1},
              "collections": {"losses": {"exclude": ["^loss$"]}}}


def test_xgboost_without_a_metrics_collection_is_refused_naming_metrics(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"in an XGBoost run reads XGBoost's own evaluation results .*no collection "
                                          r"of kind metrics") as err:
        TripwireCallback(NO_METRICS, out_dir=str(tmp_path / "r"))
    assert "collections.losses.exclude" not in str(err.value)


def test_xgboost_with_metrics_kept_is_taken(tmp_path) -> None:
    config = dict(NO_METRICS, collections={"losses": {"exclude": ["^loss$"]}, "metrics": None})
    TripwireCallback(config, out_dir=str(tmp_path / "r"))
    assert check_config(load_config(config), framework="xgboost")


def test_other_frameworks_keep_the_generic_message() -> None:
    with pytest.raises(ConfigError, match=r"collections\.losses\.exclude\[0\] '\^loss\$' keeps it out"):
        Session(**NO_METRICS, write=False)

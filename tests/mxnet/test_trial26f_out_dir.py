"""Trial 26f finding 4: MXNet's hook and estimator handler report a default ``out_dir`` as every
integration does, ``tripwire-runs/run-<date>-<time>`` relative to the current directory (XGBoost's was
absolute; tests/integrations/test_trial26f_out_dir.py checks the others)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire.integrations.mxnet import TripwireHandler

from mxnet_testlib import TripwireHook, gluon, mx, sgd_estimator

DEFAULT = re.compile(r"tripwire-runs/run-\d{8}-\d{6}(-\d+)?")


def test_hook_and_handler_report_the_default_out_dir_relative(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    hook = TripwireHook(rules=["default"])
    net = gluon.nn.Dense(1)
    net.initialize()
    hook.register_block(net)
    hook.begin_step("train")
    with mx.autograd.record():
        loss = (net(mx.nd.array(np.ones((4, 3)))) ** 2).mean()
    loss.backward()
    hook.end_step(loss=loss)
    hook.close()
    shown = str(hook.out_dir)
    assert DEFAULT.fullmatch(shown) and not Path(shown).is_absolute(), shown
    assert tripwire.open_run(tmp_path / shown).steps("train") == [0]

    handler = TripwireHandler(rules=["default"])
    net = gluon.nn.Dense(10)
    net.initialize()
    est, data = sgd_estimator(net, rows=100)
    est.fit(data, epochs=1, event_handlers=[handler])
    shown = str(handler.out_dir)
    assert DEFAULT.fullmatch(shown) and not Path(shown).is_absolute(), shown
    assert tripwire.open_run(tmp_path / shown).steps("train")

"""Trial 25h's MXNet findings on a later fit through the same TripwireHandler: blocks frozen
(``grad_req="null"``) between two fits made the fit "other weights" (the fingerprint covered the
trainable parameters only), and other weights with the same norms (every sign flipped) were taken for
the same weights (the fingerprint was the sums of squares alone). The fingerprint now covers all of
``net.collect_params()`` with each one's sum of squares and sum. A second estimator refused by the
handler reopened the run the first fit ended ``complete``; it ended ``failed`` at exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tripwire
from tripwire import ConfigError
from tripwire.integrations.mxnet import TripwireHandler
from tripwire.rules._common import BuiltinRule

from mxnet_testlib import gluon, mlp, sgd_estimator

RULES = ["default", "loss_diverging"]


def _estimator(net: gluon.Block) -> tuple[object, object]:
    return sgd_estimator(net, rows=200)


def _continued(out: Path) -> list[bool]:
    return [t["continued"] for t in tripwire.open_run(out).trainings.get(0, [{"continued": False}])]


def test_freezing_then_unfreezing_blocks_between_fits_continues_the_training(tmp_path: Path) -> None:
    net = mlp()
    est, data = _estimator(net)
    handler = TripwireHandler(out_dir=str(tmp_path / "run"), rules=RULES, actions=["record"])
    est.fit(data, epochs=1, event_handlers=[handler])
    net[0].collect_params().setattr("grad_req", "null")  # the first block frozen: the same weights
    est.fit(data, epochs=1, event_handlers=[handler])
    net[0].collect_params().setattr("grad_req", "write")  # unfrozen again
    est.fit(data, epochs=1, event_handlers=[handler])
    rules = [r for r in handler.hook.session.rules if isinstance(r, BuiltinRule)]
    assert rules and all(r.armed_from == {} for r in rules)  # (the rules kept their view of fit 1)
    assert _continued(tmp_path / "run") == [False, True, True]


def test_other_weights_with_the_same_norms_are_a_new_training(tmp_path: Path) -> None:
    net = mlp()
    est, data = _estimator(net)
    handler = TripwireHandler(out_dir=str(tmp_path / "run"), rules=RULES, actions=["record"])
    est.fit(data, epochs=1, event_handlers=[handler])
    for p in net.collect_params().values():  # every sign flipped: the same norms
        p.set_data(-p.data())
    est.fit(data, epochs=1, event_handlers=[handler])
    rules = [r for r in handler.hook.session.rules if isinstance(r, BuiltinRule)]
    assert rules and all(r.armed_from["train"] == r.fit_from["train"] == 4 for r in rules)
    assert _continued(tmp_path / "run") == [False, False]


def test_the_same_parameters_loaded_again_continue_the_training(tmp_path: Path) -> None:
    net = mlp()
    est, data = _estimator(net)
    handler = TripwireHandler(out_dir=str(tmp_path / "run"), rules=RULES, actions=["record"])
    est.fit(data, epochs=1, event_handlers=[handler])
    net.save_parameters(str(tmp_path / "net.params"))
    net.load_parameters(str(tmp_path / "net.params"))
    est.fit(data, epochs=1, event_handlers=[handler])
    assert _continued(tmp_path / "run") == [False, True]


def test_a_second_estimator_is_refused_before_the_complete_run_is_touched(tmp_path: Path) -> None:
    est, data = _estimator(mlp())
    handler = TripwireHandler(out_dir=str(tmp_path / "run"), rules=RULES, actions=["record"])
    est.fit(data, epochs=1, event_handlers=[handler])
    assert tripwire.open_run(tmp_path / "run").status == "complete"
    other, _ = _estimator(mlp(seed=1))
    with pytest.raises(ConfigError, match=r"one handler follows one network; create a new handler per estimator"):
        other.fit(data, epochs=1, event_handlers=[handler])  # type: ignore[attr-defined]
    assert tripwire.open_run(tmp_path / "run").status == "complete"
    assert _continued(tmp_path / "run") == [False]  # (no second training recorded)
    est.fit(data, epochs=1, event_handlers=[handler])  # its own estimator again: it goes on
    assert tripwire.open_run(tmp_path / "run").status == "complete"
    assert _continued(tmp_path / "run") == [False, True]


_EXIT_SCRIPT = """
    import sys
    import numpy as np
    from tripwire.integrations.mxnet import TripwireHandler
    from mxnet import gluon
    from mxnet.gluon.contrib.estimator import Estimator
    x = np.random.default_rng(0).normal(size=(32, 8)).astype("float32"); y = (x[:, 0] > 0).astype("float32")
    dl = gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=16)
    def make():
        net = gluon.nn.Sequential(); net.add(gluon.nn.Dense(2, in_units=8)); net.initialize()
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
        return Estimator(net, loss=gluon.loss.SoftmaxCrossEntropyLoss(), trainer=trainer)
    h = TripwireHandler(out_dir=sys.argv[1])
    make().fit(dl, epochs=1, event_handlers=[h])
    try:
        make().fit(dl, epochs=1, event_handlers=[h])
    except Exception as e:
        print(type(e).__name__)
"""


def test_the_complete_run_stays_complete_at_exit_after_a_refused_estimator(tmp_path: Path) -> None:
    """The trial's repro: the run read 'running' after the refusal, and 'failed' after exit."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_EXIT_SCRIPT), str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "ConfigError" in done.stdout
    assert "marked failed" not in done.stderr, done.stderr
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete" and len(run.trainings.get(0, [{}])) == 1

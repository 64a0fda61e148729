"""Trial 26j finding 1, the estimator's twin of the Keras one: a second ``est.fit`` through the same
handler was taken for a new training when the net's parameters were those of one of the last fit's
epoch ends rather than its end: restored after it by a handler whose ``train_end`` runs after the
TripwireHandler's (a "restore the best epoch" handler of higher priority), or a CheckpointHandler's
epoch checkpoint loaded after the fit. The handler now also fingerprints the parameters at each
epoch end; a fit that starts from one of them continues the training."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tripwire
from tripwire.integrations.mxnet import TripwireHandler

from mxnet_testlib import gluon, mlp, mx, sgd_estimator

RULES = ["default", "loss_diverging"]
_est = mx.gluon.contrib.estimator


def _continued(out: Path) -> list[bool]:
    return [t["continued"] for t in tripwire.open_run(out).trainings[0]]


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all((a[k] == b[k]).asnumpy().all() for k in a)


def _values(net: gluon.Block) -> dict[str, Any]:
    return {k: p.data().copy() for k, p in net.collect_params().items()}


class RestoreFirstEpoch(_est.EpochEnd, _est.TrainEnd):
    """Keeps the parameters of the fit's first epoch end and sets them back at ``train_end``
    (priority 0: after the TripwireHandler's, -3000), as a restore-the-best handler does."""

    def __init__(self, net: gluon.Block) -> None:
        self.net = net
        self.kept: dict[str, Any] | None = None
        self.ended: dict[str, Any] | None = None

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        if self.kept is None:
            self.kept = _values(self.net)
        return False

    def train_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.ended = _values(self.net)
        assert self.kept is not None
        for k, p in self.net.collect_params().items():
            p.set_data(self.kept[k])


def test_parameters_restored_after_the_handlers_train_end_continue_the_training(tmp_path: Path) -> None:
    net = mlp()
    est, data = sgd_estimator(net, rows=500)
    handler = TripwireHandler(out_dir=str(tmp_path / "run"), rules=RULES, actions=["record"])
    restore = RestoreFirstEpoch(net)
    est.fit(data, epochs=3, event_handlers=[handler, restore])
    assert restore.ended is not None and not _same(_values(net), restore.ended)  # (restored: not the fit's end)
    est.fit(data, epochs=1, event_handlers=[handler])
    assert _continued(tmp_path / "run") == [False, True]


def test_an_epoch_checkpoint_loaded_after_the_fit_continues_the_training(tmp_path: Path) -> None:
    net = mlp()
    est, data = sgd_estimator(net, rows=500)
    handler = TripwireHandler(out_dir=str(tmp_path / "run"), rules=RULES, actions=["record"])
    checkpoint = _est.CheckpointHandler(str(tmp_path / "ckpt"), model_prefix="m", epoch_period=1)
    est.fit(data, epochs=3, event_handlers=[handler, checkpoint])
    ended = _values(net)
    first = sorted((tmp_path / "ckpt").glob("m-epoch0batch*.params"))
    assert len(first) == 1
    net.load_parameters(str(first[0]))
    assert not _same(_values(net), ended)
    est.fit(data, epochs=1, event_handlers=[handler])
    assert _continued(tmp_path / "run") == [False, True]


def test_the_initial_parameters_set_again_are_still_a_new_training(tmp_path: Path) -> None:
    net = mlp()
    initial = _values(net)
    est, data = sgd_estimator(net, rows=500)
    handler = TripwireHandler(out_dir=str(tmp_path / "run"), rules=RULES, actions=["record"])
    est.fit(data, epochs=2, event_handlers=[handler])
    for k, p in net.collect_params().items():
        p.set_data(initial[k])
    est.fit(data, epochs=1, event_handlers=[handler])
    assert _continued(tmp_path / "run") == [False, False]

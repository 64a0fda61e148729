"""Trial 25e: a second ``est.fit`` through the same handler is a training of its own. Since 7b30cf9
its built-in rules judged it alone even when it continued training the same weights ("2 more
epochs"), and ``tripwire watch`` did not know where it began. Now the handler tells the session
whether the net's weights are as the last fit left them (continued: the rules keep their view of the
earlier fits) or not (the net initialized again: a new training), and the run records it."""

from __future__ import annotations

import shutil
from pathlib import Path

import tripwire
from tripwire._watch import Watcher
from tripwire.integrations.mxnet import TripwireHandler
from tripwire.rules._common import BuiltinRule

from mxnet_testlib import gluon, mlp, mx, sgd_estimator

RULES = ["default", "loss_diverging"]


def _estimator(net: gluon.Block) -> tuple[object, object]:
    return sgd_estimator(net, rows=500)


def test_a_second_fit_of_the_same_weights_continues_and_one_of_weights_initialized_again_does_not(
        tmp_path: Path) -> None:
    net = mlp()
    est, data = _estimator(net)
    handler = TripwireHandler(out_dir=str(tmp_path / "run"), rules=RULES, actions=["record"])
    est.fit(data, epochs=2, event_handlers=[handler])
    est.fit(data, epochs=2, event_handlers=[handler])  # "2 more epochs": the rules keep their view
    rules = [r for r in handler.hook.session.rules if isinstance(r, BuiltinRule)]
    assert rules and all(r.armed_from == {} and r.fit_from["train"] == 20 for r in rules)
    net.initialize(mx.init.Xavier(), force_reinit=True)
    est.fit(data, epochs=2, event_handlers=[handler])  # the net initialized again: a new training
    assert all(r.armed_from["train"] == r.fit_from["train"] == 40 for r in rules)
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete"
    assert [(t["steps"].get("train", 0), t["continued"]) for t in run.trainings[0]] == [(0, False), (20, True),
                                                                                       (40, False)]
    in_process = sorted((f.rule, f.step, f.mode, f.message) for f in handler.findings)
    shutil.rmtree(tmp_path / "run" / "findings", ignore_errors=True)
    watcher = Watcher(tmp_path / "run", {"rules": RULES, "actions": ["record"]}, echo=lambda f: None)
    assert sorted((f.rule, f.step, f.mode, f.message) for f in watcher.watch(once=True)) == in_process

"""Trial 25e: a later training through the same session (a second Keras ``fit``, MXNet ``est.fit``).

Finding 2: since 7b30cf9 every built-in rule judged a later fit alone, also one that continues
training the same model (the notebook habit of running ``model.fit`` again): ``loss_not_decreasing``
stopped a converged model's healthy "train some more" fit. A continued fit now keeps the rules' view
of the earlier fits; a new model (or weights initialized again) is judged alone (trial 25a).

Finding 1: ``tripwire watch`` did not know where a later fit began, so it judged a different training
than the session: a false alarm (exit 1) after a new model's fit, a finding of a continued fit
missed. The run now records where each training began (the worker meta file's ``trainings``) and
watch arms its rules again there, as the session did.

Finding 3: watch said a run "stored no 'l2'" of a collection that stored ``abs_l2`` (``l2`` under
its own name, which the reader gives for it) and exited 3 on a healthy run."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire import ConfigError
from tripwire._cli import main
from tripwire._watch import Watcher
from tripwire.rules._common import BuiltinRule

N = 200
_RNG = np.random.default_rng(0)
FELL = 2.0 * np.exp(-np.arange(N) / 20) + 0.01 + 0.001 * _RNG.standard_normal(N)  # trained to its floor
FLAT = 0.01 + 0.001 * _RNG.standard_normal(N)  # more steps at that floor (a converged model trained on)


def _train(out: Path, fits: Sequence[np.ndarray], continued: Sequence[bool | None], rules: Sequence[Any],
           every_step: bool = False, planned: bool = True) -> tripwire.Session:
    """Fits through one session as the Keras callback runs them: each later one after the run closed,
    ``new_training(continued=...)``, then the run reopened; steps count on."""
    config: dict[str, Any] = {"rules": list(rules), "actions": ["record"]}
    if every_step:
        config["collections"] = {"losses": {"every_step": True}}
    session = tripwire.Session(config, out_dir=str(out), save_interval=10)
    step = 0
    for k, losses in enumerate(fits):
        if k:
            session.new_training(continued=continued[k - 1])
            session.reopen()
        if planned:
            session.set_planned_steps(len(losses))
        for value in losses:
            session.step("train", step, {"loss": (float(value), "losses")})
            step += 1
        session.close()
    return session


def _watched(out: Path, rules: Sequence[Any]) -> list[tuple[str, int, str, str]]:
    """``tripwire watch --once`` over the run without its findings (watch never makes again a finding
    the run holds): (rule, step, mode, message) each."""
    shutil.rmtree(out / "findings")
    watcher = Watcher(out, {"rules": list(rules), "actions": ["record"]}, echo=lambda f: None)
    return sorted((f.rule, f.step, f.mode, f.message) for f in watcher.watch(once=True))


def _found(findings: Sequence[tripwire.Finding]) -> list[tuple[str, int, str, str]]:
    return sorted((f.rule, f.step, f.mode, f.message) for f in findings)


# ----------------------------------------------------------- 2. a continued fit is judged with the earlier
def test_a_fit_that_continues_the_training_is_judged_with_the_earlier_fits(tmp_path: Path) -> None:
    continued = _train(tmp_path / "continued", [FELL, FLAT], [True], ["default"])
    assert continued.findings == []  # (the loss fell to its floor in fit 1: fit 2 trains on there)
    new = _train(tmp_path / "new", [FELL, FLAT], [False], ["default"])  # a new model that does not learn
    assert [(f.rule, f.step) for f in new.findings] == [("loss_not_decreasing", N + 50)]


def test_a_continued_fit_keeps_the_rules_state_and_moves_only_their_look_back(tmp_path: Path) -> None:
    session = _train(tmp_path / "run", [FELL[:50]], [], ["loss_not_decreasing", "exploding_tensor"])
    lnd, et = session.rules
    lnd._streak = {"train": 1}
    session.new_training(continued=True)
    assert lnd.armed_from == {} and lnd.training_start("train") == 0 and lnd._streak == {"train": 1}
    assert et.fit_from["train"] == 50 and et.look_back_floor("train") == 49  # (trial 23v: its own look-back)
    state = et.state_dict()
    assert state["fit_from"]["train"] == 50 and "armed_from" not in state
    resumed = type(et)()
    resumed.load_state_dict(state)
    assert resumed.look_back_floor("train") == 49 and resumed.training_start("train") == 0
    session.new_training(continued=False)
    assert lnd.armed_from["train"] == 50 and lnd._streak == {}


def test_new_training_refuses_a_continued_that_is_not_a_bool() -> None:
    session = tripwire.Session(write=False, rules=["loss_not_decreasing"])
    with pytest.raises(ConfigError, match=r"new_training: continued='yes'; accepted: True .* False .* None"):
        session.new_training(continued="yes")  # type: ignore[arg-type]


def test_an_unknown_continued_right_after_a_call_keeps_what_that_call_said(tmp_path: Path) -> None:
    """The MXNet handler tells the session whether the fit continues, then its hook's reopen calls
    ``new_training()`` again: the same training, not a new one."""
    session = _train(tmp_path / "run", [FELL[:50]], [], ["loss_not_decreasing"])
    rule = session.rules[0]
    session.new_training(continued=True)
    session.new_training()
    assert rule.armed_from == {} and [t["continued"] for t in session._trainings] == [False, True]
    session.reopen()
    session.step("train", 50, {"loss": (0.5, "losses")})
    session.new_training()  # (a step since: a new training, as before trial 25e)
    assert rule.armed_from["train"] == 51 and [t["continued"] for t in session._trainings] == [False, True, False]
    session.close()


# ----------------------------------------------------------------- 1. the run records where each began
def test_the_run_records_where_each_training_began_and_whether_it_continued(tmp_path: Path) -> None:
    _train(tmp_path / "run", [FELL[:40], FELL[:30], FELL[:20]], [True, False], ["loss_not_decreasing"])
    meta = json.loads((tmp_path / "run" / "workers" / "worker-00000.json").read_text())
    assert [(t["steps"].get("train"), t["continued"], t["planned_steps"]) for t in meta["trainings"]] == [
        (None, False, 40), (40, True, 30), (70, False, 20)]
    run = tripwire.open_run(tmp_path / "run")
    assert [t["steps"].get("train", 0) for t in run.trainings[0]] == [0, 40, 70]
    assert run.trainings[0][1]["began"] > 0 and run.trainings[0][0]["began"] is None
    one = _train(tmp_path / "one", [FELL[:40]], [], ["loss_not_decreasing"])
    assert one.findings == [] and tripwire.open_run(tmp_path / "one").trainings == {}  # (one training: no record)


def test_a_resumed_session_keeps_the_record() -> None:
    session = tripwire.Session(write=False, rules=["loss_not_decreasing"])
    session.step("train", 0, {"loss": (1.0, "losses")})
    session.new_training(continued=True)
    state = session.state_dict()
    resumed = tripwire.Session(write=False, rules=["loss_not_decreasing"])
    resumed.load_state_dict(state)
    assert [t["continued"] for t in resumed._trainings] == [False, True]


NAN = FELL.copy()
NAN[55] = np.nan
LATE_NAN = FELL[:25].copy()
LATE_NAN[23] = np.nan  # (after fit 1's last save step: judged when the fit's run closed)


@pytest.mark.parametrize("fits, continued, rules, every_step, expected", [
    # trial 25a's case: a new, healthy model after a fit whose loss fell (watch: loss_diverging, exit 1)
    ([FELL, FELL], [False], ["loss_diverging"], False, []),
    # the model trained on: its fit judged with the earlier fits, in watch too
    ([FELL, FLAT], [True], ["default"], False, []),
    # a new model that does not learn: judged alone (watch missed the finding)
    ([FELL, FLAT], [False], ["default"], False, [("loss_not_decreasing", N + 50)]),
    # a fault found again in each training, its rule armed again (watch: found once)
    ([NAN, NAN, FELL], [False, True], ["exploding_tensor"], False, [("exploding_tensor", 55),
                                                                     ("exploding_tensor", N + 55)]),
    # every-step losses kept after a fit's last save step: judged at its end, as its session did
    ([LATE_NAN, FELL[:25]], [False], ["exploding_tensor"], True, [("exploding_tensor", 23)]),
    ([LATE_NAN, FELL[:25]], [True], ["exploding_tensor"], True, [("exploding_tensor", 23)]),
], ids=["new-model", "continued", "new-model-flat", "nan-each-fit", "kept-nan-new", "kept-nan-continued"])
def test_watch_replays_the_trainings_as_the_session_judged_them(tmp_path: Path, fits: list[np.ndarray],
                                                                continued: list[bool], rules: list[str],
                                                                every_step: bool, expected: list[Any]) -> None:
    session = _train(tmp_path / "run", fits, continued, rules, every_step=every_step)
    assert [(f.rule, f.step) for f in sorted(session.findings, key=lambda f: f.step)] == expected
    assert _watched(tmp_path / "run", rules) == _found(session.findings)


def test_watch_exits_as_the_session_judged_a_new_models_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session = _train(tmp_path / "run", [FELL, FELL], [False], ["loss_diverging"])
    assert session.findings == []
    shutil.rmtree(tmp_path / "run" / "findings")
    (tmp_path / "rules.yaml").write_text("rules: [loss_diverging]\nactions: [log, stop_training]\n")
    assert main(["watch", str(tmp_path / "run"), "--once", "--config", str(tmp_path / "rules.yaml")]) == 0
    assert "loss_diverging" not in capsys.readouterr().out


def test_a_run_without_the_record_replays_as_one_training(tmp_path: Path) -> None:
    """A run written before trial 25e holds no ``trainings``: watch judges it as it did (one training)."""
    _train(tmp_path / "run", [FELL, FELL], [False], ["loss_diverging"])
    meta_path = tmp_path / "run" / "workers" / "worker-00000.json"
    meta = json.loads(meta_path.read_text())
    del meta["trainings"]
    meta_path.write_text(json.dumps(meta))
    assert tripwire.open_run(tmp_path / "run").trainings == {}
    assert [(rule, step) for rule, step, _, _ in _watched(tmp_path / "run", ["loss_diverging"])] == [
        ("loss_diverging", 240)]


# ------------------------------------------------------- 3. abs_l2 is l2 under its own name (watch)
def _grad_rule(reduction: str) -> tripwire.FunctionRule:
    def big(history: Any, step: int, mode: str) -> str | None:
        got = history.latest("gradients/fc.weight", reduction, mode)
        return f"fc.weight grad {reduction} {got[1]:.3g}" if got and got[1] > 5 else None

    return tripwire.FunctionRule(big, name="big", requirements=[tripwire.Requirement("gradients", (reduction,))])


def _grad_run(out: Path, stored: str, value: float) -> None:
    session = tripwire.Session({"collections": {"losses": None, "gradients": {"reductions": [stored]}}},
                               out_dir=str(out), save_interval=5)
    for step in range(30):
        plan = session.begin_step("train", step)
        plan.add("loss", np.float32(1.0), "losses")
        if plan.wants("gradients"):
            plan.add("gradients/fc.weight", np.full(4, value), "gradients")
        session.end_step()
    session.close()


@pytest.mark.parametrize("stored, wanted", [("abs_l2", "l2"), ("l2", "abs_l2"), ("abs_l1", "l1"), ("l1", "abs_l1")])
def test_watch_takes_a_stored_value_under_its_other_name_as_stored(tmp_path: Path, stored: str, wanted: str) -> None:
    _grad_run(tmp_path / "healthy", stored, 0.5)
    watcher = Watcher(tmp_path / "healthy", {"rules": [_grad_rule(wanted)]}, echo=lambda f: None)
    assert watcher.watch(once=True) == []
    assert watcher.unstored() == [] and watcher.unjudged() == []
    _grad_run(tmp_path / "broken", stored, 10.0)
    watcher = Watcher(tmp_path / "broken", {"rules": [_grad_rule(wanted)]}, echo=lambda f: None)
    assert [(f.rule, f.step) for f in watcher.watch(once=True)] == [("big", 0)] and watcher.unstored() == []


def test_watch_still_says_a_reduction_stored_under_no_name_of_it(tmp_path: Path) -> None:
    _grad_run(tmp_path / "run", "abs_l2", 0.5)
    watcher = Watcher(tmp_path / "run", {"rules": [_grad_rule("l1")]}, echo=lambda f: None)
    watcher.watch(once=True)
    assert watcher.unstored() == ["rule 'big' had nothing to read in 'gradients': this run stored no 'l1' of it "
                                  "(it stored: abs_l2); add it to collections.gradients.reductions in the "
                                  "training's config"]


def test_watch_exits_0_on_a_healthy_run_that_stored_abs_l2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _grad_run(tmp_path / "run", "abs_l2", 0.5)
    (tmp_path / "rules.yaml").write_text("rules: [exploding_gradient]\n")
    assert main(["watch", str(tmp_path / "run"), "--once", "--config", str(tmp_path / "rules.yaml")]) == 0
    assert "stored no" not in capsys.readouterr().err


# ------------------------------------------------------------------- the Keras callback tells which
keras = pytest.importorskip("keras")


def _model(seed: int = 0) -> Any:
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    return model


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 8)).astype("float32")
    w = rng.standard_normal((8, 1)).astype("float32")
    return x, (x @ w + 0.1 * rng.standard_normal((256, 1))).astype("float32")


def test_keras_a_converged_model_trained_some_more_is_not_stopped(tmp_path: Path) -> None:
    """The trial's repro: 40 epochs to the loss's floor, then ``model.fit`` again on the same model."""
    from tripwire.integrations.keras import TripwireCallback

    x, y = _data()
    model = _model()
    callback = TripwireCallback(rules=["default"], actions=["log", "stop_training"], out_dir=str(tmp_path / "run"))
    model.fit(x, y, batch_size=16, epochs=40, validation_split=0.25, callbacks=[callback], verbose=0)
    history = model.fit(x, y, batch_size=16, epochs=40, validation_split=0.25, callbacks=[callback], verbose=0)
    assert callback.stopped_by is None and len(history.history["loss"]) == 40, callback.findings
    trainings = tripwire.open_run(tmp_path / "run").trainings[0]
    assert [t["continued"] for t in trainings] == [False, True] and trainings[1]["steps"]["train"] == 480


def test_keras_a_new_model_or_weights_initialized_again_is_a_new_training(tmp_path: Path) -> None:
    from tripwire.integrations.keras import TripwireCallback

    x, y = _data()
    model = _model()
    first = [w.copy() for w in model.get_weights()]
    callback = TripwireCallback(rules=["default", "loss_diverging"], out_dir=str(tmp_path / "run"))
    fit = {"batch_size": 32, "epochs": 2, "callbacks": [callback], "verbose": 0}
    model.fit(x, y, **fit)
    model.fit(x, y, **fit)  # the same model, trained on
    model.set_weights(first)
    model.fit(x, y, **fit)  # its weights initialized again
    _model().fit(x, y, **fit)  # a new model
    model.fit(x, y, **fit)  # the first model again: not the one the last fit ended with
    rules = [r for r in callback.session.rules if isinstance(r, BuiltinRule)]
    assert rules and all(r.armed_from["train"] == r.fit_from["train"] == 64 for r in rules)
    assert [t["continued"] for t in tripwire.open_run(tmp_path / "run").trainings[0]] == [
        False, True, False, False, False]


def test_keras_watch_judges_a_new_models_fit_as_the_callback_did(tmp_path: Path) -> None:
    """Finding 1's repro (trial 25a's case): the session finds nothing, watch found loss_diverging."""
    from tripwire.integrations.keras import TripwireCallback

    x, y = _data()
    rules = ["default", "loss_diverging"]
    callback = TripwireCallback(rules=rules, actions=["log", "stop_training"], out_dir=str(tmp_path / "run"))
    _model().fit(x, y, batch_size=16, epochs=20, callbacks=[callback], verbose=0)
    _model().fit(x, y, batch_size=16, epochs=20, callbacks=[callback], verbose=0)
    assert callback.findings == []
    assert _watched(tmp_path / "run", rules) == []

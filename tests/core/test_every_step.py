"""Every-step training losses: kept between save steps as the framework's tensors, written with the
next save step's values (one reduction call), each at its own step, and never lost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire import ConfigError, FunctionRule, Requirement, Session
from tripwire import _session as session_module
from tripwire._config import Collection, load_config


class DeviceScalar:
    """A stand-in for a framework tensor on an accelerator: reading its value is a host copy."""

    def __init__(self, value: float) -> None:
        self.value = value


class CountingBackend:
    """A reduction backend that counts its calls (the only place values reach the host)."""

    name = "fake"

    def __init__(self) -> None:
        self.calls: list[int] = []  # tensors reduced per call

    def numel(self, tensor: Any) -> int:
        return 1

    def to_numpy(self, tensor: Any) -> np.ndarray:
        raise AssertionError("a one-element tensor is reduced, never copied whole")

    def reduce_groups(self, calls: list[tuple[list[Any], list[str]]]) -> list[np.ndarray]:
        self.calls.append(sum(len(t) for t, _ in calls))
        out = []
        for tensors, reductions in calls:
            assert all(isinstance(t, DeviceScalar) for t in tensors)
            out.append(np.asarray([[t.value] * len(reductions) for t in tensors], dtype=np.float64))
        return out

    def reduce(self, tensors: list[Any], reductions: list[str]) -> np.ndarray:
        return self.reduce_groups([(tensors, reductions)])[0]

    def histogram(self, tensor: Any, bins: int, value_range: Any) -> Any:  # pragma: no cover - not asked
        raise AssertionError("no histogram of a loss")


def _make(tmp_path: Path | None = None, **kw: Any) -> tuple[Session, CountingBackend]:
    backend = CountingBackend()
    kw.setdefault("rules", [])
    out = {"out_dir": str(tmp_path / "run")} if tmp_path is not None else {}
    return Session(backend=backend, write=tmp_path is not None, **out, **kw), backend


def _train(session: Session, losses: list[float], start: int = 0, extra: bool = False) -> list[int]:
    """Offer the loss at every step (as an integration does); returns the backend calls per step."""
    counts = []
    backend = session.backend
    for i, value in enumerate(losses):
        plan = session.begin_step("train", start + i)
        assert plan.keeps("losses")
        before = len(backend.calls)  # type: ignore[attr-defined]
        assert plan.add("loss", DeviceScalar(value), "losses")
        if extra and plan:
            plan.add("acc", 0.5, "metrics")
        session.end_step()
        counts.append(len(backend.calls) - before)  # type: ignore[attr-defined]
    return counts


# ------------------------------------------------------------------------------------ config
def test_every_step_defaults_and_round_trip() -> None:
    config = load_config(None)
    assert config.collections["losses"].every_step is True
    assert config.collections["metrics"].every_step is False
    off = load_config({"collections": {"losses": {"every_step": False}, "metrics": None}})
    assert off.collections["losses"].every_step is False
    assert load_config(off.to_dict()).collections["losses"].every_step is False
    custom = load_config({"collections": {"aux": {"include": ["aux_.*"], "kinds": ["losses"], "every_step": True, "reductions": ["raw"]}}})
    assert custom.collections["aux"].every_step is True
    assert load_config({"collections": {"aux": {"include": ["x"], "kinds": ["losses"], "reductions": ["raw"]}}}).collections["aux"].every_step is False


@pytest.mark.parametrize("data, match", [
    ({"losses": {"every_step": "yes"}}, r"collections\.losses\.every_step.*'yes'.*"),
    ({"metrics": {"every_step": True}}, r"collections\.metrics\.every_step: got True .*kinds \['metrics'\]; accepted: true only .*losses"),
    ({"mine": {"include": ["loss"], "every_step": True}}, r"collections\.mine\.every_step: got True .*kinds any; accepted"),
    ({"losses": {"every_stp": True}}, r"every_stp.*every_step"),
])
def test_every_step_errors_name_key_value_and_accepted(data: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        load_config({"collections": data})


def test_every_step_direct_construction_is_validated() -> None:
    with pytest.raises(ValueError, match="every_step"):
        Collection("grads", kinds=("gradients",), every_step=True)


# ---------------------------------------------------------------------------------- session
def test_kept_losses_land_at_their_steps_with_one_reduction_per_save(tmp_path: Path) -> None:
    session, backend = _make(tmp_path, save_interval=5)
    values = [10.0 + i for i in range(12)]
    counts = _train(session, values, extra=True)
    # steps 1-4 and 6-9 keep a reference; steps 0, 5 and 10 reduce once (their own and the kept values)
    assert counts == [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0]
    assert backend.calls == [1, 5, 5]
    assert [s for s, _, _ in session.kept] == [11] and isinstance(session.kept[0][2], DeviceScalar)
    steps, got = session.history.series("loss")
    assert steps.tolist() == list(range(11)) and got.tolist() == values[:11]
    assert session.history.series("acc")[0].tolist() == [0, 5, 10]  # other collections: save steps only
    session.close()  # the last kept value is written, not lost
    assert backend.calls == [1, 5, 5, 1] and session.kept == []
    run = tripwire.open_run(tmp_path / "run")
    assert run.series("loss")[0].tolist() == list(range(12)) and run.series("loss")[1].tolist() == values
    steps, walls = run.wall_times("train")
    assert steps.tolist() == list(range(12)) and np.all(np.diff(walls) >= 0)  # in step order
    assert run.collections()["losses"] == ["loss"]
    assert run.every_step == {"losses": 5}  # readers (tripwire watch) read the loss in save intervals too


def test_rules_see_every_kept_value_at_the_save_step() -> None:
    seen: list[tuple[int, list[int]]] = []

    def record(history: Any, step: int, mode: str) -> None:
        seen.append((step, history.series("loss", "raw", mode)[0].tolist()))

    rule = FunctionRule(record, name="record", requirements=[Requirement("losses", ("raw",))])
    session, _ = _make(save_interval=4, rules=[rule])
    _train(session, [1.0] * 9)
    assert seen == [(0, [0]), (4, [0, 1, 2, 3, 4]), (8, list(range(9)))]  # rules run at save steps only
    assert session.history.every_step == {"losses": 4}


def test_a_second_offer_at_the_same_step_is_refused_and_several_losses_keep_their_order() -> None:
    session, _ = _make(save_interval=3, collections={"losses": {"include": ["loss", "aux"]}})
    for step in range(4):
        plan = session.begin_step("train", step)
        plan.add("loss", DeviceScalar(float(step)), "losses")
        if step == 0:  # (trial 26c: another value under one name replaced the first without a word)
            with pytest.raises(tripwire.ConfigError, match=r"add\('loss'\): offered twice at train step 0"):
                plan.add("loss", DeviceScalar(-1.0), "losses")
        plan.add("aux", DeviceScalar(10.0 + step), "losses")
        session.end_step()
    assert session.history.series("loss")[1].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert session.history.series("aux")[1].tolist() == [10.0, 11.0, 12.0, 13.0]


def test_every_step_off_keeps_nothing_and_other_modes_never_keep() -> None:
    session, backend = _make(save_interval=5, collections={"losses": {"every_step": False}})
    plan = session.begin_step("train", 1)
    assert not plan.keeps("losses") and not plan.add("loss", DeviceScalar(1.0), "losses")
    session.end_step()
    on, _ = _make(save_interval=5)
    for mode in ("eval", "test", "predict"):
        plan = on.begin_step(mode, 1)
        assert not plan.keeps("losses") and not plan.add("loss", DeviceScalar(1.0), "losses")
        on.end_step()
    assert on.kept == [] and session.kept == []
    plan = on.begin_step("train", 2)
    assert not plan.keeps("metrics") and not plan.add("acc", DeviceScalar(1.0), "metrics")  # losses only


def test_the_save_range_bounds_what_is_kept() -> None:
    session, _ = _make(save={"interval": 5, "start_step": 3, "end_step": 12, "steps": [20]})
    kept = []
    for step in range(25):
        plan = session.begin_step("train", step)
        kept.append(plan.keeps("losses"))
        plan.add("loss", DeviceScalar(float(step)), "losses")
        session.end_step()
    session.flush()
    assert [s for s, k in enumerate(kept) if k] == list(range(3, 12)) + [20]
    assert session.history.series("loss")[0].tolist() == list(range(3, 12)) + [20]


def test_flush_state_dict_and_resume_lose_nothing_and_repeat_nothing(tmp_path: Path) -> None:
    session, backend = _make(tmp_path, save_interval=10)
    _train(session, [float(s) for s in range(14)])
    assert [s for s, _, _ in session.kept] == [11, 12, 13]
    state = session.state_dict()  # a checkpoint: the kept values go to the run first
    assert session.kept == [] and session.history.series("loss")[0].tolist() == list(range(14))
    session.close("stopped")
    resumed, _ = _make(tmp_path, save_interval=10)
    resumed.load_state_dict(state)
    assert resumed.mode_steps["train"] == 14
    _train(resumed, [float(s) for s in range(14, 22)], start=14)
    resumed.flush()  # flush writes kept values too
    # the rules' history holds the steps before the checkpoint too, read back from the run
    assert resumed.kept == [] and resumed.history.series("loss")[0].tolist() == list(range(22))
    resumed.close()
    run = tripwire.open_run(tmp_path / "run")
    steps = run.series("loss")[0].tolist()
    assert steps == list(range(22))  # every step once, across the checkpoint


def test_values_wait_at_most_the_buffer_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_module, "BUFFER_LIMIT", 4)
    session, backend = _make(save_interval=1000)
    _train(session, [1.0] * 10)
    assert backend.calls == [1, 4, 4]  # step 0 saved; steps 1-4 and 5-8 written when 4 were waiting
    assert [s for s, _, _ in session.kept] == [9]
    session.close()
    assert session.history.series("loss")[0].tolist() == list(range(10))


def test_host_values_and_device_values_mix() -> None:
    session, backend = _make(save_interval=3)
    for step in range(4):
        plan = session.begin_step("train", step)
        plan.add("loss", float(step) if step % 2 else DeviceScalar(float(step)), "losses")
        session.end_step()
    assert session.history.series("loss")[1].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert backend.calls == [1, 1]  # step 0, then step 2 with step 3's record; the floats go to numpy


def test_a_loss_with_its_own_interval_shares_the_record_of_other_collections() -> None:
    session, backend = _make(collections={"losses": {"save": {"interval": 4}}, "metrics": None}, save_interval=2)
    for step in range(5):
        plan = session.begin_step("train", step)
        plan.add("loss", DeviceScalar(float(step)), "losses")
        plan.add("acc", 0.5, "metrics")
        session.end_step()
    assert session.history.series("loss")[0].tolist() == [0, 1, 2, 3, 4]
    assert session.history.series("acc")[0].tolist() == [0, 2, 4]
    assert session.history.wall_times("train")[0].tolist() == [0, 1, 2, 3, 4]  # one record per step
    assert session.history.every_step == {"losses": 4}


@pytest.mark.parametrize("start, nan_at, end, stop_at", [(1, 3, 15, 10), (5, 7, 25, 10), (1, 3, 10, None)])
def test_a_nan_kept_before_the_first_save_step_is_found(tmp_path: Path, start: int, nan_at: int, end: int,
                                                        stop_at: int | None) -> None:
    # trial 15f: a loop counting steps from 1 keeps losses 1-9 before its first save step (10); a NaN
    # among them was judged neither at step 10, nor later, nor at close(): the run ended complete
    s = Session(out_dir=str(tmp_path / "run"), rules=[{"name": "exploding_tensor", "actions": ["stop_training"]}])
    stopped = None
    for step in range(start, end):
        plan = s.begin_step("train", step)
        plan.add("loss", float("nan") if step == nan_at else 1.0, "losses")
        if s.end_step().stop:
            stopped = step
            break
    s.close()
    assert stopped == stop_at and [(f.rule, f.step) for f in s.findings] == [("exploding_tensor", nan_at)]
    # (found at close(), after the loop ran every step: recorded, and no stop, trial 29j F2)
    assert tripwire.open_run(tmp_path / "run").status == ("stopped" if stop_at is not None else "complete")


@pytest.mark.parametrize("via_quiet", [False, True])
def test_a_nan_kept_before_an_evaluation_is_reported_at_its_train_step(tmp_path: Path, via_quiet: bool) -> None:
    # trial 16b: save interval 5, a NaN training loss at step 7, validation at the epoch's end (after
    # step 9): the kept train losses were written with the eval record and the rules judged the eval
    # step only, so exploding_tensor reported the NaN val_loss it led to (the rule fires once: the
    # train NaN at step 7 was never reported)
    s = Session(out_dir=str(tmp_path / "run"), save_interval=5,
                rules=[{"name": "exploding_tensor", "actions": ["stop_training"]}])
    for step in range(10):
        loss = float("nan") if step >= 7 else 1.0
        if via_quiet and s.quiet_until("train", step) > step:  # (as the integrations account for quiet steps)
            assert not s.quiet_step("train", step, [("loss", loss, "losses")]).stop
            continue
        plan = s.begin_step("train", step)
        plan.add("loss", loss, "losses")
        assert not s.end_step().stop
    plan = s.begin_step("eval", summary=True)
    plan.add("val_loss", float("nan"), "losses")
    decision = s.end_step()
    s.close()
    assert decision.stop and decision.stopped_by is not None
    assert [(f.rule, f.step, f.mode) for f in s.findings] == [("exploding_tensor", 7, "train")]
    assert "loss holds the value nan at step 7 (train)" in s.findings[0].message


def test_the_last_steps_written_with_a_validation_are_judged_at_close(tmp_path: Path) -> None:
    # trial 18d: 15 train steps, save interval 10, a validation after the last one: the kept losses
    # of steps 11-14 were written with the eval record and no train rule ever judged them (without
    # the validation close() did); a rule's judgement of the fit's last steps depended on validating
    seen: list[tuple[int, str, int]] = []

    def probe(history: Any, step: int, mode: str) -> None:
        seen.append((step, mode, history.latest("loss", "raw", "train")[0]))

    s = Session(out_dir=str(tmp_path / "run"), save_interval=10, rules=[FunctionRule(probe, name="probe")])
    for step in range(15):
        plan = s.begin_step("train", step)
        plan.add("loss", 1.0, "losses")
        s.end_step()
    plan = s.begin_step("eval", summary=True)
    plan.add("val_loss", 1.0, "losses")
    s.end_step()
    assert seen == [(0, "train", 0), (10, "train", 10)]
    s.close()
    assert seen == [(0, "train", 0), (10, "train", 10), (14, "train", 14)]

"""Trial 31d F3: the opt-in loss_diverging said a booster's train-rmse "fell from 973.3 (its level
over its first 10 saves) to 403.2" when it had risen at every round from round 0 (217, 292, 403,
...): its lowest level was taken over every window, those inside the first saves too, and the first
values of a rising loss sit below the median of the first ``w``. The lowest level is now taken in
windows that end after the first ``w`` saves (as loss_not_decreasing's since trial 26d), so the
message's "fell from ... to ..." is a fall that happened, and a loss that only rose is not this
rule's (loss_not_decreasing words it as a rise)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tripwire
from tripwire.rules import LossDiverging
from tripwire.rules import loss_diverging as module


def _numbers(message: str) -> tuple[float, float, float]:
    m = re.search(r"fell from (\S+) \(its level over its first \d+ saves\) to (\S+) and has climbed back to (\S+) ",
                  message)
    assert m is not None, message
    return float(m.group(1)), float(m.group(2)), float(m.group(3))


def test_a_loss_rising_from_its_first_value_is_not_told_as_a_fall(feed, loss_records) -> None:
    # the trial's train-rmse: up 35% a round from 217 (eta 2.5); before, "fell from 973.3 ... to 403.2"
    values = 217.0 * 1.35 ** np.arange(60)
    found = feed(LossDiverging(), loss_records(values))
    assert [f for f in found if f.rule == "loss_diverging"] == []


def test_the_message_names_the_fall_after_the_start_not_the_first_values(feed, loss_records) -> None:
    # the first 4 values low by chance, the start level (median of the first 10) 1.0; the loss then
    # fell to 0.4 and climbed back to 0.9: the fall told is 1 -> 0.4, not 1 -> 0.2 (the first values)
    values = [0.2] * 4 + [1.0] * 6 + [0.4] * 10 + [0.9] * 10
    found = feed(LossDiverging(), loss_records(values))
    assert [f.rule for f in found][:1] == ["loss_diverging"], found
    f = found[0]
    start, lowest, now = _numbers(f.message)
    assert (start, lowest, now) == (pytest.approx(1.0), pytest.approx(0.4), pytest.approx(0.9))
    assert f.details["start"] == pytest.approx(1.0) and f.details["lowest"] == pytest.approx(0.4)
    assert f.details["now"] == pytest.approx(0.9)
    assert "83.33% of the way back to its start" in f.message, f.message  # (0.9 - 0.4) / (1 - 0.4)
    # the numbers recomputed from the values the rule had at that step
    upto = np.asarray(values[: f.step + 1])
    w = min(10, len(upto) // 2)
    windows = np.median(np.lib.stride_tricks.sliding_window_view(upto[w - 4 :], 5), axis=1)
    assert (start, lowest, now) == (pytest.approx(float(np.median(upto[:w]))), pytest.approx(float(windows.min())),
                                    pytest.approx(float(np.median(upto[-5:]))))


def test_every_step_values_the_lowest_level_ends_after_the_first_saves(feed, loss_records) -> None:
    # every step's value, saves 10 steps apart: the first 30 steps low (0.3), then 2.3 (the start
    # level, steps 0-90), a fall to 0.4 from step 100 and a climb to 2.5 at step 200
    values = [0.3] * 30 + [2.3] * 70 + [0.4] * 100 + [2.5] * 60
    found = feed(LossDiverging(), loss_records(values), save_interval=10)
    assert [f.rule for f in found][:1] == ["loss_diverging"], found
    start, lowest, now = _numbers(found[0].message)
    assert (start, lowest) == (pytest.approx(2.3), pytest.approx(0.4)), found[0].message  # (before: to 0.3)
    assert now == pytest.approx(2.5)


def test_a_real_booster_at_a_huge_eta_is_not_said_to_have_fallen(tmp_path) -> None:
    xgb = pytest.importorskip("xgboost")
    from sklearn.datasets import make_regression

    from tripwire.integrations.xgboost import TripwireCallback

    X, y = make_regression(600, 10, noise=10, random_state=0)
    dtr = xgb.DMatrix(X[:450], label=y[:450])
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, num_boost_round=300,
                          rules=[{"name": "loss_diverging", "actions": ["log"]}])
    ev: dict = {}
    xgb.train({"objective": "reg:squarederror", "max_depth": 4, "eta": 2.5, "nthread": 1}, dtr, 40,
              evals=[(dtr, "train")], evals_result=ev, callbacks=[cb], verbose_eval=False)
    rmse = np.asarray(ev["train"]["rmse"])
    assert np.all(np.diff(rmse) > 0), rmse  # it never fell
    assert [f.message for f in cb.findings if f.rule == "loss_diverging"] == []


def test_the_docstring_states_where_the_lowest_level_is_taken() -> None:
    doc = " ".join((module.__doc__ or "").split())
    assert "over the steps ``u >= s_0 + w*I`` holding a value" in doc
    assert "trial 31d" in doc


def test_the_trial_runs_of_the_docs_still_behave() -> None:
    # the detection suite's shape: held its start, fell, held its low level, climbed: still found
    session = tripwire.Session(write=False, rules=[LossDiverging()], save_interval=10)
    for step, v in enumerate([2.3] * 60 + list(np.linspace(2.3, 0.4, 20)) + [0.4] * 100 + [2.5] * 60):
        session.step("train", step, {"loss": (np.float64(v), "losses")})
    assert [f.step for f in session.findings if f.rule == "loss_diverging"][:1] == [220]

"""Trial 27g F7: ``overfit`` printed "while loss stayed at or below its value then (? -> 268.3, ...)":
a literal placeholder, and a false claim, on a hand loop that restarted its step count every epoch
(``enumerate(loader)``'s index as the step) while its training loss rose from 2.3 to 268.

Two causes: the training values of a step written again (the loop's second, third ... epoch) all
took the wall time of that step's latest record, so none counted as written before the best
validation (its value then unknown, printed as ``?``, and the divergence check waived); and the message
claimed the training metric "stayed at or below" a value it did not have."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import tripwire

EPOCHS, PER_EPOCH = 8, 44


def _loop(step_reset: bool, train_loss: list[float], val_loss: list[float], *, validate_first: bool = False,
          path: str | None = None) -> tripwire.Session:
    """A hand loop: ``PER_EPOCH`` train steps and one validation an epoch; with ``step_reset`` the
    step is the batch index within the epoch (restarts at 0)."""
    config: dict = {"rules": ["overfit"], "actions": ["record"]}
    s = (tripwire.Session(config, write=False) if path is None
         else tripwire.Session({"rules": [], "out_dir": path, "save": {"interval": 1}}))
    g = 0
    if validate_first:
        s.step("eval", 0, {"val_loss": (val_loss[0], "losses")}, summary=True)
    for epoch in range(EPOCHS):
        for i in range(PER_EPOCH):
            s.step("train", i if step_reset else g, {"loss": (train_loss[g], "losses")})
            g += 1
        e = epoch + 1 if validate_first else epoch
        s.step("eval", e, {"val_loss": (val_loss[e], "losses")}, summary=True)
    s.close()
    return s


def _rising(start: float, end: float, n: int) -> list[float]:
    return [start * math.exp(k / (n - 1) * math.log(end / start)) for k in range(n)]


def test_a_step_count_restarted_every_epoch_is_divergence_not_overfitting() -> None:
    # trial 27g: training loss 2.3 -> 268, validation loss 7.3 -> 335: both worse, no overfitting
    train = _rising(2.3, 268.0, EPOCHS * PER_EPOCH)
    val = _rising(7.3, 335.0, EPOCHS)
    assert _loop(False, train, val).findings == []  # the same loop with a global step: quiet
    s = _loop(True, train, val)
    assert s.findings == [], [f.message for f in s.findings]


def test_a_step_count_restarted_every_epoch_still_finds_overfitting() -> None:
    # the training loss falls, the validation loss rises from epoch 2: overfitting, with both values known
    train = _rising(2.3, 0.01, EPOCHS * PER_EPOCH)
    val = [2.0, 1.0, 0.8, 1.5, 2.5, 3.5, 4.5, 5.5]
    for reset in (False, True):
        s = _loop(reset, train, val)
        assert [f.rule for f in s.findings] == ["overfit"], reset
        message = s.findings[0].message
        assert "?" not in message
        said = re.search(r"while loss stayed at or below its value then \(([0-9.e-]+) -> ([0-9.e-]+), medians", message)
        assert said is not None, message
        assert float(said.group(2)) < float(said.group(1))


def test_a_best_before_any_training_value_says_the_training_value_then_is_not_known() -> None:
    # a validation before training began (the best): the training metric has no value then to compare
    train = _rising(2.3, 0.01, EPOCHS * PER_EPOCH)
    val = [0.5, 0.9, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.2]
    s = _loop(False, train, val, validate_first=True)
    assert [f.rule for f in s.findings] == ["overfit"]
    message = s.findings[0].message
    assert "?" not in message and "stayed at or" not in message, message
    assert re.search(r"\(loss had no value saved at or before that best, so whether it improved since is not known; "
                     r"now [0-9.e-]+, the median of its last 5 saves\): the model is overfitting", message), message


def test_a_stored_run_with_restarted_steps_makes_no_false_claim(tmp_path) -> None:
    # tripwire watch judges the stored run: no overfitting where both got worse. (Since trial 27w it keeps
    # every record of a step count restarted within one session, as the session did.)
    from tripwire._watch import Watcher

    def watched(run: str, train: list[float], val: list[float]) -> list[tripwire.Finding]:
        _loop(True, train, val, path=str(tmp_path / run))
        watcher = Watcher(tmp_path / run, {"rules": ["overfit"], "actions": ["record"]}, echo=lambda f: None)
        return watcher.watch(once=True)

    assert watched("diverged", _rising(2.3, 268.0, EPOCHS * PER_EPOCH), _rising(7.3, 335.0, EPOCHS)) == []
    found = watched("overfit", _rising(2.3, 0.01, EPOCHS * PER_EPOCH), [2.0, 1.0, 0.8, 1.5, 2.5, 3.5, 4.5, 5.5])
    assert all("?" not in f.message for f in found), [f.message for f in found]


def test_walls_of_values_takes_each_values_own_record() -> None:
    from tripwire.rules.overfit import _walls_of_values

    # a step with as many records as values: each value its own record's wall time, in order
    assert _walls_of_values([0, 1, 0, 1], [0, 1, 0, 1], [10.0, 11.0, 20.0, 21.0]) == [10.0, 11.0, 20.0, 21.0]
    # a step written by two records, one holding the value: the latest record's (as before)
    assert _walls_of_values([0, 1], [0, 0, 1], [10.0, 10.5, 11.0]) == [10.5, 11.0]
    # a step with no record: NaN
    got = _walls_of_values([0, 2], [0, 1], [10.0, 11.0])
    assert got[0] == 10.0 and np.isnan(got[1])


@pytest.mark.parametrize("reset", [False, True])
def test_no_placeholder_in_any_overfit_message(reset: bool) -> None:
    train = _rising(2.3, 0.01, EPOCHS * PER_EPOCH)
    val = [0.5, 0.9, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.2]
    for s in (_loop(reset, train, val, validate_first=True), _loop(reset, train, val[1:])):
        for f in s.findings:
            assert " ? " not in f.message and "(?" not in f.message, f.message

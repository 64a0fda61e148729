"""loss_diverging and a fall-and-climb within the first saves (trial 27g, finding 3).

An ExponentialLR(gamma=1.05) meant per epoch and stepped per batch: the loss fell 2.31 -> 0.29 by
step 25 and climbed back to 2.76, then NaN; the rule whose docstring names "a schedule stepped per
batch instead of per epoch" stayed silent. Its levels (medians over 5 saves' span, 41 steps) cannot
see a dip of some 17 steps, and its start level (the median over the first saves) holds the dip;
shorter levels would read batch noise as dips. The blind spot is stated in the rule's docstring
(what ``tripwire rules`` and docs/rules.md show), with the rules that find such a run."""

from __future__ import annotations

import numpy as np

import tripwire
from tripwire.rules import LossDiverging
from tripwire.rules import loss_diverging as module

from test_trial27g_loss_messages import SCHED_EXPLODE


def test_the_docstring_states_the_blind_spot_of_a_dip_within_the_first_saves() -> None:
    doc = " ".join((module.__doc__ or "").split())
    assert "Blind spot: a fall and a climb back within the first saves" in doc
    assert "holds a fall that came in the first half of them" in doc
    assert "is not lowered by a dip lasting less than about half that span" in doc
    assert "``oscillating_loss`` at step 70, ``loss_not_decreasing`` at 110, ``exploding_tensor`` at the NaN" in doc


def test_the_trial_run_is_the_blind_spot_and_the_default_set_finds_it() -> None:
    session = tripwire.Session(write=False, rules=[LossDiverging(), "default"], save_interval=10)
    session.set_planned_steps(352)
    for step, value in enumerate(SCHED_EXPLODE):
        session.step("train", step, {"loss": (np.float64(value), "losses")})
    fired = {f.rule: f.step for f in session.findings}
    assert "loss_diverging" not in fired, fired  # (as documented: the dip is within its first levels)
    assert fired.get("oscillating_loss") == 70 and fired.get("loss_not_decreasing") == 110, fired


def test_a_climb_back_after_the_start_held_and_the_low_level_held_is_found(feed, loss_records) -> None:
    # the loss held its start for the first half of the first 10 saves, fell, held its low level for
    # 10 saves and climbed back: found (every step's value, saves 10 steps apart)
    values = [2.3] * 60 + list(np.linspace(2.3, 0.4, 20)) + [0.4] * 100 + [2.5] * 60
    found = feed(LossDiverging(), loss_records(values), save_interval=10)
    assert [f.rule for f in found][:1] == ["loss_diverging"], found
    assert found[0].step == 220, found[0].step  # (the climb at step 180: 3 saves in a row from 200)

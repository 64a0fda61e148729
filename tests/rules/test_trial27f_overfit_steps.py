"""Trial 27f, finding 7: ``overfit``'s message named its values "at evaluation N", counted from 1
over the validation values, while the finding's own step is XGBoost's 0-based round ("its lowest
value 0.4989, at evaluation 7" was round 6; with a save interval of 10, "evaluation 2" was round 10).
The values are named by their steps now, the finding's numbering; where the validation's steps
count validations (Keras, Lightning), the train step each came after is said too."""

from __future__ import annotations

import numpy as np

import tripwire
from tripwire.rules import Overfit

# the validation metric falls to its best at the 7th value, then climbs; the training metric keeps falling
VAL = [0.69, 0.62, 0.57, 0.54, 0.52, 0.505, 0.4989, 0.51, 0.53, 0.56, 0.6, 0.65, 0.7, 0.76, 0.82, 0.9]


def _rounds(every: int) -> list[tripwire.Finding]:
    """XGBoost's layout: the training and validation metrics of a round at the same step (the round),
    saved every ``every`` rounds."""
    session = tripwire.Session(write=False, rules=[Overfit(train="train-logloss", validation="validation-logloss")],
                               save_interval=1)
    train = np.geomspace(0.6, 0.01, len(VAL))
    for i, v in enumerate(VAL):
        step = i * every
        session.step("train", step, {"train-logloss": (float(train[i]), "metrics")})
        session.step("eval", step, {"validation-logloss": (float(v), "metrics")})
    return [f for f in session.findings if f.kind == "finding"]


def test_the_best_value_is_named_by_its_round() -> None:
    found = _rounds(1)
    assert len(found) == 1
    f = found[0]
    assert "its lowest value 0.4989, at step 6)" in f.message  # (index 6: XGBoost's round [6])
    assert "evaluation 7" not in f.message and "after train step" not in f.message  # (a step is a round here)
    assert f.details["best_step"] == f.details["best_at"] - 1 == 6  # (the best median's last value)
    assert "from its best 0.505 (the median of the values at steps 4-6;" in f.message


def test_with_a_save_interval_the_steps_are_the_saved_rounds() -> None:
    found = _rounds(10)
    assert len(found) == 1
    f = found[0]
    assert "its lowest value 0.4989, at step 60)" in f.message  # (was "at evaluation 7")
    assert "from its best 0.505 (the median of the values at steps 40, 50 and 60;" in f.message
    assert f.details["best_step"] == 60


def test_an_early_best_names_its_step_and_its_rank_among_the_evaluations() -> None:
    # a model that never generalised: best at the first validation value
    session = tripwire.Session(write=False, rules=[Overfit(train="train-logloss", validation="validation-logloss")],
                               save_interval=1)
    train = [1.0, 0.8, 0.6, 0.4, 0.3, 0.2, 0.1, 0.05, 0.03, 0.02]
    val = [1.0, 1.0, 1.0, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8]
    for i, (t, v) in enumerate(zip(train, val)):
        session.step("train", 100 + i, {"train-logloss": (t, "metrics")})
        session.step("eval", 100 + i, {"validation-logloss": (v, "metrics")})
    found = [f for f in session.findings if f.kind == "finding"]
    assert len(found) == 1 and found[0].details["best_at"] == 1 and found[0].details["best_step"] == 100
    assert "Its best came at the 1st of " in found[0].message and " evaluations (step 100): a model" in found[0].message


def test_validations_counted_apart_from_training_name_the_train_step_too() -> None:
    # Keras/Lightning: eval steps count validations (here one per 10 train steps)
    session = tripwire.Session(write=False, rules=[Overfit()], save_interval=1)
    train = np.geomspace(0.6, 0.01, len(VAL))
    step = 0
    for e, v in enumerate(VAL):
        for _ in range(10):
            session.step("train", step, {"loss": (float(train[e]), "losses")})
            step += 1
        session.step("eval", e, {"val_loss": (float(v), "losses")})
    found = [f for f in session.findings if f.kind == "finding"]
    assert len(found) == 1
    assert "its lowest value 0.4989, at step 6, after train step 69)" in found[0].message

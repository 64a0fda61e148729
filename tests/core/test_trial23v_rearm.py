"""Trial 23v (a notebook user re-running cells): a rule armed again for a later training through the
same session (a second Keras ``fit`` through the same callback: ``Session.new_training``) looked back
into the earlier training's steps at its first evaluation: the earlier fit's NaN validation loss
stopped a healthy re-run, dated at the earlier fit's eval step."""

from __future__ import annotations

import tripwire


def _fit(session: tripwire.Session, train: range, eval_step: int, loss: float) -> None:
    for step in train:
        session.step("train", step, {"loss": (loss, "losses")})
    session.step("eval", eval_step, {"loss": (loss, "losses")}, summary=True)


def test_a_rule_armed_again_does_not_look_back_into_the_earlier_training() -> None:
    session = tripwire.Session(write=False, rules=["exploding_tensor"], save_interval=1)
    _fit(session, range(0, 5), 0, float("nan"))  # the broken fit: stopped at train step 0, its eval NaN unjudged
    assert [(f.rule, f.step, f.mode) for f in session.findings] == [("exploding_tensor", 0, "train")]
    session.new_training()
    _fit(session, range(5, 10), 1, 0.5)  # the healthy re-run
    assert session.stopped_by is None
    assert [(f.step, f.mode) for f in session.findings] == [(0, "train")]
    session.new_training()
    _fit(session, range(10, 15), 2, float("nan"))  # broken again: found again, in this training
    assert [(f.step, f.mode) for f in session.findings] == [(0, "train"), (10, "train")]

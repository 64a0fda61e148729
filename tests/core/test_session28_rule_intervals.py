"""A rule that needs a collection at every step of the modes it reads gets it there only, the other
modes saving as the config does (trial 28h: ``class_imbalance`` reads eval, and its ``max_interval``
of 1 made every train step store labels and predictions; the train rules then judged every train
step, and ``loss_not_decreasing``, tested ten times as often as its save interval, stopped healthy
class-weighted Keras runs in 5 of 7 seeds at steps such as 66 and 74)."""

from __future__ import annotations

from pathlib import Path

import tripwire


def _wants(session: tripwire.Session, mode: str, step: int, kind: str) -> bool:
    plan = session.begin_step(mode, step)
    wanted = plan.wants(kind)
    session.end_step()
    return wanted


def test_class_rules_save_labels_every_eval_step_and_train_steps_as_the_config(tmp_path: Path) -> None:
    session = tripwire.Session(rules=["default", "class_imbalance"], out_dir=tmp_path / "run", write=False)
    assert [s for s in range(12) if _wants(session, "train", s, "labels")] == [0, 10]
    assert [s for s in range(5) if _wants(session, "eval", s, "labels")] == [0, 1, 2, 3, 4]
    session.close()


def test_a_rule_that_reads_train_steps_too_gets_them_every_step(tmp_path: Path) -> None:
    rule = {"name": "class_imbalance", "modes": ["train", "eval"]}
    session = tripwire.Session(rules=[rule], out_dir=tmp_path / "run", write=False)
    assert [s for s in range(4) if _wants(session, "train", s, "predictions")] == [0, 1, 2, 3]
    session.close()

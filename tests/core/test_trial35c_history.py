"""Trial 35c: ``history.latest("val_loss")`` in a rule was None all training (the live History read
mode train by default, a stored Run the tensor's own mode). Without a mode, History's scalar reads
(series, finite_series, latest, value) read the series' own mode, as a Run's do."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire import FunctionRule, Session


def _session(tmp_path: Path, rules: list = []) -> Session:  # noqa: B006 - read only
    return Session({"collections": ["losses", "metrics"], "rules": rules, "save": {"interval": 1}}, out_dir=tmp_path / "run")


def test_reads_without_a_mode_take_the_series_own_mode(tmp_path: Path) -> None:
    with _session(tmp_path) as session:
        for step in range(3):
            plan = session.begin_step("train", step)
            plan.add("loss", np.float64(1.0 + step), "losses")
            session.end_step()
            plan = session.begin_step("eval", step)
            plan.add("val_loss", np.float64(10.0 + step), "metrics")
            session.end_step()
        h = session.history
        assert h.latest("val_loss") == (2, 12.0) == h.latest("val_loss", "raw", "eval")
        assert h.latest("val_loss", "raw", "train") is None
        assert h.value("val_loss", "raw", 1) == 11.0
        assert h.series("val_loss")[1].tolist() == [10.0, 11.0, 12.0]
        assert h.finite_series("val_loss")[1].tolist() == [10.0, 11.0, 12.0]
        assert h.latest("loss") == (2, 3.0)  # (train where it has train values)
        assert h.latest("not_yet") is None  # (a tensor not captured yet: None, as before)


def test_a_series_in_several_modes_but_train_is_an_error_naming_them(tmp_path: Path) -> None:
    with _session(tmp_path) as session:
        for mode in ("eval", "test"):
            plan = session.begin_step(mode, 0)
            plan.add("acc", np.float64(0.5), "metrics")
            session.end_step()
        with pytest.raises(tripwire.TensorNotFoundError, match=r"modes eval, test \(not train\): pass mode="):
            session.history.latest("acc")
        assert session.history.latest("acc", "raw", "test") == (0, 0.5)


def test_a_rule_reads_a_validation_metric_without_a_mode(tmp_path: Path) -> None:
    seen = []

    def high(history, step, mode):  # type: ignore[no-untyped-def]
        seen.append((mode, history.latest("val_loss")))
        latest = history.latest("val_loss")
        return f"val_loss {latest[1]}" if latest is not None and latest[1] > 5 else None

    with _session(tmp_path, [FunctionRule(high, modes=["eval"], name="high")]) as session:
        plan = session.begin_step("eval", 0)
        plan.add("val_loss", np.float64(7.0), "metrics")
        session.end_step()
        assert seen == [("eval", (0, 7.0))]
        assert [f.rule for f in session.findings] == ["high"]


def test_a_tensor_view_names_its_array_kinds_beside_its_scalar_reductions(tmp_path: Path) -> None:
    config = {"collections": {"w": {"include": ["^w$"], "reductions": ["raw", "l2", "histogram"]}}, "rules": []}
    with Session(config, out_dir=tmp_path / "run") as session:
        session.begin_step("train", 0).add("w", np.arange(4.0), "weights")
        session.end_step()
    view = tripwire.open_run(tmp_path / "run").tensor("w")
    assert view.reductions() == ["l2"] and view.array_kinds() == ["raw", "histogram"]

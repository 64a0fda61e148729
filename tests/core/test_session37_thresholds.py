"""Trial 36k: a collection that lists ``fraction_abs_gt:5`` beside ``saturated_activation``, whose
``tanh_threshold`` is 5.0, stored the same series twice (``fraction_abs_gt:5`` and
``fraction_abs_gt:5.0``), and a reader had to name a threshold as it was stored (``fraction_gt:1e-3``
of a run that stored ``fraction_gt:0.001`` was a TensorNotFoundError). A threshold is now stored once,
under the user's spelling, and found by its value."""

from __future__ import annotations

import numpy as np
import pytest

import tripwire
from tripwire import ReductionConfig, Session, TensorNotFoundError


def test_a_rules_threshold_written_another_way_is_stored_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    session = Session(rules=[{"name": "saturated_activation", "patience": 1}], out_dir=tmp_path / "run", save_interval=1,
                      collections={"activation_inputs": {"reductions": ["mean", "fraction_abs_gt:5"]}, "losses": None})
    for step in range(3):
        inputs = np.full(10, 6.0 if step == 2 else 1.0)
        session.step("train", step, {"loss": (1.0, "losses"), "tanh1/input": (inputs, "activation_inputs")})
    session.close()
    assert session.history.reductions("tanh1/input") == ["fraction_abs_gt:10.0", "fraction_abs_gt:5", "mean"]
    found = [f for f in session.findings if f.rule == "saturated_activation"]
    assert found and found[0].step == 2  # (the rule reads its 5.0 from the user's 5)
    run = tripwire.open_run(tmp_path / "run")
    assert run.reductions("tanh1/input") == ["fraction_abs_gt:10.0", "fraction_abs_gt:5", "mean"]
    for spelling in ("fraction_abs_gt:5", "fraction_abs_gt:5.0", "fraction_abs_gt:5e0", "fraction_abs_gt:+5.00"):
        assert run.value("tanh1/input", spelling, 2) == 1.0
        assert run.value("tanh1/input", spelling, 1) == 0.0
    with pytest.raises(TensorNotFoundError, match="fraction_abs_gt:5"):
        run.series("tanh1/input", "fraction_abs_gt:4")


def test_merged_keeps_each_other_threshold() -> None:
    user = ReductionConfig.from_list(["l2", "fraction_gt:0.001"])
    rule = ReductionConfig.from_list(["fraction_gt:1e-3", "fraction_gt:0.5", "l2"])
    assert user.merged(rule).reductions == ("l2", "fraction_gt:0.001", "fraction_gt:0.5")


def test_a_replay_and_plot_find_a_threshold_however_written(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Trial 37a: the stored run of docs/config.md's own example (fraction_abs_gt:5 listed, the rule
    reading 5.0) made ``tripwire watch`` say that the run stored no 'fraction_abs_gt:5.0' and to add
    it; ``tripwire plot`` refused ``fraction_gt:0.50`` of a stored ``fraction_gt:0.5``, and ``abs_l2``."""
    from tripwire._cli import main

    run_dir = tmp_path / "run"
    with Session(out_dir=run_dir, rules=["saturated_activation"], actions=["record"], save_interval=1,
                 collections={"losses": None, "activation_inputs": {"reductions": ["mean", "fraction_abs_gt:5"]},
                              "weights": {"reductions": ["l2", "fraction_gt:0.5"]}}) as session:
        for step in range(12):
            session.step("train", step, {"loss": (1.0, "losses"),
                                         "tanh1/input": (np.linspace(-1, 1, 100), "activation_inputs"),
                                         "fc.weight": (np.linspace(0, 1, 10) + 0.01 * step, "weights")})
    capsys.readouterr()
    assert main(["watch", str(run_dir), "--once", "--no-record"]) == 0
    err = capsys.readouterr().err
    assert "stored no" not in err and "fraction_abs_gt:5.0" not in err
    run = tripwire.open_run(run_dir)
    pytest.importorskip("matplotlib")
    for spelling in ("fraction_gt:0.50", "fraction_gt:5e-1", "abs_l2"):
        tripwire.plot(run, "fc.weight", spelling)
        assert main(["plot", str(run_dir), "fc.weight", "--reduction", spelling, "--out", str(tmp_path / "p.png")]) == 0

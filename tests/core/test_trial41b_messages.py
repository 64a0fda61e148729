"""Trial 41b F3/F4: a mode in other letter case (``mode='EVAL'``) got no "did you mean 'eval'?" in
``tripwire.plot`` (the readers and ``begin_step`` said it); a save config that disables a mode a
rule needs offered "enable it or remove the rule", not the rule limited to the modes saved."""

from __future__ import annotations

from pathlib import Path

import pytest

import tripwire
from tripwire import ConfigError
from tripwire._validate import did_you_mean


def test_other_letter_case_is_offered() -> None:
    assert did_you_mean("EVAL", ["train", "eval", "test", "predict"]) == "; did you mean 'eval'?"
    assert did_you_mean("Gradients", ["weights", "gradients"]) == "; did you mean 'gradients'?"


def test_plot_mode_in_capitals(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    with tripwire.Session(out_dir=tmp_path / "run", rules=[]) as s:
        s.step("eval", 0, {"val_loss": (1.0, "losses")})
    with pytest.raises(ConfigError, match=r"mode: got 'EVAL'; accepted: train, eval, test, predict or None \(each "
                                          r"tensor's own\); did you mean 'eval'\?"):
        tripwire.plot(tripwire.open_run(tmp_path / "run"), "val_loss", mode="EVAL")


def test_a_disabled_mode_offers_the_rule_limited_to_the_modes_saved() -> None:
    cfg = {"save": {"modes": {"eval": {"enabled": False}}}}
    with pytest.raises(ConfigError, match=r"save\.modes\.eval: disabled, but rule 'exploding_tensor' needs 'losses' in "
                                          r"mode 'eval'; enable it, limit the rule to the modes saved \(\{name: "
                                          r"exploding_tensor, modes: \[train\]\}\) or remove the rule"):
        tripwire.Session(cfg, rules=["exploding_tensor"], write=False)
    # what it offers is accepted
    tripwire.Session(cfg, rules=[{"name": "exploding_tensor", "modes": ["train"]}], write=False).close()

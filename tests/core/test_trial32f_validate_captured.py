"""Trial 32f F4: ``tripwire validate xgb_default.yaml --framework xgboost`` (``rules: [default]``) said
``collections captured: losses, metrics, optimizer`` (and ``validate --json``'s ``collections`` held
``optimizer``), though no XGBoost run holds it: ``oscillating_loss`` asks for ``optimizer`` (its
clipping limits) as an optional requirement, which XGBoost never captures. With ``--framework``, the
collections listed are those that framework's training can capture; without it, every collection
the config and its rules name (nothing is left out)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tripwire._cli import main


@pytest.fixture
def default_cfg(tmp_path: Path) -> Path:
    cfg = tmp_path / "xgb_default.yaml"
    cfg.write_text("rules: [default]\n")
    return cfg


def test_validate_for_xgboost_lists_no_collection_xgboost_cannot_capture(default_cfg: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(default_cfg), "--framework", "xgboost"]) == 0
    out = capsys.readouterr().out
    [line] = [line for line in out.splitlines() if line.startswith("  collections captured:")]
    assert line == "  collections captured: losses, metrics", out
    assert main(["validate", str(default_cfg), "--framework", "xgboost", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["collections"] == ["losses", "metrics"]
    assert data["rules"] == ["exploding_tensor", "loss_not_decreasing", "oscillating_loss"]


@pytest.mark.parametrize("framework", [None, "lightning", "keras", "mxnet"])
def test_a_framework_that_captures_the_optimizer_keeps_it(default_cfg: Path, framework: str | None,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["validate", str(default_cfg), "--json"] + ([] if framework is None else ["--framework", framework])
    assert main(argv) == 0
    assert "optimizer" in json.loads(capsys.readouterr().out)["collections"]


def test_a_custom_collection_of_any_kind_is_kept_for_xgboost(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "custom.yaml"
    cfg.write_text("collections:\n  mine: {include: ['.*'], reductions: [mean]}\n  trees: {}\n"
                   "rules: [exploding_tensor]\n")
    assert main(["validate", str(cfg), "--framework", "xgboost", "--json"]) == 0, capsys.readouterr().err
    cols = json.loads(capsys.readouterr().out)["collections"]
    assert "mine" in cols and "trees" in cols


def test_a_collection_only_an_optional_need_adds_is_named_with_its_rules(default_cfg: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # trial 35j: optimizer was listed as captured, and a Lightning run of the config held none
    assert main(["validate", str(default_cfg), "--framework", "lightning"]) == 0
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  collections captured:")]
    assert "optimizer (only what oscillating_loss" in line and "where the training has it)" in line, line
    assert line.endswith(", gradients"), line

"""Trial 22k: ``tripwire validate`` missed an invalid include regex in a collection that had other
errors too, and said an unregistered rule twice (a WARNING before its error list)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tripwire._cli import main


def test_validate_names_every_error_of_a_collection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "twoerr.yaml"
    bad.write_text('collections:\n  weights:\n    include: ["("]\n    reductions: [l2, histgram]\n    histogram_bins: 0\n'
                   '  mine:\n    include: ["(("]\n    reductions: [l3]\n')
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"5 errors in {bad}:" in err
    for said in ("collections.weights.include[0]: invalid regular expression '('",
                 "collections.weights.reductions[1]: unknown reduction 'histgram'",
                 "collections.weights.histogram_bins: got 0",
                 "collections.mine.include[0]: invalid regular expression '(('",
                 "collections.mine.reductions[0]: unknown reduction 'l3'"):
        assert said in err, said


def test_validate_says_an_unregistered_rule_once(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 caplog: pytest.LogCaptureFixture) -> None:
    bad = tmp_path / "rule.yaml"
    bad.write_text("rules: [vanishing_gradeint]\n")
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        assert main(["validate", str(bad)]) == 2
    assert "unknown rule 'vanishing_gradeint'" in capsys.readouterr().err
    assert "vanishing_gradeint" not in caplog.text  # (no WARNING before the error list)

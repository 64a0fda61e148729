"""``tripwire demo``: the planted fault is stopped early, the healthy twin runs to the end."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("lightning")
pytest.importorskip("sklearn")

import tripwire  # noqa: E402
from tripwire.integrations.lightning._demo import register  # noqa: E402


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tripwire")
    register(parser.add_subparsers(dest="command"))
    return parser


def test_demo_with_the_planted_fault_stops_early(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo"
    args = _parser().parse_args(["demo", "--out-dir", str(out), "--max-epochs", "3"])
    assert args.func(args) == 0
    text = capsys.readouterr().out
    run = tripwire.open_run(out)
    # trial 17a: "stopped training at step 41 ... fired at step 40" while the run's last step was 40
    last = max(run.steps("train"))
    assert f"tripwire stopped training after step {last} ({last + 1} of 69 planned steps trained" in text, text
    assert f"fired at step {last} (train)" in text
    assert f"tripwire inspect {out}" in text and "tripwire.open_run" in text
    # the Python lines it prints run as pasted (trial 19f: no `import tripwire`)
    python = text.split("or in Python:\n", 1)[1].split("\n\n", 1)[0]
    namespace: dict[str, object] = {}
    exec(textwrap.dedent(python), namespace)  # noqa: S102 - the demo's own output
    assert namespace["run"].status == "stopped"  # type: ignore[attr-defined]
    run = tripwire.open_run(out)
    assert run.status == "stopped"
    rules = {f.rule for f in run.findings}
    assert rules & {"vanishing_gradient", "loss_not_decreasing", "exploding_tensor", "exploding_gradient"}
    assert max(run.steps("train")) < 69


def test_demo_healthy_twin_runs_to_the_end_without_findings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tripwire._cli import main

    out = tmp_path / "healthy"
    assert main(["demo", "--healthy", "--out-dir", str(out), "--max-epochs", "2"]) == 0
    text = capsys.readouterr().out
    assert "training ran to the end: 46 steps" in text and "findings: none" in text
    run = tripwire.open_run(out)
    assert run.status == "complete" and run.findings == []


def test_demo_rejects_bad_max_epochs(capsys: pytest.CaptureFixture[str]) -> None:
    from tripwire import ConfigError
    from tripwire._cli import main

    args = _parser().parse_args(["demo", "--max-epochs", "0"])
    with pytest.raises(ConfigError, match="--max-epochs: got 0; accepted: an integer >= 1"):
        args.func(args)
    assert main(["demo", "--max-epochs", "0"]) == 2
    assert "--max-epochs: got 0" in capsys.readouterr().err


def test_demo_help_reads_as_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    # trial 17a: "``tripwire demo``: ..." and a line that ran past the others
    with pytest.raises(SystemExit):
        _parser().parse_args(["demo", "--help"])
    out = capsys.readouterr().out
    assert "``" not in out and "`tripwire demo`: a Lightning MLP" in out
    assert max(len(line) for line in out.splitlines()) <= 100

"""Trial 28f finding 4: runs compared in one Axes (``label=``) had their findings' labels unprefixed,
and two runs' same rule at the same step drew identical labels on top of each other: you could not
tell that both runs fired there, or which one did."""

from __future__ import annotations

from pathlib import Path

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import tripwire  # noqa: E402


def _run(path: Path, findings: list[tuple[str, int]]) -> tripwire.Run:
    with tripwire.Session(out_dir=str(path), save_interval=1) as s:
        for step in range(20):
            s.step("train", step, {"loss": (1.0 / (step + 1), "losses")})
        for rule, step in findings:
            s.record_finding(tripwire.Finding(rule, step, "train", f"at {step}"))
    return tripwire.open_run(path)


def _texts(ax: object) -> list[tuple[str, float]]:
    return [(t.get_text(), t.get_position()[0]) for t in ax.texts]  # type: ignore[attr-defined]


def _overlapping(ax: object, canvas: FigureCanvasAgg) -> list[tuple[str, str]]:
    canvas.draw()
    renderer = canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in ax.texts]  # type: ignore[attr-defined]
    return [(a, b) for i, (a, box_a) in enumerate(boxes) for b, box_b in boxes[i + 1:] if box_a.overlaps(box_b)]


def test_label_prefixes_the_findings_and_two_runs_same_rule_same_step_are_staggered(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", [("exploding_gradient", 10), ("exploding_tensor", 17)])
    b = _run(tmp_path / "b", [("exploding_gradient", 10)])
    figure = Figure()
    canvas = FigureCanvasAgg(figure)
    ax = figure.subplots()
    tripwire.plot(a, "loss", ax=ax, label="loop")
    tripwire.plot(b, "loss", ax=ax, label="lightning")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["loop: loss", "lightning: loss"]
    assert _texts(ax) == [(" loop: exploding_gradient", 10), (" loop: exploding_tensor", 17),
                          (" lightning: exploding_gradient", 10)]
    assert _overlapping(ax, canvas) == []
    # each next to its line: within a few label widths of step 10
    renderer = canvas.get_renderer()
    x10 = ax.transData.transform((10, 0))[0]
    for t in ax.texts:
        if t.get_position()[0] == 10:
            box = t.get_window_extent(renderer)
            assert abs((box.x0 + box.x1) / 2 - x10) < 4 * box.width


def test_without_a_label_two_runs_findings_at_one_step_are_still_both_readable(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", [("exploding_gradient", 10)])
    b = _run(tmp_path / "b", [("exploding_gradient", 10), ("loss_not_decreasing", 10)])
    figure = Figure()
    canvas = FigureCanvasAgg(figure)
    ax = figure.subplots()
    tripwire.plot(a, "loss", ax=ax)
    tripwire.plot(b, "loss", ax=ax)
    assert _texts(ax) == [(" exploding_gradient", 10), (" exploding_gradient", 10), (" loss_not_decreasing", 10)]
    assert _overlapping(ax, canvas) == []


def test_one_run_drawn_twice_into_one_axes_draws_its_findings_once(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", [("exploding_gradient", 10)])
    figure = Figure()
    FigureCanvasAgg(figure)
    ax = figure.subplots()
    tripwire.plot(a, "loss", ax=ax, label="loop")
    tripwire.plot(tripwire.open_run(tmp_path / "a"), "loss", ax=ax, label="loop", yscale="log")
    assert _texts(ax) == [(" loop: exploding_gradient", 10)]
    assert len([ln for ln in ax.get_lines() if ln.get_gid() == "tripwire-finding"]) == 1
    # another label is another run as far as the reader can tell: drawn, staggered
    tripwire.plot(a, "loss", ax=ax, label="again")
    assert _texts(ax)[-1] == (" again: exploding_gradient", 10)
    # a fresh Axes starts afresh
    ax2 = Figure().subplots()
    tripwire.plot(a, "loss", ax=ax2, label="loop")
    assert _texts(ax2) == [(" loop: exploding_gradient", 10)]


def test_an_axes_cleared_draws_the_findings_again(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", [("exploding_gradient", 10)])
    ax = Figure().subplots()
    tripwire.plot(a, "loss", ax=ax, label="loop")
    ax.cla()
    assert _texts(ax) == []
    tripwire.plot(a, "loss", ax=ax, label="loop")
    assert _texts(ax) == [(" loop: exploding_gradient", 10)]

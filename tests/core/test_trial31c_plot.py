"""Trial 31c #5: ``tripwire plot`` of a run whose loss went NaN at step 2500, with findings at steps
2500 and 2520 of a 2695-step axis: the two labels were drawn on top of each other (only labels at
one step were staggered), and the loss line just ended at 2500, nothing saying why."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import tripwire  # noqa: E402
from tripwire._cli import main  # noqa: E402


def _run(path: Path, losses: list[float], findings: list[tuple[str, int]], grad: bool = False) -> tripwire.Run:
    with tripwire.Session(out_dir=str(path), save_interval=1, rules=[]) as s:
        for step, loss in enumerate(losses):
            values = {"loss": (loss, "losses")}
            if grad:
                values["grad_norm"] = (2 * loss, "metrics")
            s.step("train", step, values)
        for rule, step in findings:
            s.record_finding(tripwire.Finding(rule, step, "train", f"at {step}"))
    return tripwire.open_run(path)


def _axes() -> tuple[object, FigureCanvasAgg]:
    figure = Figure(figsize=(9, 5))
    canvas = FigureCanvasAgg(figure)
    return figure.subplots(), canvas


def _boxes(ax: object, canvas: FigureCanvasAgg) -> dict[str, object]:
    canvas.draw()
    renderer = canvas.get_renderer()
    return {t.get_text().strip(): t.get_window_extent(renderer) for t in ax.texts}  # type: ignore[attr-defined]


def test_labels_of_findings_at_nearby_steps_do_not_overlap(tmp_path: Path) -> None:
    losses = [1.0 / (i + 1) for i in range(2695)]
    # (recorded in this order: the later step first, as the training's warning came before the watch's finding)
    run = _run(tmp_path / "run", losses, [("exploding_gradient", 2520), ("exploding_tensor", 2500),
                                          ("loss_not_decreasing", 2510)])
    ax, canvas = _axes()
    tripwire.plot(run, "loss", ax=ax)
    boxes = _boxes(ax, canvas)
    assert set(boxes) == {"exploding_gradient", "exploding_tensor", "loss_not_decreasing"}
    names = sorted(boxes)
    assert [(a, b) for i, a in enumerate(names) for b in names[i + 1:] if boxes[a].overlaps(boxes[b])] == []
    # each beside its own line: the first step's on its left, the next on the right, the third further out
    x = {step: ax.transData.transform((step, 0))[0] for step in (2500, 2510, 2520)}  # type: ignore[attr-defined]
    assert boxes["exploding_tensor"].x1 <= x[2500] + 1
    assert boxes["loss_not_decreasing"].x0 >= x[2510]
    for name, step in (("exploding_tensor", 2500), ("loss_not_decreasing", 2510), ("exploding_gradient", 2520)):
        box = boxes[name]
        assert abs((box.x0 + box.x1) / 2 - x[step]) < 4 * box.width


def test_findings_far_apart_keep_their_place_left_of_the_line(tmp_path: Path) -> None:
    run = _run(tmp_path / "run", [1.0] * 100, [("a_rule", 20), ("b_rule", 80)])
    ax, canvas = _axes()
    tripwire.plot(run, "loss", ax=ax)
    assert [(t.get_text(), t.get_position()[0], t.get_horizontalalignment()) for t in ax.texts] == [
        (" a_rule", 20, "right"), (" b_rule", 80, "right")]


def test_a_series_that_turns_nonfinite_is_marked_where_it_does(tmp_path: Path) -> None:
    losses = [1.0 / (i + 1) for i in range(60)] + [float("nan")] * 40
    run = _run(tmp_path / "run", losses, [], grad=True)
    ax, canvas = _axes()
    tripwire.plot(run, ["loss", "grad_norm"], ax=ax)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["loss (NaN/inf from step 60)",  # type: ignore[attr-defined]
                                                                  "grad_norm (NaN/inf from step 60)"]
    spans = [p for p in ax.patches if p.get_gid() == "tripwire-nonfinite"]  # type: ignore[attr-defined]
    assert len(spans) == 1  # (the two lines went NaN together: one shaded range)
    x0, x1 = spans[0].get_x(), spans[0].get_x() + spans[0].get_width()
    assert (x0, x1) == (60, 99)
    marks = [c for c in ax.collections if c.get_gid() == "tripwire-nonfinite"]  # type: ignore[attr-defined]
    assert sorted(tuple(c.get_offsets()[0]) for c in marks) == sorted([(60.0, 1.0 / 60), (60.0, 2.0 / 60)])
    # the data lines are the series alone (the marks are no Line2D)
    assert len([ln for ln in ax.get_lines() if ln.get_gid() != "tripwire-finding"]) == 2  # type: ignore[attr-defined]


def test_one_value_that_is_not_finite_in_the_middle(tmp_path: Path) -> None:
    losses = [1.0] * 50
    losses[30] = float("inf")
    losses[31] = float("nan")
    losses[40] = float("nan")
    run = _run(tmp_path / "run", losses, [])
    ax, _ = _axes()
    tripwire.plot(run, "loss", ax=ax)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["loss (NaN/inf at 3 steps from step 30)"]  # type: ignore[attr-defined]
    spans = sorted((p.get_x(), p.get_x() + p.get_width()) for p in ax.patches  # type: ignore[attr-defined]
                   if p.get_gid() == "tripwire-nonfinite")
    assert spans == [(30, 31), (39.5, 40.5)]


def test_tripwire_plot_writes_the_marked_image(tmp_path: Path, capsys) -> None:
    losses = [1.0 / (i + 1) for i in range(2500)] + [float("nan")] * 195
    run_dir = tmp_path / "run"
    _run(run_dir, losses, [("exploding_gradient", 2520), ("exploding_tensor", 2500)])
    out = tmp_path / "loss.png"
    assert main(["plot", str(run_dir), "loss", "--yscale", "log", "--out", str(out)]) == 0
    assert out.stat().st_size > 0 and capsys.readouterr().out.strip() == str(out)
    assert np.isfinite(losses[:2500]).all()

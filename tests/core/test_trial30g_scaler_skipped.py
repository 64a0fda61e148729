"""Trial 30g F2: an fp16 run whose GradScaler skipped every step (a NaN in the backward pass) holds a
falling ``loss_scale`` and no gradient. ``tripwire watch`` said of the gradient rules "had nothing to
read ... capture it in the training's config", although the config captures gradients, and the
hand-written loop's session end gave the generic "the training offered no such tensor". Both now
name the scaler, as the Lightning callback's end does."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

import tripwire
from tripwire._cli import main

_RULES = ["vanishing_gradient", "exploding_gradient"]


def _amp_loop(out: Path, scales: list[float]) -> list[str]:
    """A hand loop following docs/architecture.md's AMP recipe whose scaler skips: a loss and the
    scale offered, no gradient (``scaler_skips`` said so at every step); returns the end's messages."""
    s = tripwire.Session(out_dir=str(out), save_interval=10, rules=_RULES)
    records: list[logging.LogRecord] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = _Keep(logging.WARNING)
    logging.getLogger("tripwire").addHandler(handler)
    try:
        for step in range(len(scales)):
            plan = s.begin_step("train", step)
            plan.add("loss", 2.3, "losses")
            if plan.wants("optimizer"):
                plan.add("loss_scale", scales[step], "optimizer")
            s.end_step()
        s.close()
    finally:
        logging.getLogger("tripwire").removeHandler(handler)
    return [r.getMessage() for r in records]


def test_the_sessions_end_names_the_scaler_where_its_scale_fell_at_every_save_step(tmp_path: Path) -> None:
    said = _amp_loop(tmp_path / "run", [65536 / 2 ** i for i in range(21)])
    lines = [m for m in said if "had nothing to read" in m]
    assert len(lines) == 1 and "vanishing_gradient" in lines[0] and "exploding_gradient" in lines[0]
    assert "the rules asked for the collection, but the training offered no such tensor; fp16 AMP's GradScaler skipped " \
           "optimizer steps all run long: the loss scale fell from each of the 3 train save steps to the next (65536 " \
           "at step 0 to 0.0625 at step 20)" in lines[0]


def test_watch_names_the_scaler_not_the_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    _amp_loop(out, [65536 / 2 ** i for i in range(21)])
    cfg = tmp_path / "rules.yaml"
    cfg.write_text("rules: [vanishing_gradient, exploding_gradient]\n")
    capsys.readouterr()
    assert main(["watch", str(out), "--once", "--config", str(cfg), "--no-record"]) == 3
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "had nothing to read: no tensor" in line]
    assert len(lines) == 2
    for rule, line in zip(_RULES, lines):
        assert line.startswith(f"tripwire watch: rule {rule!r} had nothing to read: no tensor of the 'gradients' "
                               f"collection was captured (the run holds tensors of: losses, optimizer): fp16 AMP's "
                               f"GradScaler skipped optimizer steps all run long: the loss scale fell")
        assert "capture it in the training's config" not in line


@pytest.mark.parametrize("scales", [[65536.0] * 21, [65536.0] * 11 + [32768.0] * 10, [1024.0]])
def test_a_scale_that_held_somewhere_keeps_the_config_pointer(tmp_path: Path, scales: list[float],
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    # (the scaler skipped no step between some two save steps, or one record shows nothing: the
    # training did not offer gradients for another reason)
    out = tmp_path / "run"
    said = _amp_loop(out, scales)
    assert not any("GradScaler" in m for m in said)
    cfg = tmp_path / "rules.yaml"
    cfg.write_text("rules: [vanishing_gradient]\n")
    capsys.readouterr()
    main(["watch", str(out), "--once", "--config", str(cfg), "--no-record"])
    err = capsys.readouterr().err
    assert "capture it in the training's config" in err and "GradScaler" not in err

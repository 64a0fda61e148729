"""Trial 27g F7 / 27w: a hand loop that restarts its step number every epoch (enumerate(loader)'s
index as the step) holds each step several times; ``tripwire inspect`` said those steps "hold records
that a later training or a resume went back over", which is neither. It now says the step count went
back within one training; a second training appended to the run is still said as before."""

from __future__ import annotations

from pathlib import Path

import tripwire
from tripwire._cli import main


def _loop(out: Path, epochs: int, per_epoch: int) -> None:
    with tripwire.Session(out_dir=str(out), save_interval=1) as s:
        for e in range(epochs):
            for i in range(per_epoch):  # the slip: the batch index as the step
                s.step("train", i, {"loss": (1.0 / (1 + e * per_epoch + i), "losses")})


def test_a_step_count_restarted_within_one_training_is_said_so(tmp_path: Path, capsys) -> None:
    out = tmp_path / "reset"
    _loop(out, epochs=3, per_epoch=5)
    assert main(["inspect", str(out)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "went back within one training" in text, text
    assert "a later training or a resume" not in text, text


def test_a_second_training_appended_is_still_said_as_one(tmp_path: Path, capsys) -> None:
    out = tmp_path / "twice"
    _loop(out, epochs=1, per_epoch=5)
    _loop(out, epochs=1, per_epoch=5)
    assert main(["inspect", str(out)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "a later training or a resume went back over" in text, text

"""Trial 41f F3: a Keras GAN's run (``g_loss``, ``d_loss``) told the loss rules "did you mean
'g_loss'?", which docs/rules.md warns against: pointed at it, ``loss_not_decreasing`` stopped a GAN
that was learning. The end-of-training line now says that a GAN's losses do not fall by design."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import tripwire


@pytest.mark.parametrize(("g", "d"), [("g_loss", "d_loss"), ("gen_loss", "disc_loss"), ("generator_loss", "critic_loss")])
def test_a_gan_is_not_offered_its_generator_loss(tmp_path: Path, caplog: pytest.LogCaptureFixture, g: str,
                                                 d: str) -> None:
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        with tripwire.Session(out_dir=tmp_path / "run", rules=["loss_not_decreasing"]) as s:
            for step in range(20):
                s.step("train", step, {g: (1.0, "losses"), d: (0.69, "losses")})
    (said,) = [r.getMessage() for r in caplog.records if "loss_not_decreasing': loss='loss'" in r.getMessage()]
    assert "did you mean" not in said, said
    assert "The losses of a GAN (a generator's and a discriminator's) do not fall by design (docs/rules.md): " \
           "point loss= at a validation metric of the samples, or leave the rule out" in said


def test_a_misspelled_loss_is_still_offered(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        with tripwire.Session(out_dir=tmp_path / "run", rules=[{"name": "loss_not_decreasing", "loss": "los"}]) as s:
            for step in range(20):
                s.step("train", step, {"loss": (1.0, "losses")})
    assert any("did you mean 'loss'?" in r.getMessage() for r in caplog.records), caplog.text

"""docs/rules.md names a loader that repeats one batch among what no rule finds, with what shows it
(trial 27g, finding 9: the training loss fell 2.31 -> 0.001 while the validation loss stayed at
2.4-2.6, and nothing fired). The recipe it gives is checked here: unchanged_tensor on the inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire.rules import UnchangedTensor

RULES_MD = Path(__file__).resolve().parents[2] / "docs" / "rules.md"


def test_rules_md_lists_the_repeated_batch_with_what_shows_it() -> None:
    text = " ".join(RULES_MD.read_text(encoding="utf-8").split())
    missed = text[text.index("What the default set does not catch"):text.index("Other rules are opt-in")]
    assert "**A loader that yields the same batch at every step**" in missed
    assert "`tripwire plot RUN loss val_loss`" in missed and "`{name: unchanged_tensor, collection: inputs}`" in missed


@pytest.mark.parametrize("repeated", [True, False])
def test_unchanged_tensor_on_the_inputs_finds_a_repeated_batch(repeated: bool) -> None:
    rng = np.random.default_rng(0)
    data = rng.standard_normal((1400, 64))
    session = tripwire.Session(write=False, rules=[UnchangedTensor(collection="inputs")], collections=["inputs"],
                               save_interval=10)
    for step in range(100):
        batch = data[:32] if repeated else data[rng.choice(1400, 32, replace=False)]
        session.step("train", step, {"inputs": (batch, "inputs")})
    assert [(f.rule, f.step) for f in session.findings] == ([("unchanged_tensor", 20)] if repeated else [])

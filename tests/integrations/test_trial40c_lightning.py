"""Trial 40c F1: the callback's printed form read ``fitting, 0 train steps`` after a ``close()`` in the
middle of a fit (its session dropped), where the fit was at step 5."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

L = pytest.importorskip("lightning")
torch = pytest.importorskip("torch")

from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from tripwire.integrations.lightning import TripwireCallback  # noqa: E402
from tiny_lightning import TinyNet  # noqa: E402


def test_the_printed_form_after_a_close_in_the_fit_counts_the_fits_steps(tmp_path: Path) -> None:
    cb = TripwireCallback(out_dir=tmp_path / "r")
    seen: list[str] = []

    class Peek(L.Callback):
        def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
            if trainer.global_step == 3:
                cb.close()
                seen.append(repr(cb))

    g = torch.Generator().manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(48, 4, generator=g), torch.randint(0, 2, (48,), generator=g)), batch_size=8)
    trainer = L.Trainer(max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[cb, Peek()])
    trainer.fit(TinyNet(), data)
    assert len(seen) == 1 and "fitting, 3 train steps" in seen[0], seen

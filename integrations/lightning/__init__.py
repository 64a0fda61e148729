"""tripwire for PyTorch Lightning: ``TripwireCallback``.

    from tripwire.integrations.lightning import TripwireCallback
    callback = TripwireCallback("tripwire.yaml", out_dir="runs/exp1")
    trainer = lightning.Trainer(callbacks=[callback])
    trainer.fit(model, train_loader, val_loader)
    callback.findings, callback.stopped_by

Needs the ``lightning`` extra (``pip install 'tripwire[lightning]'``). See docs/lightning.md.
Lightning itself is imported on first use of ``TripwireCallback`` (``tripwire demo`` registers its
command without importing it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ._callback import TripwireCallback

from tripwire._errors import missing_extra, require

require(("lightning", "torch"), "lightning")

__all__ = ["TripwireCallback"]


def __getattr__(name: str) -> Any:
    if name == "TripwireCallback":
        try:
            from ._callback import TripwireCallback
        except ImportError as exc:
            if exc.name and exc.name.split(".")[0] in ("lightning", "torch"):
                raise missing_extra("lightning", "lightning", exc) from exc
            raise
        globals()["TripwireCallback"] = TripwireCallback
        return TripwireCallback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

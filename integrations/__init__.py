"""Framework integrations: ``tripwire.integrations.<framework>`` (each an optional extra).

One helper for hand-written PyTorch loops lives here (it needs torch, imported on first use):
:func:`scaler_skips` tells whether fp16 mixed precision's ``torch.amp.GradScaler`` skips the
optimizer step (its gradients overflowed at the loss scale), so that a loop does not offer those
gradients (docs/architecture.md, "In a hand-written loop")."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ._torch import scaler_skips

__all__ = ["scaler_skips"]


def __getattr__(name: str) -> Any:
    if name == "scaler_skips":  # (torch imported here, not by `import tripwire.integrations.xgboost`)
        from ._torch import scaler_skips

        globals()["scaler_skips"] = scaler_skips
        return scaler_skips
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

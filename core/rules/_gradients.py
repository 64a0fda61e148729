"""Helpers of the gradient rules (private)."""

from __future__ import annotations

from .._history import History
from ._common import in_capture_order, names_in, value_at

#: Excluded from "layers": biases and normalisation parameters (1-D, not a layer's weights).
DEFAULT_EXCLUDE = r"(?i)(bias|norm|(^|[./_])bn\d*([./_]|$)|gamma|beta)"


def layer_gradients(history: History, include: str, exclude: str | None) -> list[str]:
    """Weight gradients in network order (the order the adapter offered them)."""
    return in_capture_order(history, names_in(history, "gradients", include, exclude or None))


def norms_at(history: History, names: list[str], reduction: str, step: int, mode: str, worker: int) -> list[tuple[str, float]]:
    out = []
    for n in names:
        v = value_at(history, n, reduction, step, mode, worker)
        if v is not None:
            out.append((n, v))
    return out

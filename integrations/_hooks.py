"""What the framework callbacks share about other callbacks' hooks (no framework import)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def defines_own(obj: Any, name: str, base: type) -> bool:
    """Whether ``obj`` has its own ``name`` method (its class's or an instance attribute, as the
    frameworks' ``LambdaCallback`` sets them) rather than ``base``'s."""
    fn = getattr(obj, name, None)
    return getattr(fn, "__func__", fn) is not getattr(base, name, None)


def frames_above(frame: Any, depth: int) -> Iterator[Any]:
    """``frame`` and the frames above it, ``depth`` at most (fewer at the top of the stack): where a
    callback looks for the framework's call that ran its hook (``fit``'s arguments, the callback
    list, ``xgboost.train``'s locals)."""
    for _ in range(depth):
        if frame is None:
            return
        yield frame
        frame = frame.f_back

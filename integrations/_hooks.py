"""What the framework callbacks share about other callbacks' hooks (no framework import)."""

from __future__ import annotations

from typing import Any


def defines_own(obj: Any, name: str, base: type) -> bool:
    """Whether ``obj`` has its own ``name`` method (its class's or an instance attribute, as the
    frameworks' ``LambdaCallback`` sets them) rather than ``base``'s."""
    fn = getattr(obj, name, None)
    return getattr(fn, "__func__", fn) is not getattr(base, name, None)

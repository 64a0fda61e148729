"""Keras 3 integration (any backend; torch is the one tested in CI).

    from tripwire.integrations.keras import TripwireCallback
    model.fit(x, y, callbacks=[TripwireCallback("tripwire.yaml", out_dir="runs/exp1")])

Keras loads on first use of a name below; without it the import raises an ImportError naming
the ``keras`` extra (``pip install 'tripwire[keras]'``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tripwire._errors import missing_extra, require

require(("keras",), "keras")

if TYPE_CHECKING:  # pragma: no cover
    from ._backend import KerasBackend
    from ._callback import TripwireCallback

__all__ = sorted(["KerasBackend", "TripwireCallback"])


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'tripwire.integrations.keras' has no attribute {name!r}; available: {', '.join(__all__)}")
    try:
        import keras  # noqa: F401
    except ImportError as exc:
        raise missing_extra("keras", "keras", exc) from exc
    from ._backend import KerasBackend
    from ._callback import TripwireCallback

    globals().update(KerasBackend=KerasBackend, TripwireCallback=TripwireCallback)
    return globals()[name]

"""Keras 3 integration (any backend; torch and jax are the ones tested in CI, see docs/keras.md).

    from tripwire.integrations.keras import TripwireCallback
    model.fit(x, y, callbacks=[TripwireCallback("tripwire.yaml", out_dir="runs/exp1")])

Keras loads on first use of a name below; without it the import raises an ImportError naming
the ``keras`` extra (``pip install 'tripwire[keras]'``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from tripwire._errors import MissingDependencyError, is_installed, missing_extra, require

require(("keras",), "keras")

if TYPE_CHECKING:  # pragma: no cover
    from ._backend import KerasBackend
    from ._callback import TripwireCallback

# (a literal, sorted list: type checkers read only a literal as the exported names)
__all__ = ["KerasBackend", "TripwireCallback"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'tripwire.integrations.keras' has no attribute {name!r}; available: {', '.join(__all__)}")
    try:
        import keras  # noqa: F401
    except ImportError as exc:
        raise _missing_backend(exc) or missing_extra("keras", "keras", exc) from exc
    from ._backend import KerasBackend
    from ._callback import TripwireCallback

    globals().update(KerasBackend=KerasBackend, TripwireCallback=TripwireCallback)
    return globals()[name]


_BACKEND_MODULES = ("jax", "openvino", "tensorflow", "torch")


def _missing_backend(exc: ImportError) -> MissingDependencyError | None:
    """The error for Keras installed without the backend it loads (Keras's default is tensorflow,
    which ``tripwire[keras]`` does not install: it installs torch), or None for another failure."""
    missing = (getattr(exc, "name", None) or "").split(".")[0]
    if missing not in _BACKEND_MODULES or not is_installed("keras"):
        return None
    chosen = os.environ.get("KERAS_BACKEND")
    in_file = None if chosen else _configured_backend()
    how = (f"KERAS_BACKEND={chosen}" if chosen else
           f"KERAS_BACKEND is not set, and {in_file[0]} names {in_file[1]!r}: Keras writes its default there on its "
           f"first import" if in_file else
           "Keras's default: KERAS_BACKEND is not set, nor is a backend in ~/.keras/keras.json")
    err = MissingDependencyError(
        f"keras is installed, but its backend {missing!r} ({how}) is not; set the environment variable "
        f"KERAS_BACKEND=torch (the backend 'tripwire[keras]' installs) before keras is first imported, or "
        f"install {missing}; accepted backends: jax, tensorflow, torch (see docs/keras.md)"
    )
    err.name = missing
    return err


def _configured_backend() -> tuple[str, str] | None:
    """``(path, backend)`` from Keras's own config file, ``$KERAS_HOME/keras.json`` or
    ``~/.keras/keras.json`` (trial 26f: the message said the file named no backend where Keras had
    written ``"backend": "tensorflow"`` there on its first import), or None."""
    import json

    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    path = os.path.join(home, "keras.json")
    try:
        with open(path, encoding="utf-8") as fh:
            backend = json.load(fh).get("backend")
    except (OSError, ValueError, AttributeError):
        return None
    return (path, backend) if isinstance(backend, str) and backend else None

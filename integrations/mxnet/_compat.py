"""Import MXNet 1.9.1 on the numpy it supports.

MXNet 1.9.1 (the last release) reads ``numpy.bool``, which numpy 1.24-1.26 removed. The shim below
restores it (as Python's ``bool``, what the old alias was) right before MXNet is imported, only when
``"bool" not in vars(numpy)``; this is the only place in tripwire that touches numpy's namespace.
numpy 2 breaks MXNet in many more places (``np.PZERO`` ...): that case gets a clear ImportError.
"""

from __future__ import annotations

import importlib.util
from types import ModuleType

from ..._errors import MissingDependencyError, install_hint, missing_extra


def import_mxnet() -> ModuleType:
    """Return the ``mxnet`` module, applying the numpy shim first.

    Raises :class:`tripwire.MissingDependencyError` (an ImportError) naming the ``mxnet`` extra
    when MXNet is not installed, and one naming ``numpy<2`` when MXNet cannot import on numpy 2.
    """
    import sys

    if "mxnet" in sys.modules and sys.modules["mxnet"] is not None:
        return sys.modules["mxnet"]
    try:
        spec = importlib.util.find_spec("mxnet")
    except (ImportError, ValueError) as exc:
        raise missing_extra("mxnet", "mxnet", exc) from exc
    if spec is None or spec.origin is None:  # origin None: only a namespace folder named mxnet
        raise missing_extra("mxnet", "mxnet")
    import numpy

    if "bool" not in vars(numpy):
        numpy.bool = bool  # type: ignore[attr-defined]
    try:
        import mxnet
    except ImportError as exc:
        raise missing_extra("mxnet", "mxnet", exc) from exc
    except Exception as exc:  # numpy 2: AttributeError on removed numpy names
        major = int(numpy.__version__.split(".", 1)[0])
        if major < 2:
            raise
        err = MissingDependencyError(
            f"mxnet 1.9.1 cannot import with numpy {numpy.__version__} ({type(exc).__name__}: {exc}); "
            f"it needs numpy<2: install it in its own environment with: {install_hint('mxnet')}"
        )
        err.name = "mxnet"
        raise err from exc
    return mxnet

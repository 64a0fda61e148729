"""How the tuning job shows an objective or a reported value in text (the summary, ``tune-report``,
the live view, a halt or rung-decision reason): :func:`format_value`."""

from __future__ import annotations

import math
import struct

__all__ = ["format_value"]

#: Fewest significant digits shown (a value that needs no more reads as ``f"{v:.6g}"`` did).
MIN_DIGITS = 6
#: Most significant digits shown (as GridSearch rounds its points: noise past them is not shown).
MAX_DIGITS = 12
_FLOAT32_MAX = 3.4028234663852886e38


def _as_float32(x: float) -> float:
    """``x`` rounded to the nearest float32, as a Python float."""
    return float(struct.unpack("f", struct.pack("f", x))[0])


def format_value(value: float) -> str:
    """``value`` with the fewest significant digits (at least 6, at most 12) that read back as it, so
    that values that differ show differently (trial 26b: with 6 digits, 0.99999999996 read ``1``,
    and AUCs of 0.99991 and 0.99994 could not be told apart). A value that a float32 holds exactly
    (a metric computed in float32: Keras, PyTorch) reads back as that float32: ``0.321199``, not
    the float64 digits ``0.321198999882``. ``nan``, ``inf`` and ``-inf`` as Python writes them."""
    v = float(value)
    if not math.isfinite(v):
        return repr(v)
    float32 = abs(v) <= _FLOAT32_MAX and _as_float32(v) == v
    for digits in range(MIN_DIGITS, MAX_DIGITS + 1):
        text = f"{v:.{digits}g}"
        back = float(text)
        if back == v or (float32 and _as_float32(back) == v):
            return text
    return f"{v:.{MAX_DIGITS}g}"

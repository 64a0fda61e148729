"""Trial 27i: ``out_dir`` was a ``str`` on the Lightning and Keras callbacks and a ``pathlib.Path``
on the XGBoost callback and the MXNet hook, against the README's "the same results" on every
integration. It is a ``Path`` everywhere (None before it is known)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")


def test_lightning_out_dir_is_a_path(tmp_path: Path) -> None:
    pytest.importorskip("lightning")
    from tripwire.integrations.lightning import TripwireCallback

    cb = TripwireCallback(out_dir=str(tmp_path / "run"))
    assert cb.out_dir == tmp_path / "run" and isinstance(cb.out_dir, Path)


def test_keras_out_dir_is_a_path(tmp_path: Path) -> None:
    pytest.importorskip("keras")
    from tripwire.integrations.keras import TripwireCallback

    cb = TripwireCallback(out_dir=str(tmp_path / "run"))
    assert isinstance(cb.out_dir, Path) and cb.out_dir == tmp_path / "run"
    assert TripwireCallback().out_dir is None


def test_xgboost_out_dir_is_a_path(tmp_path: Path) -> None:
    pytest.importorskip("xgboost")
    from tripwire.integrations.xgboost import TripwireCallback

    assert isinstance(TripwireCallback(out_dir=str(tmp_path / "run")).out_dir, Path)

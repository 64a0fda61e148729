"""Helpers for the rule tests: feed synthetic values through a real Session (no framework)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import pytest

import tripwire

Record = tuple[str, int, Mapping[str, tuple[Any, str]]]


def run_rule(rule: Any, records: Iterable[Record], collections: Any = None, **overrides: Any) -> list[tripwire.Finding]:
    """Feed ``(mode, step, {name: (value, kind)})`` records to a Session holding only ``rule``."""
    kwargs: dict[str, Any] = {"rules": [rule], "save_interval": 1, **overrides}
    if collections is not None:
        kwargs["collections"] = collections
    session = tripwire.Session(write=False, **kwargs)
    for mode, step, tensors in records:
        session.step(mode, step, dict(tensors))
    return session.findings


def losses(values: Iterable[float], name: str = "loss", mode: str = "train", start: int = 0, every: int = 1) -> list[Record]:
    return [(mode, start + i * every, {name: (np.float64(v), "losses")}) for i, v in enumerate(values)]


@pytest.fixture
def feed() -> Callable[..., list[tripwire.Finding]]:
    return run_rule


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture
def loss_records() -> Callable[..., list[Record]]:
    return losses

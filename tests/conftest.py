"""Shared test configuration."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
os.environ.setdefault("OMP_NUM_THREADS", "1")

try:  # property tests draw the same examples on every run (CI must not turn red on a new random draw);
    # TRIPWIRE_HYPOTHESIS_EXPLORE=1 draws new ones, to look for cases (then add each found as a test)
    from hypothesis import settings as _hypothesis_settings

    _hypothesis_settings.register_profile("deterministic", derandomize=True)
    _hypothesis_settings.register_profile("explore", derandomize=False)
    _hypothesis_settings.load_profile("explore" if os.environ.get("TRIPWIRE_HYPOTHESIS_EXPLORE") else "deterministic")
except ImportError:  # pragma: no cover - hypothesis is a dev dependency
    pass


@pytest.fixture(autouse=True)
def _registry_restored() -> Iterator[None]:
    """Each test leaves the rule registry as it found it: a rule a test registers (a user's module
    imported by name, a config's ``imports:``) would otherwise show in the contract tests' and
    ``tripwire rules``' listings of the tests after it, in every folder (session 31: a tests/core test
    registered a rule, and four contract tests in tests/rules failed after it)."""
    from tripwire.rules import _registry

    before = dict(_registry._REGISTRY)
    yield
    _registry._REGISTRY.clear()
    _registry._REGISTRY.update(before)

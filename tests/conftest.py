"""Shared test configuration."""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "torch")
os.environ.setdefault("OMP_NUM_THREADS", "1")

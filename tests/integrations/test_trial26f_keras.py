"""Trial 26f: without KERAS_BACKEND, the import error said ``~/.keras/keras.json`` named no backend
where Keras had written ``"backend": "tensorflow"`` there on its first import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("keras")


def _import_error(keras_home: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"} | {"KERAS_HOME": str(keras_home)}
    proc = subprocess.run([sys.executable, "-c", "from tripwire.integrations.keras import TripwireCallback"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0, proc.stdout
    return proc.stderr.strip().splitlines()[-1]


@pytest.mark.skipif(__import__("importlib").util.find_spec("tensorflow") is not None, reason="tensorflow installed")
def test_the_missing_backend_error_names_the_backend_in_keras_json(tmp_path: Path) -> None:
    (tmp_path / "keras.json").write_text(json.dumps({"backend": "tensorflow", "floatx": "float32"}))
    line = _import_error(tmp_path)
    assert line.startswith("tripwire._errors.MissingDependencyError: keras is installed, but its backend 'tensorflow'")
    assert f"KERAS_BACKEND is not set, and {tmp_path / 'keras.json'} names 'tensorflow'" in line, line
    assert "nor is a backend in" not in line and "KERAS_BACKEND=torch" in line

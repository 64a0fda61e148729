"""Trial 29k F6: ``tripwire demo`` without Lightning prints its one-line reason as every verb does,
``tripwire demo: error: ...`` (docs/cli.md: "Exit status 2 is bad input ... ``tripwire inspect: error:
...``"); a script that looks for ``: error:`` found tripwire plot's missing extra but not the demo's."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from tripwire._cli import main
from tripwire._errors import missing_extra


def _without_lightning(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.import_module

    def import_module(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "tripwire.integrations.lightning._demo":
            raise missing_extra("lightning", "lightning")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", import_module)


@pytest.mark.parametrize("argv", [["demo"], ["demo", "--healthy"], ["demo", "--seed", "3"]])
def test_an_unavailable_demo_says_error_as_every_verb(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    _without_lightning(monkeypatch)
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("tripwire demo: error: 'lightning' is not installed; install it with: ")
    assert "tripwire[lightning]" in lines[0]

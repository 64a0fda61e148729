"""docs/api.md lists every public name (each module's ``__all__``), under its module, and nothing
that is not public; every public class and function has a docstring (trial 28e: ``TripwireError``,
``TensorView``, ``Executor``... were in no doc; ``check_float``, which the custom-rule template uses,
had no docstring)."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "api.md"

#: module name -> the file whose literal ``__all__`` it exports (read without importing: the
#: frameworks need not be installed, MXNet lives in its own environment)
MODULES = {
    "tripwire": ROOT / "core" / "__init__.py",
    "tripwire.rules": ROOT / "core" / "rules" / "__init__.py",
    "tripwire.tune": ROOT / "core" / "tune" / "__init__.py",
    **{f"tripwire.integrations{'.' + p.parent.name if p.parent.name != 'integrations' else ''}": p
       for p in sorted((ROOT / "integrations").glob("**/__init__.py")) if "__pycache__" not in p.parts},
}


def _all_of(path: Path) -> list[str]:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                return list(ast.literal_eval(node.value))
    return []


def _documented() -> dict[str, list[str]]:
    """The names api.md lists, by the module heading they are under."""
    out: dict[str, list[str]] = {}
    module = None
    for line in API.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^## `([\w.]+)`", line)
        if heading:
            module = heading.group(1)
            out.setdefault(module, [])
            continue
        row = re.match(r"^\| `(\w+)` \(", line)
        if row and module is not None:
            out[module].append(row.group(1))
    return out


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_public_name_is_in_the_api_reference_under_its_module(module: str) -> None:
    public = _all_of(MODULES[module])
    listed = _documented().get(module)
    assert listed is not None, f"docs/api.md has no section '## `{module}`'"
    assert sorted(set(public) - set(listed)) == [], f"public in {module} but not in docs/api.md"
    assert sorted(set(listed) - set(public)) == [], f"in docs/api.md under {module} but not public"


def test_the_api_reference_has_no_section_for_a_module_that_does_not_exist() -> None:
    assert sorted(set(_documented()) - set(MODULES)) == []


@pytest.mark.parametrize("module", ["tripwire", "tripwire.rules", "tripwire.tune", "tripwire.integrations"])
def test_every_public_class_and_function_has_a_docstring(module: str) -> None:
    mod = importlib.import_module(module)
    missing = [name for name in mod.__all__
               if (inspect.isclass(getattr(mod, name)) or inspect.isfunction(getattr(mod, name)))
               and not (getattr(mod, name).__doc__ or "").strip()]
    assert missing == []

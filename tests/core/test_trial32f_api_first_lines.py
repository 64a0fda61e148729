"""Trial 32f F5: docs/api.md says it gives each public name "with the first line of its docstring
(``help(name)`` in Python gives the rest)", but four entries (``FindingNotRecordedError``,
``RunContext``, ``tripwire.integrations.torch.capture_activations`` and ``capture_update_ratios``)
said another sentence than ``help()`` does. Every class and function entry of api.md begins with
the first sentence of the name's docstring, or is that sentence cut short and marked `...`
(reStructuredText roles and double backticks read as the single backticks api.md writes; a rule
class's entry may open with its YAML name, `` `all_zero`: ``). A module that cannot be imported in
this environment (MXNet, which lives in its own), or a name that is a stand-in here for an extra
that is missing (``DaskExecutor`` without distributed), is skipped, naming why."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

from tripwire import MissingDependencyError, Rule

API = Path(__file__).resolve().parents[2] / "docs" / "api.md"

#: entries whose text is the name's docstring: a class or a function (constants have none of their own)
_DOCUMENTED_KINDS = ("class", "function")


def _entries() -> list[tuple[str, str, str, str]]:
    """``(module, name, kind, text)`` of every table row of api.md, by the module heading it is under."""
    out = []
    module = None
    for line in API.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^## `([\w.]+)`", line)
        if heading:
            module = heading.group(1)
            continue
        row = re.match(r"^\| `(\w+)` \(([\w ]+)\) \| (.*) \|$", line)
        if row and module is not None:
            out.append((module, *row.groups()))
    return out


def _plain(text: str) -> str:
    """``text`` as api.md writes code: ``:class:`~tripwire.Session``` and ``:meth:`x.y``` as
    `Session` and `x.y`, ````code```` as `code`, a table's ``\\|`` as ``|``, runs of white space as
    one space; a paragraph's closing ``::`` (a code block follows) as ``:``."""
    text = re.sub(r":\w+:`~(?:[\w.]+\.)?([^`]+)`", r"`\1`", text)
    text = re.sub(r":\w+:`([^`]+)`", r"`\1`", text)
    text = text.replace("``", "`").replace("\\|", "|")
    text = " ".join(text.split())
    return text[:-1] if text.endswith("::") else text


def _first_sentence(doc: str) -> str:
    """The first sentence of ``doc``'s first paragraph, as :func:`_plain` writes it."""
    paragraph = _plain(doc.split("\n\n")[0])
    return re.split(r"(?<=\.)\s+(?=[A-Z`])", paragraph, maxsplit=1)[0]


ENTRIES = [e for e in _entries() if e[2] in _DOCUMENTED_KINDS]


def test_the_table_rows_are_read() -> None:
    assert len(ENTRIES) > 100  # (a change of the table's layout would silently check nothing)


@pytest.mark.parametrize(("module", "name", "kind", "text"), ENTRIES, ids=[f"{m}.{n}" for m, n, _, _ in ENTRIES])
def test_each_entry_begins_with_the_first_sentence_of_the_docstring(module: str, name: str, kind: str,
                                                                    text: str) -> None:
    try:
        mod = importlib.import_module(module)
        obj = getattr(mod, name)
    except MissingDependencyError as exc:  # (MXNet: its own environment, numpy<2)
        pytest.skip(f"{module} cannot be imported in this environment: {exc}")
    doc = inspect.getdoc(obj)
    assert doc, f"{module}.{name} has no docstring"
    stand_in = re.search(r"^Not available here: (.*)$", doc, flags=re.M)
    if stand_in:  # (a name whose extra is missing here: a stand-in, with a docstring of its own)
        pytest.skip(f"{module}.{name} is a stand-in in this environment: {stand_in.group(1)}")
    entry = _plain(text)
    if inspect.isclass(obj) and issubclass(obj, Rule):  # (a rule's entry opens with its YAML name)
        entry = entry.removeprefix(f"`{obj.name}`: ")
    first = _first_sentence(doc)
    if entry.endswith(" ..."):  # (cut short: what is left is the start of the first sentence)
        cut = entry[:-len(" ...")]
        assert first.startswith(cut) or cut.startswith(first), (
            f"docs/api.md, {module}.{name}:\n  api.md: {entry}\n  help(): {first}")
    else:
        assert entry.startswith(first), f"docs/api.md, {module}.{name}:\n  api.md: {entry}\n  help(): {first}"

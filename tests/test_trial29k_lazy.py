"""Trial 29k F3: with only the core installed, ``from tripwire.tune import *``, ``help(tripwire.tune)``
(pydoc) and the same for ``tripwire.integrations`` work; the names whose extra is missing
(``DaskExecutor``: tripwire[dask]; ``scaler_skips``: torch) raise the extra's MissingDependencyError
only when used. Before, the star import raised and help() printed only the install hint.

Each check runs in a fresh interpreter where the extra's modules are blocked (``sys.modules[name] =
None``, as if not installed)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def _run(code: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_tune_star_import_and_help_without_dask() -> None:
    out = _run("""
        import sys
        for name in ("dask", "distributed"):
            sys.modules[name] = None  # as if the dask extra were not installed
        import pydoc
        namespace = {}
        exec("from tripwire.tune import *", namespace)
        import tripwire.tune as tune
        print("star:", sorted(n for n in namespace if not n.startswith("__")) == sorted(tune.__all__))
        text = pydoc.render_doc(tune, renderer=pydoc.plaintext)
        print("help:", len(text) > 10000, "class Tuner" in text, "class DaskExecutor" in text,
              "tripwire[dask]" in text)
        DaskExecutor = namespace["DaskExecutor"]
        print("same:", DaskExecutor is tune.DaskExecutor, DaskExecutor.__name__, DaskExecutor.__module__)
        print("isinstance:", isinstance(object(), DaskExecutor))
        from tripwire import MissingDependencyError
        for what, use in (("call", lambda: DaskExecutor("tcp://127.0.0.1:8786")),
                          ("subclass", lambda: type("Mine", (DaskExecutor,), {}))):
            try:
                use()
            except MissingDependencyError as exc:
                print(what + ":", exc)
            else:
                print(what + ": no error")
        print("hasattr:", hasattr(DaskExecutor, "poll"), getattr(DaskExecutor, "poll", "-"))
        try:
            DaskExecutor.poll
        except AttributeError as exc:
            print("attribute:", exc)
        print("distributed:", sys.modules["distributed"])
    """)
    hint = ("'distributed' is not installed; install it with: pip install 'tripwire[dask]' "
            "(in a clone of tripwire: pip install -e '.[dask]')")
    assert out == ["star: True", "help: True True True True",
                   "same: True DaskExecutor tripwire.tune", "isinstance: False",
                   f"call: {hint}", f"subclass: {hint}", "hasattr: False -",
                   f"attribute: type object 'DaskExecutor' has no attribute 'poll': {hint}", "distributed: None"]


def test_integrations_star_import_and_help_without_torch() -> None:
    out = _run("""
        import sys
        sys.modules["torch"] = None  # as if torch were not installed
        import inspect, pydoc
        namespace = {}
        exec("from tripwire.integrations import *", namespace)
        import tripwire.integrations as integrations
        print("star:", sorted(n for n in namespace if not n.startswith("__")))
        print("dir:", "scaler_skips" in dir(integrations))
        text = pydoc.render_doc(integrations, renderer=pydoc.plaintext)
        print("help:", "scaler_skips(scaler" in text, "GradScaler" in text)
        fn = namespace["scaler_skips"]
        print("signature:", inspect.signature(fn))
        from tripwire import MissingDependencyError
        try:
            fn(None, None)
        except MissingDependencyError as exc:
            print("call:", exc)
    """)
    assert out == ["star: ['scaler_skips']", "dir: True", "help: True True",
                   "signature: (scaler: 'Any', optimizer: 'Any') -> 'bool'",
                   "call: 'torch' is not installed; install it with: pip install 'tripwire[lightning]' "
                   "(in a clone of tripwire: pip install -e '.[lightning]')"]


def test_with_the_extras_the_names_are_the_real_ones() -> None:
    pytest.importorskip("distributed")
    pytest.importorskip("torch")
    import tripwire.integrations
    import tripwire.tune
    from tripwire.integrations._torch import scaler_skips
    from tripwire.tune._dask import DaskExecutor

    assert tripwire.tune.DaskExecutor is DaskExecutor
    assert tripwire.integrations.scaler_skips is scaler_skips
    namespace: dict[str, object] = {}
    exec("from tripwire.tune import *; from tripwire.integrations import *", namespace)
    assert namespace["DaskExecutor"] is DaskExecutor and namespace["scaler_skips"] is scaler_skips
    assert "DaskExecutor" in dir(tripwire.tune) and "scaler_skips" in dir(tripwire.integrations)

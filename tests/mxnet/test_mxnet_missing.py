"""Importing the MXNet integration without MXNet, and the numpy shim MXNet 1.9.1 needs.

This module also runs in the main environment (no mxnet there); the rest of tests/mxnet only in
the MXNet environment.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap

import pytest

_SPEC = importlib.util.find_spec("mxnet")
HAVE_MXNET = _SPEC is not None and _SPEC.origin is not None  # not the tests/mxnet folder itself


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("statement", [
    "import tripwire.integrations.mxnet",
    "from tripwire.integrations.mxnet import TripwireHook",
    "from tripwire.integrations.mxnet import TripwireHandler",
    "from tripwire.integrations.mxnet import MXNetBackend",
])
def test_missing_mxnet_names_the_extra(statement: str) -> None:
    proc = _run(f"""
        import sys
        sys.modules["mxnet"] = None  # as if it were not installed
        try:
            {statement}
        except ImportError as exc:
            import tripwire
            assert isinstance(exc, tripwire.MissingDependencyError), type(exc)
            print(exc)
        else:
            raise SystemExit("no ImportError")
    """)
    assert proc.returncode == 0, proc.stderr
    assert "'mxnet' is not installed; install it with: pip install 'tripwire[mxnet]'" in proc.stdout


@pytest.mark.skipif(not HAVE_MXNET, reason="needs the MXNet environment")
def test_unknown_name_lists_what_exists() -> None:
    import tripwire.integrations.mxnet as integ

    with pytest.raises(AttributeError, match="no attribute 'Hook'; available: MXNetBackend, TripwireHandler, TripwireHook"):
        integ.Hook  # noqa: B018


@pytest.mark.skipif(not HAVE_MXNET, reason="needs the MXNet environment")
def test_numpy_shim_applied_by_the_integration_only() -> None:
    proc = _run("""
        import numpy
        import tripwire, tripwire.rules
        before = "bool" in vars(numpy)
        import tripwire.integrations.mxnet
        assert ("bool" in vars(numpy)) == before  # importing the package does not import mxnet
        from tripwire.integrations.mxnet import TripwireHook
        import mxnet
        print(numpy.__version__, before, numpy.bool is bool)
    """)
    assert proc.returncode == 0, proc.stderr
    version, before, after = proc.stdout.split()
    if int(version.split(".")[0]) < 2 and tuple(int(v) for v in version.split(".")[:2]) >= (1, 24):
        assert before == "False"  # core and the lazy package leave numpy alone
    assert after == "True"

"""Trial 41c (the tuner): ``warm_start`` with a strategy that has no rungs was accepted and did
nothing, with WARNINGs that said otherwise (F1); a script's ``__main__:train`` imported later as
``module:train`` was named "another train" (F2); a timed-out import's hint named an inner module of
a stack cut at 100 frames (F3); ``strategy=Hyperband`` (the class) read "is not one of Hyperband"
(F4). F5 (a partial grid's WARNING) is in test_trial30e_tune.py."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tune_trainables as tt

from tripwire import ConfigError
from tripwire.tune import Continuous, GridSearch, Hyperband, RandomSearch, Tuner
from tripwire.tune._errors import import_hint

SPACE = {"x": Continuous(0.0, 1.0)}


@pytest.fixture(scope="module")
def earlier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Hyperband journal of a script's ``train``, run as ``__main__``, and that script's folder."""
    folder = tmp_path_factory.mktemp("earlier")
    (folder / "mytrain.py").write_text(textwrap.dedent("""\
        from tripwire.tune import Continuous, Hyperband, Tuner

        def train(params, trial):
            for step in range(1, trial.max_resource + 1):
                if trial.report(step=step, value=params["x"] * step):
                    break
            return params["x"] * step

        if __name__ == "__main__":
            Tuner(train, {"x": Continuous(0.0, 1.0)}, objective="score", mode="max",
                  strategy=Hyperband(min_resource=1, max_resource=9, reduction_factor=3), max_jobs=6,
                  max_parallel_jobs=1, seed=1, journal="old.db").fit()
        """), encoding="utf-8")
    subprocess.run([sys.executable, "mytrain.py"], cwd=folder, check=True, capture_output=True, timeout=120)
    return folder


@pytest.mark.parametrize("strategy", [RandomSearch(max_resource=9), GridSearch(max_resource=9, num_points=4),
                                      Hyperband(min_resource=9, max_resource=9, reduction_factor=3)])
def test_warm_start_needs_a_strategy_with_rungs(earlier: Path, strategy: object) -> None:
    name = type(strategy).__name__
    which = ("its one bracket .* has no rung" if isinstance(strategy, Hyperband)  # (trial 41k)
             else f"{name} has no rungs")
    with pytest.raises(ConfigError, match=rf"warm_start='.*old.db' with strategy={name}\(.*\): an earlier journal's "
                                          rf"values are Hyperband's rung priors .* {which} and stops no trial, so "
                                          r"they would change nothing; accepted: warm_start with "
                                          r"strategy=Hyperband\(...\) of rungs"):
        Tuner(tt.train_curve, SPACE, objective="score", mode="max", strategy=strategy, max_jobs=2,
              warm_start=str(earlier / "old.db"))


def test_the_same_script_imported_later_is_the_same_train(earlier: Path, monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    monkeypatch.syspath_prepend(str(earlier))
    import mytrain

    def warm(train: object) -> list[str]:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="tripwire.tune"):
            Tuner(train, SPACE, objective="score", mode="max", max_jobs=2, seed=2, max_parallel_jobs=1,
                  strategy=Hyperband(min_resource=1, max_resource=9, reduction_factor=3),
                  journal=str(tmp_path / f"new-{len(list(tmp_path.iterdir()))}.db"),
                  warm_start=str(earlier / "old.db")).fit()
        return [r.getMessage() for r in caplog.records if "ran train=" in r.getMessage()]

    assert warm(mytrain.train) == []
    # another file's function: still named
    (said,) = warm(tt.train_curve)
    assert "ran train=__main__:train, and this job runs train=tune_trainables:train_curve" in said


def test_a_strategy_class_says_an_instance_is_needed() -> None:
    with pytest.raises(ConfigError, match=r"strategy=<class 'tripwire\.tune\._strategy\.Hyperband'> is not one of "
                                          r"Hyperband, RandomSearch, GridSearch: the class itself was given; "
                                          r"accepted: an instance, Hyperband\(\.\.\.\)"):
        Tuner(tt.train_curve, SPACE, strategy=Hyperband, max_jobs=2)
    with pytest.raises(ConfigError, match=r"strategy='hyperband' is not one of .*; accepted: an instance, "
                                          r"Hyperband\(min_resource=1, .*the YAML form, \{type: hyperband, \.\.\.\}, "
                                          r"is tripwire tune's\)"):
        Tuner(tt.train_curve, SPACE, strategy="hyperband", max_jobs=2)


def test_a_cut_stack_names_the_package_being_imported() -> None:
    frames = [f'  File "/venv/lib/python3.11/site-packages/lightning/fabric/m{i}.py", line 1 in <module>\n'
              '  File "<frozen importlib._bootstrap>", line 1176 in _find_and_load\n' for i in range(50)]
    stack = "Current thread 0x1 (most recent call first):\n" + "".join(frames) + "  ...\n"
    hint = import_hint(stack)
    assert hint.startswith("; it was importing a module (the lightning package: the stack dump keeps 100 frames, "
                           "the outermost module among them /venv/lib/python3.11/site-packages/lightning/fabric/m49.py)"
                           ": trial_timeout counts the imports"), hint
    # a whole stack: its outermost module, as before
    assert "(/venv/lib/python3.11/site-packages/lightning/fabric/m49.py)" in import_hint(stack.replace("  ...\n", ""))

"""Trial 27b, finding 6: ``trial_timeout`` counts the imports done inside ``train``. A trial that
timed out while importing says so, names the module, and says what to do (import it at module
level or in ``setup()``, which a worker does before it takes a trial): a worker started to replace
a timed-out one imported Lightning again inside its first trial, which timed out in turn."""

from __future__ import annotations

from pathlib import Path

import trial27b_trainables as t27

from tripwire.tune import Continuous, RandomSearch, Tuner
from tripwire.tune._errors import error_summary

#: A worker's faulthandler dump while ``train`` imports a framework (trial 27b's, shortened).
STACK = """\
Current thread 0x00007f183afbdb80 (most recent call first):
  File "<frozen importlib._bootstrap>", line 1122 in _find_and_load_unlocked
  File "<frozen importlib._bootstrap>", line 1176 in _find_and_load
  File "/venv/lib/python3.11/site-packages/torch/distributed/fsdp/_common_utils.py", line 21 in <module>
  File "<frozen importlib._bootstrap>", line 241 in _call_with_frames_removed
  File "<frozen importlib._bootstrap>", line 1176 in _find_and_load
  File "/venv/lib/python3.11/site-packages/lightning/__init__.py", line 18 in <module>
  File "<frozen importlib._bootstrap>", line 1176 in _find_and_load
  File "/jobs/digits_tune.py", line 27 in train
"""


def test_the_hint_names_the_module_being_imported_and_the_fix() -> None:
    from tripwire.tune._errors import import_hint

    hint = import_hint(STACK)
    assert hint == ("; it was importing a module (/venv/lib/python3.11/site-packages/lightning/__init__.py): "
                    "trial_timeout counts the imports done inside train, and a worker started to replace a "
                    "timed-out one imports them again in its first trial; import the framework at the module level "
                    "of train's module, or in setup(): a worker does those before it takes a trial, outside any "
                    "trial's time")
    assert import_hint(None) == "" and import_hint('  File "/jobs/x.py", line 3 in train\n') == ""
    # (a Dask task's stack, traceback style)
    assert "(/venv/m.py)" in import_hint('  File "<frozen importlib._bootstrap>", line 1, in _find_and_load\n'
                                         '  File "/venv/m.py", line 2, in <module>\n')


def test_a_local_trial_timed_out_inside_an_import_says_so(tmp_path: Path) -> None:
    result = Tuner(t27.train_imports_slowly, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(1), max_jobs=1,
                   seed=0, journal=str(tmp_path / "j.db"), trial_timeout=2, fail_fast=False).fit()
    t = result.trials[0]
    assert (t.status, t.reason) == ("failed", "failed (timeout)")
    line = error_summary(t.error)
    assert line.startswith("trial 0 ran past trial_timeout=2 s; its worker (pid ")
    assert "was killed; it was importing a module (" in line and "trial27b_slow_import.py): trial_timeout counts " \
        "the imports done inside train" in line, line

"""Trial 33eta F3 (left over from trial 33f M3/M5): the Keras TripwireCallback passed ``write=`` and
``keep_arrays=`` on to the Session without checking them in its constructor (``keep_arrays=0``,
``keep_arrays='many'``, ``write='yes'`` were taken until ``model.fit`` made the session), and its
"accepted:" list of keywords left them out (``keep_array=`` had no "did you mean"). The constructor
checks them now with the Session's own check (``tripwire._session.check_write_and_keep_arrays``) and
lists them as accepted."""
from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import numpy as np
import pytest

keras = pytest.importorskip("keras")

import tripwire
from tripwire import ConfigError, Session
from tripwire.integrations.keras import TripwireCallback


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"keep_arrays": 0}, r"^keep_arrays: got 0; accepted: an integer >= 1 or null$"),
    ({"keep_arrays": "many"}, r"^keep_arrays: got 'many'; accepted: an integer >= 1 or null$"),
    ({"keep_arrays": True}, r"^keep_arrays: got True; accepted: an integer >= 1 or null$"),
    ({"write": "yes"}, r"^write: got 'yes' \(str\); accepted: True or False, or None"),
    ({"write": 1}, r"^write: got 1 \(int\); accepted: True or False, or None"),
])
def test_bad_write_or_keep_arrays_refused_by_constructor_as_session_refuses_them(tmp_path, kwargs, match):
    with pytest.raises(ConfigError, match=match) as info:
        TripwireCallback(out_dir=str(tmp_path / "run"), **kwargs)
    assert isinstance(info.value, ValueError)
    assert not (tmp_path / "run").exists()  # nothing claimed
    with pytest.raises(ConfigError, match=match):  # (the same words as the Session's)
        Session(out_dir=str(tmp_path / "session"), **kwargs)


@pytest.mark.parametrize(("given", "expected"), [("keep_array", "keep_arrays"), ("writ", "write")])
def test_misspelt_keyword_lists_write_and_keep_arrays(tmp_path, given, expected):
    with pytest.raises(ConfigError, match=rf"unknown argument '{given}'; did you mean '{expected}'\? \(accepted: "
                                          r"config, trial, trial_metric, rank, world_size, write, keep_arrays, "
                                          r"out_dir") as info:
        TripwireCallback(out_dir=str(tmp_path / "k"), **{given: 2})
    assert isinstance(info.value, TypeError)


def test_a_fit_takes_numpy_keep_arrays_and_write(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.random((32, 4), dtype=np.float32)
    y = (x.sum(1) > 2).astype("float32")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")])
    model.compile("sgd", "binary_crossentropy")
    cb = TripwireCallback(out_dir=str(tmp_path / "run"), keep_arrays=np.int64(1), write=True, save_interval=1,
                          collections={"weights": {"reductions": ["raw"]}})
    model.fit(x, y, epochs=2, batch_size=8, verbose=0, callbacks=[cb])
    assert cb.history._keep_arrays == 1 and type(cb.history._keep_arrays) is int
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete" and run.steps("train") == list(range(8))

"""Trial 33f M2: the Keras TripwireCallback took ``rank=`` and ``world_size=`` with any value
(``rank='abc'``, ``rank=-3``, ``world_size=0``, ``rank=True``, ``rank=5, world_size=2``) and refused
them only at ``model.fit``; neither was in its "accepted:" list of keywords. They are the worker of
a multi-worker fit (forwarded to the Session, as docs/keras.md says the overrides are): checked in
the constructor now, listed among the accepted keywords, and a fit writes that worker's shard."""
from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import numpy as np
import pytest

keras = pytest.importorskip("keras")

import tripwire
from tripwire import ConfigError
from tripwire.integrations.keras import TripwireCallback


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"rank": "abc"}, r"^rank: got 'abc'; accepted: an integer in \[0, 0\]"),
    ({"rank": -3}, r"^rank: got -3; accepted: an integer in \[0, 0\]"),
    ({"rank": True}, r"^rank: got True; accepted: an integer in \[0, 0\]"),
    ({"rank": 1}, r"^rank: got 1; accepted: an integer in \[0, 0\] \(world_size=1: .*give world_size= too"),
    ({"rank": 5, "world_size": 2}, r"^rank: got 5; accepted: an integer in \[0, 1\] \(world_size=2"),
    ({"world_size": 0}, r"^world_size: got 0; accepted: an integer >= 1"),
    ({"world_size": "2"}, r"^world_size: got '2'; accepted: an integer >= 1"),
])
def test_bad_rank_or_world_size_refused_by_constructor(tmp_path, kwargs, match):
    with pytest.raises(ConfigError, match=match) as info:
        TripwireCallback(out_dir=str(tmp_path / "run"), **kwargs)
    assert isinstance(info.value, ValueError)
    assert not (tmp_path / "run").exists()  # nothing claimed


def test_several_workers_need_out_dir_and_a_writing_rank(tmp_path):
    with pytest.raises(ConfigError, match=r"^out_dir: none given for rank 1 of a 2-worker fit .*accepted: the same "
                                          r"out_dir= \(or name=\) on every worker"):
        TripwireCallback(rank=1, world_size=2)
    with pytest.raises(ConfigError, match=r"^writer.ranks: got \[3\], but this fit has ranks 0 to 1 .*accepted: 'all' "
                                          r"or a list holding one of them"):
        TripwireCallback(out_dir=str(tmp_path / "w"), rank=0, world_size=2, writer={"ranks": [3]})


def test_misspelt_keyword_lists_rank_and_world_size(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown argument 'ranc'; did you mean 'rank'\? \(accepted: config, trial, "
                                          r"trial_metric, rank, world_size, write, keep_arrays, out_dir") as info:
        TripwireCallback(out_dir=str(tmp_path / "k"), ranc=1)
    assert isinstance(info.value, TypeError)


def test_fit_writes_the_given_workers_shard(tmp_path):
    out = tmp_path / "run"
    rng = np.random.default_rng(0)
    x = rng.random((32, 4), dtype=np.float32)
    y = (x.sum(1) > 2).astype("float32")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")])
    model.compile("sgd", "binary_crossentropy")
    cb = TripwireCallback(out_dir=str(out), rank=np.int64(1), world_size=2.0, save_interval=1)
    model.fit(x, y, epochs=1, batch_size=16, verbose=0, callbacks=[cb])
    assert cb.session.rank == 1 and type(cb.session.rank) is int and cb.session.world_size == 2
    run = tripwire.open_run(out)
    assert run.workers == [1] and run.world_size == 2
    assert run.steps("train", worker=1) == [0, 1]

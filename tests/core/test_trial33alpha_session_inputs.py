"""Trial 33 (fixer alpha): what a Session takes, refused where it is given (F1-F4)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire import ConfigError, Session, load_config
from tripwire._session import check_config

# ------------------------------------------------------------------ F1: a ragged nested list at add()


def test_ragged_list_refused_at_add_naming_the_tensor_and_the_step_keeps_its_loss(tmp_path: Path) -> None:
    out = tmp_path / "run"
    s = Session(out_dir=str(out), collections={"losses": {"save": {"interval": 1}}, "metrics": None})
    for step in range(3):
        p = s.begin_step("train", step)
        p.add("loss", 0.5 + step, "losses")
        if step == 0:
            with pytest.raises(ConfigError, match=r"add\('logits'\): got a ragged list of 2 \(item \[1\] is a "
                                                  r"list of 2, item \[0\] a number\).*accepted"):
                p.add("logits", [1.0, [2.0, 3.0]], "losses")
            assert p.add("aux", [[1.0, 2.0], [3.0, 4.0]], "losses")  # (a rectangular nested list is taken)
        s.end_step()
    s.close()
    run = tripwire.open_run(str(out))
    assert list(run.tensor("loss").steps()) == [0, 1, 2]  # (step 0's loss was lost)
    assert "logits" not in run.tensor_names()
    assert list(run.tensor("aux").steps()) == [0]


def test_ragged_list_deeper_names_where_it_differs() -> None:
    s = Session(write=False, collections={"losses": {"save": {"interval": 1}}})
    p = s.begin_step("train", 0)
    with pytest.raises(ConfigError, match=r"add\('x'\): got a ragged tuple of 2 \(item \[1\]\[1\] is a list of 1, "
                                          r"item \[1\]\[0\] a list of 2\)"):
        p.add("x", ([[1, 2], [3, 4]], [[1, 2], [3]]), "losses")
    with pytest.raises(ConfigError, match=r"ragged list of 2 \(item \[1\] is a list of 1, item \[0\] a list of 2\)"):
        p.add("y", [[1.0, 2.0], [3.0]], "losses")
    s.end_step()
    s.close()


# ------------------------------------------------------------------ F2: keep_arrays


@pytest.mark.parametrize("bad", ["many", -1, 0, True, 2.5])
def test_keep_arrays_checked_in_the_constructor(bad: object) -> None:
    with pytest.raises(ConfigError, match=rf"keep_arrays: got {bad!r}; accepted: an integer >= 1 or null"):
        Session(write=False, keep_arrays=bad)


def test_keep_arrays_none_and_int_taken_and_bound_the_history() -> None:
    s = Session(write=False, keep_arrays=1, save_interval=1,
                collections={"mine": {"include": ["w"], "reductions": ["raw"]}, "losses": None})
    for step in range(3):
        p = s.begin_step("train", step)
        p.add("w", [1.0 * step, 2.0], "weights")
        s.end_step()
    assert len(s.history._arrays[("w", "raw", "train", 0)]) == 1
    s.close()
    Session(write=False, keep_arrays=None).close()


# ------------------------------------------------------------------ F3: provides


def test_provides_misspelled_kind_refused_with_did_you_mean() -> None:
    with pytest.raises(ConfigError, match=r"provides\[0\]: got 'gradeints'; did you mean 'gradients'\?; accepted: .*"
                                          r"activation_inputs, activations"):
        Session(write=False, provides=["gradeints"])
    with pytest.raises(ConfigError, match=r"provides\[1\]: got 'gradeints'; did you mean 'gradients'"):
        check_config(load_config(None), framework="fake", provides=("weights", "gradeints"))


def test_provides_not_a_string_refused_as_config_error() -> None:
    with pytest.raises(ConfigError, match=r"provides\[0\]: got 5 \(int\); accepted: the kinds"):
        Session(write=False, provides=[5])
    with pytest.raises(ConfigError, match=r"provides: got 5 \(int\); accepted: None"):
        Session(write=False, provides=5)


def test_provides_bare_string_is_a_list_of_one() -> None:
    s = Session(write=False, provides="gradients")
    assert s.provides == ["gradients"]
    s.close()
    with pytest.raises(ConfigError, match=r"provides: got 'gradeints'; did you mean 'gradients'"):
        Session(write=False, provides="gradeints")
    # (the string is one kind, as a list of one: a rule needing weights is refused, as with ["gradients"])
    with pytest.raises(ConfigError, match=r"tensor_variance needs 'weights'"):
        Session(write=False, rules=["tensor_variance"], framework="fake", provides="gradients")


# ------------------------------------------------------------------ F4: write


@pytest.mark.parametrize("bad", ["yes", 1, 0, np.int64(1)])
def test_write_must_be_a_bool_or_none(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"write: got .*; accepted: True or False, or None"):
        Session(write=bad)


def test_write_false_and_none_taken(tmp_path: Path) -> None:
    s = Session(write=False)
    assert s.writer is None
    s.close()
    s = Session(write=np.False_)  # numpy's bool is a bool (trial 33i F1: np.True_ was refused as 'bool')
    assert s.writer is None
    s.close()
    s = Session(out_dir=str(tmp_path / "r"), write=None)
    assert s.writer is not None
    s.close()

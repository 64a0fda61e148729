"""Trial 24f: every public argument given a wrong value (core: configs, session, step API, readers)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire import Collection, ConfigError, ReductionConfig, SaveConfig, Session, TensorNotFoundError


def _reduction() -> ReductionConfig:
    return ReductionConfig(reductions=["l2"])


# ----------------------------------------------------------------------------- Collection(save=)
def test_collection_save_mapping_is_checked_as_the_yaml_with_its_key_path() -> None:
    # finding 1: save={"interval": 0} was taken, then Session raised AttributeError ('dict' ... 'for_mode')
    with pytest.raises(ConfigError, match=r"^collections\.mine\.save\.interval: got 0; accepted: an integer >= 1"):
        Collection("mine", include=["fc"], reduction=_reduction(), save={"interval": 0})
    with pytest.raises(ConfigError, match=r"^collections\.mine\.save\.intervl: unknown key 'intervl'; did you mean "
                                          r"'interval'\?"):
        Collection("mine", include=["fc"], reduction=_reduction(), save={"intervl": 3})


@pytest.mark.parametrize("save", [5, "every 5", [5]])
def test_collection_save_of_another_type_names_save_and_the_accepted_forms(save: object) -> None:
    with pytest.raises(ConfigError, match=r"^collections\.mine\.save: got .*; accepted: None \(the run's save\), a "
                                          r"tripwire\.SaveConfig or a mapping of its keys \(interval, "):
        Collection("mine", include=["fc"], reduction=_reduction(), save=save)


def test_collection_save_mapping_becomes_a_saveconfig_that_follows_the_runs_save(tmp_path: Path) -> None:
    c = Collection("mine", include=["fc"], reduction=_reduction(), save={"interval": 3})
    assert c.save == SaveConfig(interval=3)
    # in a run, what the mapping does not state comes from the top-level save, as in YAML
    with Session(out_dir=str(tmp_path), collections=[c], save={"modes": {"predict": {"enabled": False}}}) as s:
        mine = s.config.collections["mine"]
        assert mine.save is not None and mine.save.interval == 3
        assert not mine.save.for_mode("predict").enabled
        assert mine in s.due_collections("train", 3)
        assert mine not in s.due_collections("train", 4)


# --------------------------------------------------------------------------------- Session(...)
@pytest.mark.parametrize("backend", ["torhc", "torch", 5])
def test_session_backend_is_checked_at_construction(tmp_path: Path, backend: object) -> None:
    # finding 2: taken, then the first save step failed ('str' object has no attribute 'reduce')
    with pytest.raises(ConfigError, match=r"^backend: got .*; accepted: None \(numpy, or torch's at the first torch "
                                          r"tensor\), or a tripwire\.ReductionBackend object"):
        Session(out_dir=str(tmp_path), backend=backend)


def test_session_backend_object_is_taken(tmp_path: Path) -> None:
    with Session(out_dir=str(tmp_path), backend=tripwire.NumpyBackend()) as s:
        s.step("train", 0, {"loss": (1.0, "losses")})


@pytest.mark.parametrize("framework", [5, "", "pytorch", "torch"])
def test_session_framework_is_checked(tmp_path: Path, framework: object) -> None:
    # finding 7: framework=5 and "pytorch" were taken
    with pytest.raises(ConfigError, match=r"^framework: got .*accepted: 'python' \(the default"):
        Session(out_dir=str(tmp_path), framework=framework)


@pytest.mark.parametrize("kw", [{"out_dir": ""}, {"name": ""}, {"name": "  "}])
def test_empty_out_dir_and_name_are_refused(kw: dict[str, str]) -> None:
    # finding 7: out_dir="" fell back to a new timestamped directory, name="" was taken
    key = next(iter(kw))
    with pytest.raises(ConfigError, match=rf"^{key}: got '\s*'; accepted: .*or None"):
        tripwire.load_config(**kw)


# ---------------------------------------------------------------------------------- numpy ints
def test_numpy_integers_are_integers_wherever_an_integer_is(tmp_path: Path) -> None:
    # finding 4: one check (check_int) refused np.int64 where SaveConfig(interval=np.int64(5)) took it
    with Session(out_dir=str(tmp_path), save_interval=np.int64(5), save_steps=np.array([1, 2]),
                 rank=np.int64(0), world_size=np.int64(1)) as s:
        assert s.config.save.interval == 5 and type(s.config.save.interval) is int
        assert s.config.save.steps == (1, 2)
        assert s.rank == 0 and type(s.rank) is int and type(s.world_size) is int
    red = ReductionConfig(reductions=["histogram"], histogram_bins=np.int64(5), histogram_range=(np.float32(0), 1))
    assert red.histogram_bins == 5 and type(red.histogram_bins) is int
    assert tripwire.WriterConfig(queue_size=np.int64(8), ranks=[np.int64(0)]).queue_size == 8
    with pytest.raises(ConfigError, match=r"^save_interval: got np\.True_; accepted: an integer >= 1"):
        tripwire.load_config(save_interval=np.bool_(True))


# ---------------------------------------------------------------------------- ReductionConfig
def test_reductionconfig_arguments_are_checked_as_the_yaml() -> None:
    # finding 5
    with pytest.raises(ConfigError, match=r"^reductions: got None; accepted: a string or a list of strings$"):
        ReductionConfig(reductions=None)  # type: ignore[arg-type]
    assert ReductionConfig(reductions="l2").reductions == ("l2",)  # type: ignore[arg-type]  # (a list of one)
    assert ReductionConfig(reductions="raw").raw is True  # type: ignore[arg-type]
    for key in ("raw", "histogram"):
        for value in ("yes", 1, None):
            with pytest.raises(ConfigError, match=rf"^{key}: got {value!r}; accepted: true or false$"):
                ReductionConfig(reductions=["l2"], **{key: value})


# -------------------------------------------------------------------------------- Collection
def test_collection_with_an_empty_include_is_refused() -> None:
    # finding 7: Collection("mine", include=[]) matched nothing and was taken
    with pytest.raises(ConfigError, match=r"^collections\.mine\.include: got \[\]: the collection would match no "
                                          r"tensor"):
        Collection("mine", include=[], reduction=_reduction())
    with pytest.raises(ConfigError, match=r"^collections\.mine\.include: got \[\]"):
        tripwire.load_config({"collections": {"mine": {"include": [], "reductions": ["l2"]}}})


# ------------------------------------------------------------------------------------ step API
def test_wants_and_keeps_name_a_misspelled_kind(tmp_path: Path) -> None:
    # finding 3: wants('gradeints') and keeps('loss') were a silent False
    with Session(out_dir=str(tmp_path), include_collections=["gradients"]) as s:
        plan = s.begin_step("train", 0)
        with pytest.raises(ConfigError, match=r"^wants: kind='gradeints'; did you mean 'gradients'\?; accepted: "):
            plan.wants("gradeints")
        with pytest.raises(ConfigError, match=r"^keeps: kind='loss'; did you mean 'losses'\?; accepted: "):
            plan.keeps("loss")
        with pytest.raises(ConfigError, match=r"^add_many: kind='los'; did you mean 'losses'\?"):
            plan.add_many({"loss": 1.0}, "los")
        with pytest.raises(ConfigError, match=r"^wants: kind=\['gradients'\]; .*accepted: "):
            plan.wants(["gradients"])  # type: ignore[arg-type]
        assert plan.wants("gradients") and not plan.wants("weights") and plan.keeps("losses")
        s.end_step()
        quiet = s.begin_step("train", 1)  # (nothing due: still checked)
        assert not quiet.wants("gradients")
        with pytest.raises(ConfigError, match=r"^wants: kind='gradeints'"):
            quiet.wants("gradeints")
        s.end_step()


def test_step_api_arguments(tmp_path: Path) -> None:
    # finding 7/8: summary="yes", an empty tensor name and a list for session.step were taken or bare errors
    with Session(out_dir=str(tmp_path)) as s:
        with pytest.raises(ConfigError, match=r"^begin_step: summary='yes'; accepted: True or False$"):
            s.begin_step("train", 0, summary="yes")  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match=r"^step: tensors=\[\('loss', 1\.0, 'losses'\)\] \(list\); accepted: a "
                                              r"mapping of names to \(tensor, kind\) pairs"):
            s.step("train", 0, [("loss", 1.0, "losses")])  # type: ignore[arg-type]
        plan = s.begin_step("train", 0)
        with pytest.raises(ConfigError, match=r"^add: name=''; accepted: a non-empty tensor name"):
            plan.add("", 1.0, "losses")
        s.end_step()


# ------------------------------------------------------------------------------------- readers
@pytest.fixture()
def run(tmp_path: Path) -> tripwire.Run:
    with Session(out_dir=str(tmp_path)) as s:
        for i in range(3):
            s.step("train", i, {"loss": (float(i), "losses")})
    return tripwire.open_run(tmp_path)


def test_latest_and_value_name_a_reduction_that_is_not_stored_by_any_name(run: tripwire.Run) -> None:
    # finding 8: latest("loss", "raww") was None, so a rule reading it never fired
    with pytest.raises(TensorNotFoundError, match=r"^tensor 'loss' has no reduction 'raww'; did you mean 'raw'\?; "
                                                  r"stored: raw"):
        run.latest("loss", "raww", "train")
    with pytest.raises(TensorNotFoundError, match=r"has no reduction 'raww'"):
        run.value("loss", "raww", 1, "train")
    # a tensor the run does not hold raises, as run.series does (trial 32a F1: a misspelled name was None) ...
    with pytest.raises(TensorNotFoundError, match=r"^tensor 'val_acc' not in this run"):
        run.latest("val_acc", "raw", "eval")
    # ... where the history rules read has None for a tensor not captured yet (metrics before they come)
    history = tripwire.History()
    history.add_step("train", 0, 0, 0.0, [("loss", ("raw",))], np.zeros(1))
    assert history.latest("val_acc", "raw", "eval") is None and history.value("val_acc", "l2", 1, "eval") is None
    # ... and a reduction the tensor does not hold (another collection's, maybe later)
    assert run.latest("loss", "l2", "train") is None and run.latest("loss", "fraction_gt:0.5", "train") is None
    # but no name of a reduction at all is named there too
    with pytest.raises(TensorNotFoundError, match=r"^reduction: got 'raww'; did you mean 'raw'\?; no reduction has "
                                                  r"that name \(accepted: raw, min, "):
        history.latest("val_acc", "raww", "eval")
    assert run.latest("loss", "raw", "train") == (2, 2.0) and run.value("loss", "raw", np.int64(1), "train") == 1.0


@pytest.mark.parametrize("step", [3.5, "1", None, True])
def test_value_refuses_a_step_that_is_no_integer(run: tripwire.Run, step: object) -> None:
    with pytest.raises(ConfigError, match=r"^step: got .*; accepted: an integer"):
        run.value("loss", "raw", step, "train")  # type: ignore[arg-type]


@pytest.mark.parametrize("steps", [0, "0", [1.5], [True], {"a": 1}, np.zeros((2, 2), dtype=int)])
def test_train_steps_checks_its_steps(run: tripwire.Run, steps: object) -> None:
    # finding 8: train_steps("eval", 0) was a bare TypeError, "0" was read character by character
    with pytest.raises(ConfigError, match=r"^steps(\[0\])?: got .*; accepted: None \(every step of the mode\) or a "
                                          r"list of integers"):
        run.train_steps("eval", steps)  # type: ignore[arg-type]


def test_train_steps_takes_lists_ranges_and_integer_arrays(run: tripwire.Run) -> None:
    for steps in ([0, 2], range(0, 3, 2), np.array([0, 2]), (np.int64(0), 2)):
        assert run.train_steps("train", steps).tolist() == [0, 2]  # type: ignore[arg-type]

"""Trial 26c: ``tripwire watch`` checks its ``--config`` before it waits for the run.

F3: a watch started before the training (the live-watch workflow) took a config naming an unknown
rule, waited for the run, and refused the config only once the training had started writing (the
training then ran unwatched); with ``--timeout`` and no run the error was one WARNING line and the
exit status 3 ("nothing was judged"), not 2 as ``tripwire validate`` gives."""

from __future__ import annotations

import argparse
import logging
import sys
import textwrap
import time
from pathlib import Path

import pytest

import tripwire
from tripwire import ConfigError
from tripwire import _watch
from tripwire._watch import Watcher, watch


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tripwire")
    _watch.register(parser.add_subparsers())
    args = parser.parse_args(["watch", *argv])
    return args.func(args)


def test_unknown_rule_is_refused_before_waiting_for_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            caplog: pytest.LogCaptureFixture) -> None:
    bad = tmp_path / "bad_watch.yaml"
    bad.write_text("rules: [default, los_not_decreasing]\n")
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        # no run yet, and a --timeout far longer than the test: the config is refused at once
        rc = _cli([str(tmp_path / "not_yet"), "--config", str(bad), "--timeout", "30", "--interval", "0.1"])
    assert rc == 2
    assert time.monotonic() - started < 20
    err = capsys.readouterr().err
    assert "tripwire watch: error: rules[1]: unknown rule 'los_not_decreasing'; did you mean 'loss_not_decreasing'?" in err
    assert "waiting for it to appear" not in err and "--timeout" not in err
    # the error once, not also as load_config's WARNING ("... else the session refuses it")
    assert not [r for r in caplog.records if "is not a registered rule" in r.getMessage()]


def test_watch_api_refuses_a_bad_config_before_the_run_exists(tmp_path: Path) -> None:
    missing = tmp_path / "not_yet"
    with pytest.raises(ConfigError, match=r"rules\[1\]: unknown rule 'los_not_decreasing'; did you mean "
                                          r"'loss_not_decreasing'\?"):
        Watcher(missing, {"rules": ["default", "los_not_decreasing"]})
    with pytest.raises(ConfigError, match=r"rules\[0\]: unknown rule 'los_not_decreasing'"):
        watch(missing, {"rules": ["los_not_decreasing"]}, timeout=30)
    # a module:attribute rule that cannot be imported
    with pytest.raises(ConfigError, match=r"rules\[0\]: cannot import module 'no_such_team_module' for "
                                          r"'no_such_team_module:LossSpike'"):
        Watcher(missing, {"rules": ["no_such_team_module:LossSpike"]})
    # actions: a top-level one, and a rule's own
    with pytest.raises(ConfigError, match=r"actions\[1\]: cannot load action 'no_such_team_module:page'"):
        Watcher(missing, {"rules": ["default"], "actions": ["log", "no_such_team_module:page"]})
    with pytest.raises(ConfigError, match=r"rules\[0\]\.actions\[0\]: cannot load action 'no_such_team_module:page'"):
        Watcher(missing, {"rules": [{"name": "overfit", "actions": ["no_such_team_module:page"]}]})
    assert not missing.exists()


def test_custom_rule_parameters_checked_before_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "teamrules26c.py").write_text(textwrap.dedent("""
        from tripwire.rules import Rule, check_float

        class Spike(Rule):
            name = "spike26c"

            def __init__(self, factor: float = 3.0, **common):
                super().__init__(**common)
                self.factor = check_float(factor, "spike26c.factor", minimum=1)

            def check(self, history, step, mode):
                return None
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=r"rules\[0\]: .*spike26c\.factor: got 0\.5"):
        Watcher(tmp_path / "not_yet", {"rules": [{"name": "teamrules26c:Spike", "factor": 0.5}]})
    sys.modules.pop("teamrules26c", None)


def test_a_rule_its_module_registers_is_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              caplog: pytest.LogCaptureFixture) -> None:
    """A name registered by a ``module:attribute`` entry's module is taken, with no WARNING (the
    build after loading is what decides)."""
    (tmp_path / "teamrules26c_reg.py").write_text(textwrap.dedent("""
        from tripwire.rules import Rule, register_rule

        @register_rule
        class LossSpike(Rule):
            name = "overfitt"

            def check(self, history, step, mode):
                return None

        def quiet(history, step, mode):
            return None
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        w = Watcher(tmp_path / "not_yet", {"rules": ["overfitt", "teamrules26c_reg:quiet"]})
    assert w.config is not None and len(w.config.rules) == 2
    assert not [r for r in caplog.records if "is not a registered rule" in r.getMessage()]
    sys.modules.pop("teamrules26c_reg", None)


def test_a_good_config_still_waits_and_watches(tmp_path: Path) -> None:
    out = tmp_path / "run"
    w = Watcher(out, {"rules": ["loss_not_decreasing"]}, echo=lambda f: None)
    assert w.watch(interval=0.05, timeout=0.1) == [] and w.timed_out and w.run is None
    with tripwire.Session(out_dir=str(out), save_interval=1, rules=[]) as s:
        for i in range(300):
            s.step("train", i, {"loss": (1.0, "losses")})
    found = w.watch(interval=0.05, timeout=30)
    assert [f.rule for f in found] == ["loss_not_decreasing"]

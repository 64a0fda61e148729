"""Trial 33b F2, F3: "did you mean" offers the closest collection name; config.md's Keras names."""
from __future__ import annotations

from pathlib import Path

import pytest

import tripwire
from tripwire import ConfigError
from tripwire._config import BUILTIN_COLLECTIONS
from tripwire._validate import did_you_mean

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize("name", sorted(BUILTIN_COLLECTIONS))
def test_a_built_in_collection_one_letter_short_is_offered_that_collection(name: str) -> None:
    # (trial 33b F2: 'activation' was offered activation_inputs, which continues it, not activations)
    assert did_you_mean(name[:-1], BUILTIN_COLLECTIONS) == f"; did you mean {name!r}?"


def test_activation_gets_activations_from_the_config_and_a_callback() -> None:
    with pytest.raises(ConfigError, match=r"collections\.activation: unknown built-in collection; did you mean "
                                          r"'activations'\?"):
        tripwire.load_config({"collections": {"activation": None}})
    with pytest.raises(ConfigError, match=r"'activation'.*did you mean 'activations'\?"):
        tripwire.load_config({"collections": ["activation"]})
    pytest.importorskip("lightning")
    from tripwire.integrations.lightning import TripwireCallback

    with pytest.raises(ConfigError, match=r"include_collections\[0\]: got 'activation', no built-in collection; "
                                          r"did you mean 'activations'\?"):
        TripwireCallback(include_collections=["activation"])


def test_the_closest_name_comes_before_a_continuation_and_a_look_alike() -> None:
    assert did_you_mean("activation_input", BUILTIN_COLLECTIONS) == "; did you mean 'activation_inputs'?"
    assert did_you_mean("gradeints", ["gradients", "gradeints_norm/x"]) == "; did you mean 'gradients'?"  # swapped
    # a continuation still beats a look-alike that is no single edit away (Lightning's per-loader names)
    assert did_you_mean("val_loss", ["train_loss", "val_loss/dataloader_idx_0"]) == "; did you mean 'val_loss/dataloader_idx_0'?"


def test_config_md_gives_the_keras_names_of_activation_inputs_and_relu_outputs() -> None:
    # (trial 33b F3: the table said <layer>/input only; Keras names them relu1/relu/input, d1/relu/output)
    rows = {line.split("|")[1].strip(): line for line in (DOCS / "config.md").read_text().splitlines()
            if line.startswith("| `activation_inputs`") or line.startswith("| `relu_outputs`")}
    assert "`<layer>/<fn>/input`" in rows["`activation_inputs`"] and "keras.md#what-is-captured" in rows["`activation_inputs`"]
    assert "`<layer>/relu/output`" in rows["`relu_outputs`"]
    assert "## What is captured" in (DOCS / "keras.md").read_text()
    assert "`<layer>/<fn>/input`" in (DOCS / "keras.md").read_text()

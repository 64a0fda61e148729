"""Trial 30g F6: ``repr(Config)`` cut a 40-pattern include list in the middle of a name and hid the
settings of the collection that came after it (``reductions``, ``histogram_bins``)."""
from __future__ import annotations

from tripwire._config import load_config


def test_a_long_list_is_counted_and_the_settings_after_it_are_named() -> None:
    cfg = load_config({"collections": {"gradients": {"include": [f"layer{i}" for i in range(40)],
                                                     "reductions": ["l2", "histogram"], "histogram_bins": 64}},
                       "rules": ["default"]})
    assert repr(cfg) == ("Config(collections=[gradients(include=[layer0, layer1, layer2, layer3, layer4, layer5, ... "
                         "(34 more, 40 in all)], reductions=[l2, histogram], histogram_bins=64)], rules=[default])")

"""Run tags: one per (configuration, seed) whatever the length of the values, readable when they fit, and always
a valid ``experiment.run_tag`` (checked by the config itself)."""

from __future__ import annotations

import pytest

from utils.config import RUN_TAG_MAX, load_config
from utils.sweep.trial_runs import tag

LONG = {"model.args.backbone_args.widths": [8, 16] * 40, "optim.lr": 0.01}  # the widths alone pass the limit
MANY = {f"model.args.key_{i:02d}": i for i in range(40)}  # each part short, together too long
ODD = {"model.args.__x": "__", "data.args.path": "a/b c_é", "optim.name": "x" * 300}


def test_a_tag_that_fits_stays_readable():
    assert (
        tag(3, {"optim.lr": 0.01, "model.args.backbone_args.widths": [8, 16]}, 1) == "t003_widths=8-16_lr=0.01_seed=1"
    )


@pytest.mark.parametrize("params", [LONG, MANY, ODD], ids=["long-value", "many-keys", "odd-characters"])
def test_long_tags_are_unique_per_seed_and_configuration_and_pass_the_run_tag_check(params):
    seeds = [0, 1, 2, 2**32 - 1]
    tags = {tag(config_id, params, seed) for config_id in (0, 7) for seed in seeds}
    assert len(tags) == 2 * len(seeds), tags  # three seeds no longer collapse into one run
    for name in tags:
        assert len(name) <= RUN_TAG_MAX and name.startswith(("t000", "t007")), name
        assert name.endswith(tuple(f"_seed={seed}" for seed in seeds)), name
        assert load_config(None, [f"experiment.run_tag={name}"]).experiment.run_tag == name


def test_a_long_tag_keeps_the_parts_that_fit_and_hashes_every_value():
    other = dict(MANY, **{"model.args.key_39": -1})  # differs only in a part cut from the readable prefix
    first, second = tag(0, MANY, 0), tag(0, other, 0)
    assert first.startswith("t000_key_00=0_key_01=1_") and first != second
    assert first.rsplit("_", 2)[0] == second.rsplit("_", 2)[0]  # the same readable prefix, another hash

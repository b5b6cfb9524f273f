"""Run tags: one per (configuration, seed) whatever the length of the values, readable when they fit, and always
a valid ``experiment.run_tag`` (checked by the config itself)."""

from __future__ import annotations

import pytest

from utils.config.load import load_config
from utils.config.schema import RUN_TAG_MAX
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


def test_a_run_under_the_trials_tag_but_of_another_configuration_is_refused(tmp_path):
    """Another sweep of the experiment (or this one over another base config) gave a run the same tag: counting it
    for this trial would mix two configurations; an inert difference (where the run wrote) does not count."""
    from utils.commands.output_files import write_config
    from utils.errors import ConfigError
    from utils.sweep.driver import default_build
    from utils.sweep.trial_runs import same_configuration

    build = default_build(None, ["train.epochs=2", f"experiment.output_root={tmp_path}"])
    trial = build(["optim.lr=0.01", "seed=1"])
    folder = tmp_path / "run_001_t000_lr=0.01_seed=1"
    folder.mkdir()
    saved = load_config(None, ["train.epochs=2", "optim.lr=0.01", "seed=1", "experiment.run_tag=t000_lr=0.01_seed=1"])
    write_config(saved, folder / "config.yaml", "")
    same_configuration(folder, trial)  # the same (configuration, seed): counted
    other = load_config(None, ["train.epochs=3", "optim.lr=0.01", "seed=1", "experiment.output_root=/elsewhere"])
    write_config(other, folder / "config.yaml", "")
    with pytest.raises(
        ConfigError,
        match=r"has this trial's tag but was trained with another configuration \(train.epochs 3 -> 2; run -> trial\)",
    ):
        same_configuration(folder, trial)

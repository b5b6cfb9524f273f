import os
import re

import pytest
import yaml

from utils.config.load import load_config
from utils.config.schema import Config, save_config
from utils.errors import ConfigError
from utils.references import monitor_mode


def test_defaults_select_the_default_experiment():
    cfg = load_config()
    assert cfg.data.name == "digits" and cfg.model.name == "classifier"
    assert cfg.experiment.output_root == "output" and cfg.seed == 0


def test_yaml_then_overrides(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(
        yaml.safe_dump({"experiment": {"name": "x"}, "optim": {"lr": 0.5, "name": "sgd"}, "data": {"batch_size": 8}})
    )
    cfg = load_config(path, ["optim.lr=0.25", "train.epochs=3", "model.args.num_classes=5", "seed=7"])
    assert cfg.experiment.name == "x"
    assert cfg.optim.name == "sgd" and cfg.optim.lr == 0.25
    assert cfg.data.batch_size == 8 and cfg.train.epochs == 3 and cfg.seed == 7
    # overrides update one key of a dict field and keep the others
    assert cfg.model.args == {"backbone": "small_cnn", "num_classes": 5}
    # giving the whole dict replaces it
    assert load_config(overrides=["model.args={num_classes: 3}"]).model.args == {"num_classes": 3}
    with pytest.raises(ConfigError, match="'model.argz'; did you mean 'model.args'"):
        load_config(overrides=["model.argz.num_classes=3"])


def test_int_is_accepted_for_float_and_becomes_float():
    cfg = load_config(overrides=["optim.lr=1"])
    assert cfg.optim.lr == 1.0 and isinstance(cfg.optim.lr, float)


def test_unknown_key_names_the_closest_valid_key(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown config key 'optim.weight_decy'; did you mean 'optim.weight_decay'"):
        load_config(overrides=["optim.weight_decy=0.1"])
    with pytest.raises(ConfigError, match=r"unknown config key 'trian'; did you mean 'train'"):
        load_config(overrides=["trian.epochs=1"])
    path = tmp_path / "bad.yaml"
    path.write_text("data:\n  batch_sise: 3\n")
    with pytest.raises(ConfigError, match=r"'data.batch_sise'; did you mean 'data.batch_size'"):
        load_config(path)


@pytest.mark.parametrize(
    "override, error",
    [
        # was "did you mean 'train.iterations'": the key is top-level
        (
            "train.threads=1",
            "'train.threads'; did you mean 'threads'? ('threads' is a key of the top level, not of 'train')",
        ),
        ("train.thread=1", "'train.thread'; did you mean 'threads'? ('threads'"),  # a typo, in the wrong section too
        (
            "optim.warmup_epochs=2",
            "'optim.warmup_epochs'; did you mean 'schedule.warmup_epochs'? ('warmup_epochs' is a key of 'schedule', not of 'optim')",
        ),
        ("train.amp.opt_level=O1", "'train.amp'; did you mean 'amp.opt_level'?"),  # a section given under another
        ("train.name=x", "'train.name'; did you mean 'experiment.name' or 'data.name' or 'model.name' or "),
        ("train.epoch=3", "'train.epoch'; did you mean 'train.epochs'?"),  # a near miss in its own section
    ],
)
def test_an_unknown_key_is_looked_for_in_the_whole_key_tree(override, error):
    with pytest.raises(ConfigError) as raised:
        load_config(overrides=[override])
    assert str(raised.value).startswith(f"unknown config key {error}")


def test_wrong_type_names_key_and_expected_type():
    with pytest.raises(ConfigError, match=r"'train.epochs' must be an integer, got 'ten' \(str\)"):
        load_config(overrides=["train.epochs=ten"])
    with pytest.raises(ConfigError, match=r"'data.pin_memory' must be true or false, got 3"):
        load_config(overrides=["data.pin_memory=3"])


@pytest.mark.parametrize(
    "override, words",
    [
        ("train.ema=true", "a mapping (e.g. {decay: 0.9998}) or null, got True (bool)"),
        ("data.mean=[a]", "a list of numbers or null, got ['a'] (list)"),
        ("optim.betas=0.9", "a list of numbers, got 0.9 (float)"),
        ("train.compile=3", "true/false, a mapping (e.g. {mode: default, fullgraph: false}) or null, got 3 (int)"),
        ("schedule.step_epochs=[1.5]", "a list of integers, got [1.5] (list)"),
    ],
)
def test_a_type_error_says_what_the_key_takes_in_words(override, words):
    with pytest.raises(ConfigError, match=re.escape(f"config key '{override.split('=')[0]}' must be {words}")):
        load_config(overrides=[override])


def test_choices_and_ranges_are_checked():
    with pytest.raises(ConfigError, match=r"'amp.opt_level' must be one of .*did you mean 'O2'"):
        load_config(overrides=["amp.opt_level=o2"])
    with pytest.raises(ConfigError, match=r"'data.batch_size' must be >= 1"):
        load_config(overrides=["data.batch_size=0"])


def test_missing_file_and_malformed_override(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="key.sub=value"):
        load_config(overrides=["optim.lr"])


def test_saved_config_round_trips(tmp_path):
    cfg = load_config(overrides=["optim.lr=0.01", "experiment.name=rt", "loss=[{name: bce_with_logits, weight: 2.0}]"])
    save_config(cfg, tmp_path / "config.yaml")
    again = load_config(tmp_path / "config.yaml")
    assert again == cfg
    assert isinstance(again, Config)


def test_numbers_in_exponent_form_are_floats_on_the_command_line_and_in_yaml(tmp_path):
    cfg = load_config(
        overrides=[
            "optim.lr=1e-3",
            "optim.weight_decay=5e-4",
            "schedule.gamma=1E+2",
            "optim.betas=[9e-1, 0.999]",
            "amp.loss_scale=1e30",
        ]
    )
    assert (cfg.optim.lr, cfg.optim.weight_decay, cfg.schedule.gamma, cfg.optim.betas, cfg.amp.loss_scale) == (
        1e-3,
        5e-4,
        100.0,
        [0.9, 0.999],
        1e30,
    )
    assert all(
        isinstance(v, float) for v in (cfg.optim.lr, cfg.optim.weight_decay, cfg.schedule.gamma, cfg.amp.loss_scale)
    )
    path = tmp_path / "exp.yaml"
    path.write_text(
        "optim:\n  lr: 1e-3\n  weight_decay: 5E-4\nloss:\n  - {name: cross_entropy, weight: 5e-1, label_smoothing: 1e-1}\ndata:\n  mean: [5e-1]\n  std: [2.5e-1]\n"
    )
    cfg = load_config(path)
    assert (cfg.optim.lr, cfg.optim.weight_decay, cfg.data.mean, cfg.data.std) == (1e-3, 5e-4, [0.5], [0.25])
    assert cfg.loss == [{"name": "cross_entropy", "weight": 0.5, "label_smoothing": 0.1}]  # plugin arguments too
    assert load_config(overrides=["experiment.name=run1e3"]).experiment.name == "run1e3"  # a name stays a name
    saved = tmp_path / "saved.yaml"
    save_config(cfg, saved)
    assert load_config(saved).optim.lr == 1e-3


@pytest.mark.parametrize(
    "override, message",
    [
        ("train.log_every=0", r"'train.log_every' must be >= 1 \(log every N steps\), got 0"),
        ("optim.lr=-1e-3", r"'optim.lr' must be >= 0, got -0.001"),
        ("optim.momentum=1.5", r"'optim.momentum' must be in \[0, 1\), got 1.5"),
        ("optim.betas=[0.9]", r"'optim.betas' must be two numbers in \[0, 1\)"),
        ("data.eval_batch_size=0", r"'data.eval_batch_size' must be >= 1 or null, got 0"),
        ("data.num_workers=-1", r"'data.num_workers' must be >= 0"),
        ("train.keep_checkpoints=0", r"'train.keep_checkpoints' must be >= 1"),
        ("schedule.step_epochs=[60, 30]", r"'schedule.step_epochs' must be ascending epochs >= 0"),
        ("model.input_size=[3, 0, 8]", r"'model.input_size' must be one sample's shape, every size >= 1"),
        ("data.mean=[0.5, 0.5, 0.5]", r"'data.mean' and 'data.std' go together"),
        (
            "optim.name=adamww",
            r"'optim.name' must be one of \['sgd', 'adam', 'adamw'\], got 'adamww'; did you mean 'adamw'\?",
        ),
        (
            "custom_imports=[hook/my_hook.py]",
            r"custom_imports: 'hook/my_hook.py' is not a module path; .*\(e.g. hook.my_hook\)",
        ),
    ],
)
def test_every_range_and_cross_key_reference_is_checked_when_loading(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(overrides=[override])


def test_mean_and_std_agree_with_the_input_channels():
    with pytest.raises(
        ConfigError, match=r"'data.mean' has 3 value\(s\) but model.input_size=\[1, 8, 8\] has 1 channel"
    ):
        load_config(overrides=["data.mean=[0.5, 0.5, 0.5]", "data.std=[0.2, 0.2, 0.2]"])


def test_a_key_twice_in_a_yaml_file_is_an_error_naming_both_lines(tmp_path):
    path = tmp_path / "twice.yaml"
    path.write_text("optim:\n  lr: 0.1\ntrain:\n  epochs: 2\noptim:\n  name: sgd\n")
    with pytest.raises(
        ConfigError, match=r"config file '.*twice.yaml': key 'optim' appears twice in one mapping \(lines 1 and 5\)"
    ):
        load_config(path)
    with pytest.raises(ConfigError, match=r"key 'a' appears twice"):
        load_config(overrides=["model.args={a: 1, a: 2}"])


@pytest.mark.parametrize(
    "override, fixed",
    [
        ("model.args={num_classes:10}", "{num_classes: 10}"),
        ("hooks=[{name:confusion_matrix, enabled:false}]", "[{name: confusion_matrix, enabled: false}]"),
    ],
)
def test_a_flow_mapping_without_spaces_shows_the_corrected_form(override, fixed):
    with pytest.raises(ConfigError, match=re.escape(f"YAML needs a space after ':' in a mapping; write {fixed}")):
        load_config(overrides=[override])


@pytest.mark.parametrize(
    "override, message",
    [
        ("seed=4294967296", r"'seed' must be in \[0, 2\*\*32\)"),
        ("experiment.name=../..", r"'experiment.name' must be a plain folder name"),
        ("experiment.name=/tmp/elsewhere", r"'experiment.name' must be a plain folder name"),
        ("experiment.name=" + "x" * 201, r"'experiment.name' must be a plain folder name .*at most 200 bytes"),
        ("eval.monitor_mode=up", r"'eval.monitor_mode' must be one of \['max', 'min'\] or null, got 'up'"),
    ],
)
def test_values_that_would_silently_mean_something_else_are_refused(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(overrides=[override])


def test_paths_expand_the_home_folder():
    cfg = load_config(overrides=["data.root=~/data", "experiment.output_root=~/runs", "model.pretrained=~/w.pt"])
    home = os.path.expanduser("~")
    assert (cfg.data.root, cfg.experiment.output_root, cfg.model.pretrained) == (
        f"{home}/data",
        f"{home}/runs",
        f"{home}/w.pt",
    )


def test_the_monitor_direction_comes_from_the_metric_and_a_contradiction_is_a_warning(caplog):
    assert monitor_mode("classification", "loss", None) == "min"
    assert monitor_mode("classification", "top1", None) == "max"
    assert monitor_mode("sod", "mae", None) == "min" and monitor_mode("sod", "max_f", None) == "max"
    assert monitor_mode("video", "video_top1", None) == "max"
    assert monitor_mode("classification", "loss", "max") == "max"
    assert "eval.monitor_mode=max, but a lower loss is better" in caplog.text


def test_an_experiment_without_a_name_is_named_after_its_config_file_or_its_data_and_network(tmp_path):
    """Every experiment without experiment.name landed in digits_small_cnn/, the default name."""
    (tmp_path / "my_resnet.yaml").write_text("model: {args: {backbone: resnet18}}\n")
    (tmp_path / "named.yaml").write_text("experiment: {name: mine}\n")
    assert load_config(tmp_path / "my_resnet.yaml").experiment.name == "my_resnet"
    assert load_config(tmp_path / "named.yaml").experiment.name == "mine"  # a name given wins
    assert load_config().experiment.name == "digits_small_cnn"  # the quick start's, as before
    assert load_config(overrides=["model.args.backbone=resnet18"]).experiment.name == "digits_resnet18"
    assert load_config(overrides=["model.args={num_classes: 3}"]).experiment.name == "digits_classifier"
    assert load_config(overrides=["experiment.name=null"]).experiment.name == "digits_small_cnn"

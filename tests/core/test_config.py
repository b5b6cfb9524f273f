import pytest
import yaml

from utils.config import Config, load_config, save_config
from utils.errors import ConfigError


def test_defaults_select_the_default_experiment():
    cfg = load_config()
    assert cfg.data.name == "digits" and cfg.model.name == "classifier"
    assert cfg.experiment.output_root == "output" and cfg.seed == 0


def test_yaml_then_overrides(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({"experiment": {"name": "x"}, "optim": {"lr": 0.5, "name": "sgd"}, "data": {"batch_size": 8}}))
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


def test_wrong_type_names_key_and_expected_type():
    with pytest.raises(ConfigError, match=r"'train.epochs' must be int, got 'ten'"):
        load_config(overrides=["train.epochs=ten"])
    with pytest.raises(ConfigError, match=r"'data.pin_memory' must be bool"):
        load_config(overrides=["data.pin_memory=3"])


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

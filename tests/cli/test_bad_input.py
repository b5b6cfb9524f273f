"""Bad input gets one ``error:`` line naming the problem and the fix, exit code 2, no traceback: config keys and
values, the names they refer to (networks, losses, hooks, custom_imports, metrics, timm models) and the config file
itself, each checked before any data is read unless the case says otherwise.

Each case is a row of the README's "Reliability" table. (Bad data: tests/cli/test_bad_data.py; bad checkpoints
and resumes: tests/cli/test_bad_checkpoints.py.)
"""

from __future__ import annotations

from typing import Dict, List

import pytest
import torch

import main
from tests.conftest import fast_overrides
from tests.fixtures.bad_input import exits_2_with_one_error_line, rgb_folder

# name -> (arguments given the tmp folder, expected message)
CASES: Dict[str, tuple] = {
    "unknown network": (
        lambda tmp: ["model.name=resnet_typo"],
        r"unknown network 'resnet_typo'; known: (.*, )?classifier \(Classifier\), .*minet \(MINet\)",
    ),
    "unknown loss": (lambda tmp: ["loss=[{name: focal_typo}]"], r"unknown loss 'focal_typo'; known: .*cross_entropy"),
    "unknown config key": (
        lambda tmp: ["train.epoch=3"],
        r"unknown config key 'train.epoch'; did you mean 'train.epochs'\?",
    ),
    "wrong value type": (
        lambda tmp: ["train.epochs=three"],
        r"config key 'train.epochs' must be an integer, got 'three' \(str\)",
    ),
    "unknown hook argument": (
        lambda tmp: ["hooks=[{name: saliency_grid, imagez: 4}]"],
        r"hook 'saliency_grid' got unknown argument\(s\) \['imagez'\]; it takes: images, size, splits",
    ),
    "hook switch not a bool": (
        lambda tmp: ["hooks=[{name: confusion_matrix, enabled: maybe}]"],
        r"config key 'hooks\[0\].enabled' must be true or false, got 'maybe'",
    ),
    "bad profiler schedule": (
        lambda tmp: ["train.profile={wait: 1}"],
        r"config key 'train.profile' must look like \{wait: 1, warmup: 1, active: 5\} \(wait, warmup >= 0, active >= 1\), got \{'wait': 1\}",
    ),
    "an output root that cannot be created": (
        lambda tmp: ["experiment.output_root=/proc/regtrain_out", "experiment.name=bad"],
        r"cannot create a run folder in '/proc/regtrain_out/bad' \(.*\); set experiment.output_root to a writable folder",
    ),
    "train.log_every=0 (before any data is read)": (
        lambda tmp: ["train.log_every=0", *rgb_folder(tmp / "nowhere")],
        r"config key 'train.log_every' must be >= 1 \(log every N steps\), got 0",
    ),
    "misspelt eval.monitor (before any data is read)": (
        lambda tmp: ["eval.monitor=top_1", *rgb_folder(tmp / "nowhere")],
        r"config key 'eval.monitor' is 'top_1', but metric 'classification' reports \['top1', 'top5', 'loss'\]; did you mean 'top1'\?",
    ),
    "unknown network argument (before any data is read)": (
        lambda tmp: [*rgb_folder(tmp / "nowhere"), "model.args.widht=3"],
        r"network 'classifier' got unknown argument\(s\) \['widht'\]; it takes: num_classes, backbone",
    ),
    "custom_imports module missing": (
        lambda tmp: ["custom_imports=[my_project.no_such_module]"],
        r"custom_imports: no module named 'my_project.no_such_module'; give an importable module path",
    ),
    "custom_imports module that does not import": (
        lambda tmp: ["custom_imports=[tests.fixtures.broken_import]"],
        r"custom_imports: module 'tests.fixtures.broken_import' does not import at .*broken_import.py:3: No module named 'regtrain_missing_dependency'; install the missing package or fix that import",
    ),
    "custom_imports given as a file": (
        lambda tmp: ["custom_imports=[hook/my_hook.py]"],
        r"custom_imports: 'hook/my_hook.py' is not a module path; give the module as you would import it \(e.g. hook.my_hook\)",
    ),
    "device=cuda without CUDA": (
        lambda tmp: _without_cuda(["device=cuda"]),
        r"device=cuda needs a CUDA device, but CUDA is not available here; use device=cpu or device=auto",
    ),
    "train.compile with DataParallel": (
        lambda tmp: ["train.compile=true", "dist.mode=dp"],
        r"train.compile does not work with dist.mode=dp \(.*\); use dist.mode=ddp under torchrun, or turn train.compile off",
    ),
    "lr_scaling with a global batch": (
        lambda tmp: ["data.global_batch_size=64", "optim.lr_scaling=linear"],
        r"config key 'optim.lr_scaling' is linear, which scales the LR with the world size, but data.global_batch_size keeps the global batch the same at every world size; set optim.lr_scaling=none",
    ),
    # every value checked where it enters (before any data is read, unless the case says otherwise)
    "negative lr_mult": (
        lambda tmp: ["optim.param_groups=[{pattern: 'head.*', lr_mult: -1}]"],
        r"^error: config key 'optim.param_groups\[0\].lr_mult' must be a finite number >= 0, got -1$",
    ),
    "infinite float key": (
        lambda tmp: ["schedule.warmup_epochs=.inf"],
        r"^error: config key 'schedule.warmup_epochs' must be a finite number, got inf$",
    ),
    "warm-up longer than the run": (
        lambda tmp: ["schedule.warmup_epochs=5"],
        r"^error: config key 'schedule.warmup_epochs' is 5 but train.epochs is 1: the warm-up would outlast the run, so the LR would peak at its last step; set schedule.warmup_epochs to at most 1",
    ),
    "a float where an int is meant": (
        lambda tmp: ["model.args.num_classes=1e1"],
        r"^error: config key 'model.args.num_classes' must be an integer >= 1 \(an argument of network 'classifier'\), got 10.0 \(float\)$",
    ),
    "a negative class count": (
        lambda tmp: ["model.args.num_classes=-3"],
        r"^error: config key 'model.args.num_classes' must be an integer >= 1 \(an argument of network 'classifier'\), got -3",
    ),
    "a backbone argument out of range": (
        lambda tmp: ["model.args.backbone_args={widths: [8, 0]}"],
        r"^error: config key 'model.args.backbone_args.widths' must be a list of integers >= 1 with at least one entry \(an argument of backbone 'small_cnn'\), got \[8, 0\]",
    ),
    "an empty loss list": (
        lambda tmp: ["loss=[]"],
        r"^error: config key 'loss' is empty: training needs at least one loss; give one, e.g. loss=\[\{name: cross_entropy\}\]$",
    ),
    "val_fraction 0": (
        lambda tmp: ["data.args.val_fraction=0"],
        r"^error: config key 'data.args.val_fraction' must be a number in \(0, 1\) \(an argument of dataset 'digits'\), got 0",
    ),
    "val_fraction -0.1": (
        lambda tmp: ["data.args.val_fraction=-0.1"],
        r"^error: config key 'data.args.val_fraction' must be a number in \(0, 1\)",
    ),
    "val_fraction 0.9 (no training samples left)": (
        lambda tmp: ["data.args.val_fraction=0.9"],
        r"^error: digits: data.args.val_fraction=0.9 and data.args.test_fraction=0.2 leave no training samples of the 1797; make their sum smaller",
    ),
    "config file not UTF-8": (
        lambda tmp: (
            (tmp / "latin.yaml").write_bytes("optim:\n  lr: 0.1  # caf\u00e9\n".encode("latin-1"))
            and ["--config", str(tmp / "latin.yaml")]
        ),
        r"^error: config file '.*latin.yaml' is not UTF-8 text \(byte 0xe9 at offset 23: invalid continuation byte\); save it as UTF-8",
    ),
    "missing config file": (
        lambda tmp: ["--config", "configs/digits_resnt18.yaml"],
        r"^error: config file 'configs/digits_resnt18.yaml' does not exist; did you mean 'configs/digits_resnet18.yaml'\?$",
    ),
    "--config naming a folder": (
        lambda tmp: ["--config", "configs"],
        r"^error: config file 'configs' is a folder, not a file; give one of its files, e.g. --config configs/\S+\.yaml$",
    ),
    "latest that is a real folder": (
        lambda tmp: (tmp / "out" / "bad" / "latest").mkdir(parents=True) or [],
        r"^error: '.*/bad/latest' is a folder, where this framework keeps the link to the experiment's newest run; move it away",
    ),
    "train.ema=true": (
        lambda tmp: ["train.ema=true"],
        r"^error: config key 'train.ema' must be a mapping \(e.g. \{decay: 0.9998\}\) or null, got True \(bool\)$",
    ),
    "a torchmetrics class for other data": (
        lambda tmp: ["eval.extra_metrics=[{name: MeanSquaredError}]"],
        r"^error: eval.extra_metrics\[0\] \(MeanSquaredError\) does not fit the outputs of eval.metric=classification: given scores \[4, 10\] \(float\) and class indices \[4\], it raised RuntimeError: .*; choose a multiclass metric",
    ),
    "a torchmetrics num_classes the data contradicts (after the data is built)": (
        lambda tmp: ["data.args.classes=[0, 1, 2]", "eval.extra_metrics=[{name: MulticlassF1Score, num_classes: 10}]"],
        r"^error: eval.extra_metrics\[0\] \(MulticlassF1Score\) has num_classes=10, but the data has 3 classes; leave num_classes out",
    ),
    "timm out_indices out of range": (
        lambda tmp: [
            "model.args={num_classes: 10, backbone: timm, backbone_args: {model_name: resnet18, in_chans: 1, out_indices: [0, 7]}}"
        ],
        r"^error: backbone timm: out_indices \[0, 7\] are out of range for resnet18, which has 5 feature stages; give indices from 0 to 4",
    ),
    "timm argument unknown to the model": (
        lambda tmp: [
            "model.args={num_classes: 10, backbone: timm, backbone_args: {model_name: resnet18, in_chans: 1, drop_rat: 0.1}}"
        ],
        r"^error: backbone timm: resnet18 got an argument it does not take, 'drop_rat' .*; remove it from model.args.backbone_args; ResNet takes: .*drop_rate",
    ),
    "timm model of a fixed input size": (
        lambda tmp: [
            "model.args={num_classes: 10, backbone: timm, backbone_args: {model_name: vit_tiny_patch16_224}}",
            "model.input_size=[3, 32, 32]",
        ],
        r"^error: backbone timm: vit_tiny_patch16_224 takes inputs of 224x224 only \(timm's fixed_input_size\), but model.input_size is \[3, 32, 32\]; set model.input_size=\[3, 224, 224\]",
    ),
    "a hook named twice": (
        lambda tmp: ["hooks=[{name: confusion_matrix}, {name: ConfusionMatrix, enabled: false}]"],
        r"^error: config key 'hooks' names hook 'confusion_matrix' twice \(hooks\[0\] and hooks\[1\]\); give each hook once",
    ),
    "a backbone given as the network": (
        lambda tmp: ["model.name=resnet18"],
        r"^error: unknown network 'resnet18': resnet18 is a backbone, not a network; a network takes it: model.name=classifier model.args.backbone=resnet18",
    ),
}


def _without_cuda(args: List[str]) -> List[str]:
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    return args


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_and_exit_code_2(case, tmp_path, capsys):
    make_args, expected = CASES[case]
    exits_2_with_one_error_line(make_args(tmp_path), expected, tmp_path, capsys)


def test_values_as_users_type_them_run(tmp_path, capsys):
    """Exponent-form numbers on the command line (YAML 1.1 reads 1e-3 as a string)."""
    assert main.main([*fast_overrides(tmp_path, "typed", epochs=1), "optim.lr=1e-3", "optim.weight_decay=5e-4"]) == 0
    assert "test: top1=" in capsys.readouterr().out

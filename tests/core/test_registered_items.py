"""Every registered backbone, module, network and loss builds and runs forward + backward on CPU;
every registered hook runs through a short fit and test of its task and leaves what it promises.

Items that need arguments or a special input declare them in EXAMPLES. An item without
an example (a user's plugin in network/, hook/, ...: the README says no other file
changes) is built with its defaults (``num_classes``/``in_channels`` filled when
required) and run on the kind's usual input; one that needs more is skipped with a
line saying what to add here, never failed: a user's plugin never fails this suite.
"""

import inspect
import json
import multiprocessing
from typing import Any, Dict, List, Tuple

import pytest
import torch

from tests.fixtures.harness import run_with, tensorboard
from tests.fixtures.metrics_rows import rows
from tests.trackers.hook_examples import TRACKER_EXAMPLES, TRACKERS, run_tracker
from utils.hook.profiler import ProfilerHook
from utils.hook.progress import ProgressHook
from utils.registry import BACKBONES, HOOKS, LOSSES, METRICS, MODULES, NETWORKS

SMALL_SOD = {"backbone": "small_cnn", "backbone_args": {"widths": [8, 16, 16]}, "channels": 8, "head_channels": 8}

# name -> (constructor kwargs, input shape or a function returning the input(s))
EXAMPLES: Dict[str, Tuple[Dict[str, Any], Any]] = {
    "backbone/*": ({"in_channels": 3}, (2, 3, 32, 32)),
    "module/conv_bn_act": ({"in_channels": 3, "out_channels": 4}, (2, 3, 8, 8)),
    "network/classifier": (
        {"num_classes": 5, "backbone": "small_cnn", "backbone_args": {"in_channels": 3}},
        (2, 3, 16, 16),
    ),
    # AIM takes a pyramid (fine to coarse; odd sizes on purpose); SIM a single map
    "module/aim": (
        {"in_channels": [4, 8, 16], "out_channels": 6},
        lambda: [torch.randn(2, 4, 17, 15), torch.randn(2, 8, 9, 8), torch.randn(2, 16, 5, 4)],
    ),
    "module/sim": ({"channels": 8, "low_channels": 4}, (2, 8, 9, 7)),
    "network/minet": ({**SMALL_SOD, "sim_channels": 4}, (2, 3, 21, 19)),
    "network/fpn_sod": (SMALL_SOD, (2, 3, 21, 19)),
    # video: clips [B, C, T, H, W]; torchvision's video ResNets on tiny clips keep the test fast
    "backbone/small_3d_cnn": ({"in_channels": 3, "widths": [4, 8]}, (2, 3, 4, 16, 16)),
    "backbone/r3d_18": ({}, (1, 3, 4, 32, 32)),
    "backbone/mc3_18": ({}, (1, 3, 4, 32, 32)),
    "backbone/r2plus1d_18": ({"in_channels": 2}, (1, 2, 4, 32, 32)),
    "module/conv3d_bn_act": ({"in_channels": 3, "out_channels": 4, "stride": [1, 2, 2]}, (2, 3, 4, 8, 8)),
    "network/video_classifier": (
        {"num_classes": 5, "backbone_args": {"widths": [4, 8]}, "temporal_pool": "max"},
        (2, 3, 4, 16, 16),
    ),
    "network/frame_classifier": (
        {"num_classes": 5, "backbone_args": {"in_channels": 3, "widths": [4, 8]}, "frames": "all"},
        (2, 3, 4, 16, 16),
    ),
}

# loss name -> (kwargs, outputs, targets) builders
LOSS_EXAMPLES = {
    "cross_entropy": ({"label_smoothing": 0.1}, lambda: torch.randn(4, 5), lambda: torch.tensor([0, 1, 2, 4])),
    "bce_with_logits": ({}, lambda: torch.randn(4, 5), lambda: torch.tensor([0, 1, 2, 4])),
    "iou": ({}, lambda: torch.randn(2, 1, 9, 7), lambda: {"mask": (torch.rand(2, 1, 9, 7) > 0.5).float()}),
    "cel": (
        {"per_image": False},
        lambda: torch.randn(2, 1, 9, 7),
        lambda: {"mask": (torch.rand(2, 1, 9, 7) > 0.5).float()},
    ),
}


def framework_items(registry) -> list:
    """The registry's items that ship with the framework (tests register their own extras)."""
    return [n for n in registry.names() if not registry.get(n).__module__.startswith("tests")]


# the arguments an item without an example gets when it requires them, and the inputs it is tried on
USUAL_ARGUMENTS = {"num_classes": 5, "in_channels": 3}
USUAL_INPUTS = ((2, 3, 32, 32), (2, 1, 32, 32))  # RGB images, then grey ones (small_cnn's default)


def example(kind: str, name: str):
    key = f"{kind}/{name}"
    if key in EXAMPLES:
        return EXAMPLES[key]
    if f"{kind}/*" in EXAMPLES:
        return EXAMPLES[f"{kind}/*"]
    return None


def usual_arguments(obj: Any) -> Dict[str, Any]:
    """The ``USUAL_ARGUMENTS`` among ``obj``'s required parameters; skips when it requires others."""
    params = inspect.signature(obj).parameters.values()
    required = [p.name for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = [name for name in required if name not in USUAL_ARGUMENTS]
    if unknown:
        pytest.skip(f"{obj.__name__} needs {unknown}: add an example to EXAMPLES in {__file__} to test it")
    return {name: USUAL_ARGUMENTS[name] for name in required}


def check_with_defaults(registry, kind: str, name: str) -> None:
    """A plugin without an example: built with its defaults, then forward + backward on the first usual input it takes."""
    problems: List[str] = []
    for shape in USUAL_INPUTS:
        model = registry.build(name, **usual_arguments(registry.get(name)))
        try:
            check_forward_backward(model, shape)
            return
        except (RuntimeError, ValueError, TypeError, IndexError) as err:  # an input it does not take: try the next
            problems.append(f"{list(shape)}: {str(err).splitlines()[0]}")
    pytest.skip(
        f"{kind}/{name} takes none of the usual inputs ({'; '.join(problems)}): add an example to EXAMPLES in {__file__}"
    )


def outputs_of(result: Any):
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, dict):
        return [t for v in result.values() for t in outputs_of(v)]
    return [t for v in result for t in outputs_of(v)]


def make_input(spec):
    """A tensor of the given shape, or what the example's function returns."""
    x = spec() if callable(spec) else torch.randn(*spec)
    for t in outputs_of(x):
        t.requires_grad_(True)
    return x


def check_forward_backward(model: torch.nn.Module, spec) -> None:
    torch.manual_seed(0)
    x = make_input(spec)
    outs = outputs_of(model(x))
    assert outs and all(torch.isfinite(o).all() for o in outs)
    sum(o.float().mean() for o in outs).backward()
    assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in outputs_of(x))
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in trainable)


@pytest.mark.parametrize("name", framework_items(BACKBONES))
def test_backbone(name):
    found = example("backbone", name)
    if found is None:
        return check_with_defaults(BACKBONES, "backbone", name)
    kwargs, shape = found
    model = BACKBONES.build(name, **kwargs)
    feats = model(make_input(shape))
    assert len(feats) == len(model.out_channels)
    assert [f.shape[1] for f in feats] == list(model.out_channels)
    check_forward_backward(model, shape)


@pytest.mark.parametrize("name", framework_items(MODULES))
def test_module(name):
    found = example("module", name)
    if found is None:
        return check_with_defaults(MODULES, "module", name)
    kwargs, shape = found
    check_forward_backward(MODULES.build(name, **kwargs), shape)


@pytest.mark.parametrize("name", framework_items(NETWORKS))
def test_network(name):
    found = example("network", name)
    if found is None:
        return check_with_defaults(NETWORKS, "network", name)
    kwargs, shape = found
    check_forward_backward(NETWORKS.build(name, **kwargs), shape)


@pytest.mark.parametrize("name", framework_items(LOSSES))
def test_loss(name):
    if name not in LOSS_EXAMPLES:  # a loss's input depends on its task: no usual one to guess
        pytest.skip(f"loss/{name} has no example: add one to LOSS_EXAMPLES in {__file__} to test it")
    kwargs, make_outputs, make_targets = LOSS_EXAMPLES[name]
    outputs = make_outputs()
    outputs = outputs.requires_grad_(True) if isinstance(outputs, torch.Tensor) else outputs
    loss = LOSSES.build(name, **kwargs)(outputs, make_targets())
    assert loss.dim() == 0 and torch.isfinite(loss)
    loss.backward()
    grads = [t.grad for t in outputs_of(outputs)]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


def _json(path):

    return json.loads(path.read_text())


def _images(out, *tags):
    """Whether the run's TensorBoard holds ``tags`` (val: one image per epoch of the harness's 2, test: one)."""
    images = tensorboard(out).Tags()["images"]
    return all(
        tag in images and len(tensorboard(out).Images(tag)) == (2 if tag.startswith("val/") else 1) for tag in tags
    )


# hook name -> (constructor kwargs given the run's output folder, task, what its run must leave behind)
HOOK_EXAMPLES = {
    **TRACKER_EXAMPLES,  # a local store each (MLflow's SQLite store without a server; W&B offline)
    "saliency_grid": (
        lambda out: {"images": 3, "size": 16},
        "sod",
        lambda t, out: _images(out, "val/saliency_grid", "test/saliency_grid"),
    ),
    "confusion_matrix": (
        lambda out: {},
        "classification",
        lambda t, out: _images(out, "val/confusion_matrix", "test/confusion_matrix"),
    ),
    "confident_mistakes": (
        lambda out: {"images": 2, "size": 16},
        "classification",
        lambda t, out: _images(out, "val/confident_mistakes"),
    ),
    "clip_strips": (
        lambda out: {"clips": 2, "frames": 3, "size": 16},
        "video",
        lambda t, out: _images(out, "val/clips"),
    ),
    "run_summary": (
        lambda out: {},
        "classification",
        lambda t, out: (
            "config" in tensorboard(out).Tags()["tensors"][0]
            and "_hparams_/experiment" in tensorboard(out).PluginTagToContent("hparams")
        ),
    ),
}


def hook_task(name: str) -> str:
    """The task a hook without an example runs in: the first its ``tasks`` name, else classification."""
    tasks = [task for task in getattr(HOOKS.get(name), "tasks", ()) or () if task != "*"]
    return tasks[0] if tasks else "classification"


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in TRACKERS else n for n in framework_items(HOOKS)]
)
def test_hook(name, tmp_path):
    make_kwargs, task, check = HOOK_EXAMPLES.get(name) or (
        lambda out: usual_arguments(HOOKS.get(name)),
        hook_task(name),
        lambda t, out: True,
    )
    hook = HOOKS.build(name, **make_kwargs(tmp_path))
    assert set(getattr(hook, "tasks", ())) <= {"*", *METRICS.names()}  # a default for tasks that exist
    if name in TRACKERS:  # in a process of its own: W&B leaves threads behind that later forks of this one inherit
        process = multiprocessing.get_context("spawn").Process(target=run_tracker, args=(name, tmp_path))
        process.start()
        process.join(120)
        assert process.exitcode == 0, f"the {name} hook's run failed (exit {process.exitcode})"
        trainer = None
    else:
        trainer = run_with(hook, task, tmp_path)
    assert check(trainer, tmp_path)


def test_the_built_in_services_and_hooks_of_a_training_run(tmp_path):
    """The run writer, validator, checkpointer, EMA and stop signal (services), and the progress and
    profiler hooks that main.py adds, through the harness's two epochs and test."""
    profiler = ProfilerHook(str(tmp_path / "profile"), wait=0, warmup=1, active=2)
    trainer = run_with(profiler, "classification", tmp_path, ema=True, checkpoints=True)
    assert {"train/loss", "train/lr", "train_epoch/loss", "val/top1", "val/ema_top1", "test/top1"} <= set(
        tensorboard(tmp_path).Tags()["scalars"]
    )
    assert [row["split"] for row in rows(tmp_path)] == [
        "val",
        "val",
        "test",
    ]
    assert trainer.parts.ema.updates == trainer.state.step == 6 and trainer.stop.agreed is None
    assert trainer.validator.tracker.epoch in (0, 1) and trainer.validator.pending is None
    # the end of epoch 1 (of 3 batches), numbered as the log's "epoch 1"
    assert (tmp_path / "ckpt" / "best.pt").is_file() and (tmp_path / "ckpt" / "epoch0001_batch000003.pt").is_file()
    assert (tmp_path / "ckpt" / "epoch0001_batch000003.pt.val.json").is_file()  # the validation after it, recorded
    assert {"ProfilerStep#1", "ProfilerStep#2"} <= {
        e.get("name") for e in _json(tmp_path / "profile" / "trace.json")["traceEvents"]
    }
    progress = ProgressHook(log_every=1)
    run_with(progress, "classification", tmp_path / "progress")
    assert progress.bar is None  # not a terminal: no bar, and the epoch's end closed any

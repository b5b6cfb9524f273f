"""Configuration: the schema, one dataclass per section, each key with its type, default, range and resume rule.

The defaults select the default experiment (a small CNN on scikit-learn's
digits). ``load_config`` (``utils/config/load.py``) builds a config from them, a
YAML file and ``key.sub=value`` overrides. Every key is checked: an unknown key or
a value of the wrong type is a ``ConfigError`` naming the key and the closest valid one.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Literal, Optional, Union

import yaml

from utils.config.resume import APPLY, INERT, MATCH
from utils.config.rules import PATH, above, at_least, plain_name, rule
from utils.errors import OutputError
from utils.files.owned import make_dirs, write_text

RUN_TAG_MAX = 150  # characters of experiment.run_tag (a sweep's tags fit it: utils/sweep/trial_runs.py)


@dataclass
class ExperimentConfig:
    # a plain folder name: the runs go to <output_root>/<name>/run_NNN; null: named after what the run trains
    # (``utils/config/load.py``: ``default_experiment_name``), so experiments without a name do not share one folder
    name: Optional[str] = field(
        default=None,
        metadata=rule(
            lambda v: v is None or plain_name(v),
            "a plain folder name (no '/', not '.' or '..', at most 200 bytes), or null (named after the config)",
        )
        | INERT,
    )
    output_root: str = field(default="output", metadata=PATH | INERT)
    # a training run's folder is run_NNN_<tag> (a sweep names its trials' configuration and seed so)
    run_tag: Optional[str] = field(
        default=None,
        metadata=rule(
            lambda v: (
                v is None or bool(re.fullmatch(r"[A-Za-z0-9.=+-]+(_[A-Za-z0-9.=+-]+)*", v)) and len(v) <= RUN_TAG_MAX
            ),
            f"null or at most {RUN_TAG_MAX} letters, digits and . = + - _ (e.g. lr=0.01_seed=1)",
        )
        | INERT,
    )


@dataclass
class DataConfig:
    name: str = field(default="digits", metadata=MATCH)
    root: Optional[str] = field(default=None, metadata=PATH | INERT)
    args: Dict[str, Any] = field(default_factory=dict, metadata=MATCH)  # extra dataset arguments
    batch_size: int = field(default=64, metadata=at_least(1) | MATCH)  # per process
    # The global batch (all processes together): when set, the per-process batch is global_batch_size /
    # world size and the data order is the same at every world size, so a run resumes on another one.
    global_batch_size: Optional[int] = field(default=None, metadata=at_least(1, null=True) | MATCH)
    # defaults to batch_size
    eval_batch_size: Optional[int] = field(default=None, metadata=at_least(1, null=True) | INERT)
    # the split testing evaluates (e.g. val when the data has no test split)
    test_split: str = field(default="test", metadata=INERT)
    num_workers: int = field(default=0, metadata=at_least(0) | INERT)
    pin_memory: bool = field(default=False, metadata=INERT)
    drop_last: bool = field(default=True, metadata=MATCH)
    persistent_workers: bool = field(default=False, metadata=INERT)
    prefetch_factor: Optional[int] = field(default=None, metadata=at_least(1, null=True) | INERT)
    # auto: thread on CPU, cuda on GPU
    prefetch: Literal["none", "thread", "cuda", "auto"] = field(default="auto", metadata=INERT)
    prefetch_depth: int = field(default=2, metadata=at_least(1) | INERT)
    # dali: image_folder data through NVIDIA DALI pipelines
    loader: Literal["torch", "dali"] = field(default="torch", metadata=MATCH)
    # Per-channel input normalization done by the loader (on the GPU with prefetch=cuda, in DALI's
    # pipeline with loader=dali); None leaves inputs as the dataset and transforms give them.
    mean: Optional[List[float]] = field(default=None, metadata=APPLY)
    std: Optional[List[float]] = field(
        default=None,
        metadata=rule(lambda v: v is None or all(x > 0 for x in v), "numbers > 0 (one per channel) or null") | APPLY,
    )
    # torchvision.transforms.v2 classes by name, e.g. [{name: RandomCrop, size: 8, padding: 1}]
    train_transforms: List[Dict[str, Any]] = field(default_factory=list, metadata=APPLY)
    eval_transforms: List[Dict[str, Any]] = field(default_factory=list, metadata=APPLY)


@dataclass
class ModelConfig:
    name: str = field(default="classifier", metadata=MATCH)
    args: Dict[str, Any] = field(default_factory=lambda: {"backbone": "small_cnn", "num_classes": 10}, metadata=MATCH)
    # one sample's C,H,W (or C,T,H,W): FLOP count, lazy modules
    input_size: Optional[List[int]] = field(
        default_factory=lambda: [1, 8, 8],
        metadata=rule(
            lambda v: v is None or all(x >= 1 for x in v),
            "one sample's shape, every size >= 1 (e.g. [3, 224, 224]), or null",
        )
        | MATCH,
    )
    pretrained: Optional[str] = field(default=None, metadata=PATH | INERT)
    # a network that returns a dict: the entry holding the prediction
    prediction_key: str = field(default="prediction", metadata=APPLY)
    pretrained_prefix: str = field(default="", metadata=INERT)
    pretrained_strict: bool = field(default=False, metadata=INERT)
    # least share of the model's float tensors model.pretrained must fill
    pretrained_min_share: float = field(
        default=0.5, metadata=rule(lambda v: 0 <= v <= 1, "in [0, 1] (0: any partial load)") | INERT
    )
    freeze: List[str] = field(default_factory=list, metadata=APPLY)
    freeze_bn: bool = field(default=False, metadata=APPLY)
    sync_bn: bool = field(default=False, metadata=APPLY)
    grad_checkpointing: bool = field(default=False, metadata=INERT)
    # weights and 4-D inputs in channels_last memory format (faster convolutions on GPUs)
    channels_last: bool = field(default=False, metadata=INERT)


@dataclass
class OptimConfig:
    # on resume only with --reset-optimizer (utils/checkpoint/guard.py)
    name: Literal["sgd", "adam", "adamw"] = field(default="adamw", metadata=APPLY)
    # 0: a run that only evaluates or only updates statistics
    lr: float = field(default=3e-3, metadata=at_least(0) | APPLY)
    weight_decay: float = field(default=1e-4, metadata=at_least(0) | APPLY)
    momentum: float = field(default=0.9, metadata=rule(lambda v: 0 <= v < 1, "in [0, 1)") | APPLY)
    betas: List[float] = field(
        default_factory=lambda: [0.9, 0.999],
        metadata=rule(lambda v: len(v) == 2 and all(0 <= b < 1 for b in v), "two numbers in [0, 1) (e.g. [0.9, 0.999])")
        | APPLY,
    )
    nesterov: bool = field(default=False, metadata=APPLY)
    lr_scaling: Literal["none", "linear", "sqrt"] = field(default="none", metadata=APPLY)  # relative to world size 1
    param_groups: List[Dict[str, Any]] = field(default_factory=list, metadata=APPLY)
    layer_decay: Optional[float] = field(
        default=None, metadata=rule(lambda v: v is None or 0 < v <= 1, "in (0, 1] (e.g. 0.75) or null") | APPLY
    )
    # auto: fused where torch has it for the device and dtype, else foreach
    impl: Literal["auto", "fused", "foreach", "loop"] = field(default="auto", metadata=INERT)


@dataclass
class ScheduleConfig:
    name: Literal["constant", "step", "cosine", "poly"] = field(default="cosine", metadata=APPLY)
    warmup_epochs: float = field(default=1.0, metadata=at_least(0) | APPLY)
    warmup_start_factor: float = field(default=0.01, metadata=rule(lambda v: 0 < v <= 1, "in (0, 1]") | APPLY)
    # cosine floor as a fraction of lr
    min_lr_factor: float = field(default=0.0, metadata=rule(lambda v: 0 <= v <= 1, "in [0, 1]") | APPLY)
    step_epochs: List[int] = field(
        default_factory=lambda: [30, 60],
        metadata=rule(
            lambda v: all(x >= 0 for x in v) and list(v) == sorted(v), "ascending epochs >= 0 (e.g. [30, 60])"
        )
        | APPLY,
    )
    gamma: float = field(default=0.1, metadata=above(0) | APPLY)
    power: float = field(default=0.9, metadata=above(0) | APPLY)


@dataclass
class TrainConfig:
    epochs: int = field(default=15, metadata=at_least(1) | APPLY)
    iterations: Optional[int] = field(default=None, metadata=at_least(1, null=True) | APPLY)  # if set, overrides epochs
    accumulate: int = field(default=1, metadata=at_least(1) | APPLY)
    clip_grad_norm: Optional[float] = field(default=None, metadata=above(0, null=True) | APPLY)
    clip_grad_value: Optional[float] = field(default=None, metadata=above(0, null=True) | APPLY)
    ema: Optional[Dict[str, Any]] = field(default=None, metadata=APPLY)
    log_every: int = field(default=10, metadata=at_least(1, "log every N steps") | INERT)
    # steps between agreements of the ranks (preemption, NaN losses); None: log_every
    sync_every: Optional[int] = field(default=None, metadata=at_least(1, "null: train.log_every", null=True) | INERT)
    # torch.compile the model: true or {mode, backend, fullgraph, dynamic}
    compile: Union[bool, Dict[str, Any], None] = field(default=None, metadata=INERT)
    auto_resume: bool = field(default=False, metadata=INERT)
    checkpoint_every_steps: int = field(default=0, metadata=at_least(0, "0: at the end of each epoch only") | INERT)
    # write checkpoints in a background thread (the loop only copies the state to CPU memory)
    async_checkpoint: bool = field(default=False, metadata=INERT)
    keep_checkpoints: int = field(default=2, metadata=at_least(1) | INERT)
    # accepted for configs of 0.2 and older: every fresh run now gets a run folder of its own
    overwrite: bool = field(default=False, metadata=INERT)
    nonfinite: Literal["stop", "skip"] = field(default="stop", metadata=APPLY)
    max_nonfinite_skips: int = field(default=10, metadata=at_least(0) | APPLY)
    patience: Optional[int] = field(default=None, metadata=at_least(1, null=True) | APPLY)
    # {wait: 1, warmup: 1, active: 5}: torch.profiler over those steps (rank 0)
    profile: Optional[Dict[str, int]] = field(default=None, metadata=INERT)
    # rank 0 writes samples.jsonl: the sample keys of every step's global batch (utils/engine/sample_record.py)
    record_samples: bool = field(default=False, metadata=INERT)


@dataclass
class EvalConfig:
    every: int = field(default=1, metadata=at_least(1) | APPLY)  # validate every K epochs
    metric: str = field(default="classification", metadata=APPLY)
    monitor: str = field(default="top1", metadata=APPLY)
    # null: the direction the metric declares (loss, mae: min)
    monitor_mode: Optional[Literal["max", "min"]] = field(default=None, metadata=APPLY)
    use_ema: bool = field(default=False, metadata=APPLY)
    save_predictions: bool = field(default=False, metadata=INERT)
    # torchmetrics classes by name, reported beside the task's metrics: [{name: MulticlassF1Score, average: macro}]
    extra_metrics: List[Dict[str, Any]] = field(default_factory=list, metadata=APPLY)


@dataclass
class AmpConfig:
    opt_level: Literal["O0", "O1", "O2", "O3"] = field(default="O0", metadata=APPLY)
    backend: Literal["auto", "native", "apex"] = field(default="auto", metadata=APPLY)
    dtype: Literal["auto", "float16", "bfloat16"] = field(default="auto", metadata=APPLY)
    # auto (dynamic for fp16 at O1/O2, else none) | dynamic | <float>
    loss_scale: Union[str, float] = field(default="auto", metadata=APPLY)
    keep_batchnorm_fp32: Optional[bool] = field(default=None, metadata=APPLY)


@dataclass
class DistConfig:
    backend: Literal["auto", "nccl", "gloo"] = field(default="auto", metadata=INERT)  # auto: nccl on CUDA, gloo on CPU
    # fsdp: FSDP2, parameters, gradients and optimizer state sharded (utils/distributed/fsdp.py)
    mode: Literal["ddp", "dp", "apex", "fsdp"] = field(default="ddp", metadata=APPLY)
    # fsdp: free each block's gathered parameters after its forward (gathered again for backward)
    reshard_after_forward: bool = field(default=True, metadata=INERT)
    find_unused_parameters: bool = field(default=False, metadata=INERT)
    static_graph: bool = field(default=False, metadata=INERT)
    # gradients are views into DDP's buckets: one copy of the gradients less
    gradient_as_bucket_view: bool = field(default=True, metadata=INERT)
    # DDP's gradient bucket size (torch's default)
    bucket_cap_mb: float = field(default=25.0, metadata=above(0) | INERT)
    timeout_s: int = field(default=1800, metadata=at_least(1) | INERT)


@dataclass
class Config:
    experiment: ExperimentConfig = field(default_factory=ExperimentConfig)
    seed: int = field(
        default=0,
        metadata=rule(lambda v: 0 <= v < 2**32, "in [0, 2**32) (numpy and the samplers take 32-bit seeds)") | MATCH,
    )
    device: Literal["auto", "cpu", "cuda"] = field(default="auto", metadata=APPLY)
    # deterministic CUDA kernels (cuDNN, cuBLAS), so a resumed GPU run equals an uninterrupted one; false: the
    # fastest kernels, whose float sums may differ in the last bits between runs (utils/distributed/determinism.py)
    deterministic: bool = field(default=True, metadata=INERT)
    # CPU intra-op threads per process (None: the cores it may use, shared by a node's processes: utils/threads.py)
    threads: Optional[int] = field(default=None, metadata=at_least(1, null=True) | INERT)
    custom_imports: List[str] = field(default_factory=list, metadata=APPLY)
    # users' hooks: [{name: my_hook, <its arguments>}]
    hooks: List[Dict[str, Any]] = field(default_factory=list, metadata=APPLY)
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    loss: List[Dict[str, Any]] = field(
        default_factory=lambda: [{"name": "cross_entropy", "weight": 1.0}], metadata=APPLY
    )
    optim: OptimConfig = field(default_factory=OptimConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    amp: AmpConfig = field(default_factory=AmpConfig)
    dist: DistConfig = field(default_factory=DistConfig)

    @property
    def experiment_dir(self) -> Path:
        """``<experiment.output_root>/<experiment.name>``: the experiment's runs (``utils/run/folder.py``)."""
        return Path(self.experiment.output_root) / self.experiment.name  # ~ already expanded (PATH fields)


def to_dict(cfg: Config) -> Dict[str, Any]:
    return dataclasses.asdict(cfg)


def config_yaml(cfg: Config) -> str:
    """The resolved config as the YAML a run's config.yaml holds (``--print-config`` prints it), which ``--config`` reads back."""
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)


def save_config(cfg: Config, path: Union[str, Path]) -> None:
    """Write the resolved config as YAML that ``--config`` reads back (OutputError when the disk refuses)."""
    path = Path(path)
    try:
        make_dirs(path.parent, path.parent)
    except OSError as err:
        raise OutputError.writing(path, err) from err
    write_text(path.parent, path, config_yaml(cfg), "resume with --resume")  # never through a link

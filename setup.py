"""Install the framework's dependencies; the repo root stays the working directory.

apex is an optional, detected backend (``amp.backend``): the PyPI package named
``apex`` is an unrelated project, so it is never listed here.
"""

from setuptools import find_packages, setup

setup(
    name="regtrain",
    version="0.2.0",
    description="A registry-built PyTorch training framework: one CPU to many GPUs, mixed precision, exact distributed evaluation",
    python_requires=">=3.9",
    packages=find_packages(include=["backbone*", "hook*", "loss*", "module*", "network*", "utils*"]),
    py_modules=["main"],
    install_requires=[
        "torch>=2.1",
        "torchvision",
        "prefetch-generator",
        "tensorboard",
        "ultralytics-thop",
        "pyyaml",
        "tqdm",
        "scikit-learn",
        "pysodmetrics",
        "pillow>=10.1",  # pictures for TensorBoard: ImageFont.load_default(size=...)
        "python-hostlist",  # SLURM node lists (srun launch)
    ],
    extras_require={
        "test": ["pytest", "pytest-timeout"],
        "dali": ["nvidia-dali-cuda130"],
    },
)

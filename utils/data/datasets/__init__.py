"""Datasets, each registered in ``DATASETS``; every file here is imported on first use.

A dataset is built as ``DATASETS.build(name, split=..., root=..., transform=..., **data.args)``
and yields ``(input, target)`` pairs.
"""

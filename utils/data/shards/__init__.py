"""Datasets packed as shards: WebDataset-style tar files plus one ``index.json`` per split.

``--mode pack`` (``utils/commands/pack.py``) writes them; the ``shards`` dataset
(``utils/data/datasets/shards.py``) reads them from a folder or from S3 by byte
range through the index, so it is an ordinary map-style dataset: the framework's
samplers give the same world-size-independent order and exact resume as for a folder.
Only the standard library writes and reads the tar files (``tarfile``; boto3 for S3).
"""

"""Which store a root names: an S3 prefix (``s3.py``) for ``s3://bucket/prefix``, else a folder (``store.py``).

Apart from ``store.py``, whose interface and advice both stores use, so neither imports the other. boto3 is
imported only when an S3 store first talks to S3.
"""

from __future__ import annotations

import os

from utils.data.shards.s3 import S3Store
from utils.data.shards.store import LocalStore, Store, is_s3


def open_store(root: str) -> Store:
    """The store of ``data.root`` (or ``--output``): S3 for ``s3://bucket/prefix``, else a folder."""
    if is_s3(root):
        return S3Store(root)
    return LocalStore(os.path.expanduser(root))

"""Where the folder datasets' samples come from: a folder of files or a pack (``--mode pack``, a folder or
``s3://bucket/prefix``), read through one interface, as timm's ``create_reader`` picks a reader under one dataset."""

"""A run's folder and its own files: layout, numbering, lock, the newest pointer, metrics.jsonl, how a run starts."""

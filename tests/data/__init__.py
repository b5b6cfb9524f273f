"""Prefetching loaders and DALI."""

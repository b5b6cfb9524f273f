"""Benchmarks: each ``bench_*.py`` has ``run(quick) -> rows``; ``run.py`` prints and records them."""

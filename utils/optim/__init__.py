"""Optimization: optimizers and parameter groups, LR schedules, freezing, EMA of weights."""

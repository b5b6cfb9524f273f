"""Distributed training: process groups, collectives, DDP/DP wrapping, SyncBN, per-rank seeds, preemption."""

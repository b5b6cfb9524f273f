"""Reusable blocks, each registered in ``MODULES``; every file here is imported on first use."""

"""Criteria, each registered in ``LOSSES``; every file here is imported on first use."""

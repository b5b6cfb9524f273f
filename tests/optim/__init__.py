"""Freezing and parameter groups."""

"""Launchers, exact distributed evaluation, SyncBN, failing ranks."""

"""Mixed precision O0-O3."""

"""Config, registries, the project's structural rules, every registered item."""

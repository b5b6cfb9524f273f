"""Framework utilities: registries, config, distributed helpers, amp, data, engine."""

__version__ = "0.2.0"

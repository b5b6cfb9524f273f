"""Framework utilities: registries, config, distributed helpers, amp, data, engine."""

__version__ = "0.3.0"

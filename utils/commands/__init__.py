"""The commands of ``main.py``, one module per mode, above the engine: ``train``, ``test``, ``predict``, ``export``,
``pack``, ``compare`` and ``sweep``."""

"""The built-in hooks, one behaviour per file, registered in ``HOOKS`` (order: ``utils/hook/``).

``main.py`` adds them to every run from the config keys that set them up
(``train.checkpoint_every_steps``, ``eval.every``, ``train.ema``, ...); the
``hooks:`` config list adds users' hooks from ``hook/``.
"""

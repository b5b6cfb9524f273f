"""Every run: the resolved config as TensorBoard text, and hyperparameters with the final test metrics (HParams tab).

Always on (``tasks = ("*",)``), so it lives with the framework's hooks rather than in the users'
``hook/`` folder; it is registered in ``HOOKS`` as ``run_summary`` all the same, so a config's
``hooks: [{name: run_summary, enabled: false}]`` switches it off.
"""

from __future__ import annotations

import json
from typing import Any, Dict

import yaml

from utils.hook import Hook
from utils.registry import HOOKS


def flat_config(config: Dict[str, Any], prefix: str = "") -> Dict[str, Any]:
    """``{"optim": {"lr": 0.1}}`` -> ``{"optim.lr": 0.1}``; lists and empty mappings as compact JSON,
    None as ``"null"``: the value types TensorBoard's HParams accept."""
    flat: Dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flat_config(value, name + "."))
        elif isinstance(value, (bool, int, float, str)):
            flat[name] = value
        else:
            flat[name] = json.dumps(value, default=str)
    return flat


def config_markdown(config: Dict[str, Any]) -> str:
    """The config as YAML in a Markdown code block (TensorBoard's Text tab renders Markdown)."""
    return "\n".join("    " + line for line in yaml.safe_dump(config, sort_keys=False).splitlines())


@HOOKS.register()
class RunSummary(Hook):
    """Tag ``config``: the resolved config (the run folder's ``config.yaml``) when training
    starts or, in ``--mode test``, with the test. After the test: the config's values as
    hyperparameters and the ``test/*`` scalars as their metrics, so ``tensorboard --logdir
    output`` compares runs in its HParams tab. Rank 0 writes (through the run's writer).
    """

    tasks = ("*",)

    def __init__(self) -> None:
        self.written = False

    def before_train(self, trainer: Any) -> None:
        self._config(trainer)

    def after_test(self, trainer: Any, metrics: Dict[str, float]) -> None:
        self._config(trainer)
        numbers = {f"test/{name}": value for name, value in metrics.items() if isinstance(value, (int, float))}
        trainer.writer.hparams(flat_config(trainer.meta.config), numbers)

    def _config(self, trainer: Any) -> None:
        if not self.written:
            trainer.writer.text("config", config_markdown(trainer.meta.config), trainer.state.step)
            self.written = True

"""``train.compile``: the network compiled with ``torch.compile`` (the loop itself stays Python).

The module is compiled in place (``nn.Module.compile``), before DDP wraps it,
as PyTorch's documentation recommends for DistributedDataParallel ("apply
torch.compile to the inner module passed to the wrapper"); DDP's optimizer
for dynamo then splits the graph at its gradient buckets. In place, the
network keeps its class and its ``state_dict`` keys: checkpoints never carry
``_orig_mod.``, so compiled and eager runs resume from each other's files.

Compiling costs seconds to minutes at the first steps (and again for
evaluation, which runs in eval mode); it pays on GPUs, where inductor fuses
kernels and ``mode: reduce-overhead`` replays CUDA graphs. On CPUs the compiled
step may well be slower than eager (``benchmarks/bench_compile.py``).
"""

from __future__ import annotations

import logging
from typing import Any, Dict, Optional

from torch import nn

from utils.errors import ConfigError

log = logging.getLogger(__name__)


def check_compile_combination(options: Optional[Dict[str, Any]], amp_backend: str, dist_mode: str) -> None:
    """ConfigError for the combinations ``torch.compile`` does not support here (before anything is built)."""
    if options is None:
        return
    if amp_backend == "apex":
        raise ConfigError(
            "train.compile does not work with amp.backend=apex (apex patches torch functions at run time, which torch.compile cannot trace); use amp.backend=native or turn train.compile off"
        )
    if dist_mode in ("dp", "apex"):
        raise ConfigError(
            f"train.compile does not work with dist.mode={dist_mode} (its wrapper replicates or hooks the module in ways torch.compile does not support); use dist.mode=ddp under torchrun, or turn train.compile off"
        )


def compile_model(model: nn.Module, options: Optional[Dict[str, Any]]) -> nn.Module:
    """``model`` compiled in place with ``options`` (mode, backend, fullgraph, dynamic); unchanged when None."""
    if options is None:
        return model
    import torch._dynamo  # the compiler stack (about 1 s to import): only for runs that compile

    backends = torch._dynamo.list_backends(exclude_tags=())
    if options["backend"] not in backends:
        raise ConfigError(
            f"train.compile.backend '{options['backend']}' is not a torch.compile backend; known: {', '.join(sorted(backends))}"
        )
    model.compile(**options)
    log.info(
        "train.compile: the network is compiled with %s; the first steps (and the first evaluation) compile it, which takes a while",
        options,
    )
    return model

"""Export parity: ``--mode export`` (ONNX through onnxruntime, ``torch.export``) vs the eager network.

For the digits small CNN and the digits resnet18 demo, each trained for two steps, the
export's own check (a batch of a size other than the traced one, ``model.json``'s
``max_abs_difference``) is read for each format. Goal: at most the export's tolerance, 1e-4.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from pathlib import Path
from typing import List

from benchmarks.common import row

NETWORKS = {
    "small_cnn": [],
    "resnet18": ["--config", str(Path(__file__).resolve().parents[1] / "configs" / "digits_resnet18.yaml")],
}


def differences(out: Path, name: str, config: List[str]) -> dict:
    import main

    with contextlib.redirect_stdout(io.StringIO()):
        assert (
            main.main(
                [*config, f"experiment.output_root={out}", f"experiment.name={name}", "train.iterations=2", "threads=1"]
            )
            == 0
        )
        checkpoint = out / name / "run_001" / "checkpoints" / "best.pt"
        found = {}
        for fmt in ("onnx", "pt2"):
            assert (
                main.main(
                    [
                        "--mode",
                        "export",
                        "--checkpoint",
                        str(checkpoint),
                        "--format",
                        fmt,
                        "--output",
                        str(out / f"{name}_{fmt}"),
                    ]
                )
                == 0
            )
            found[fmt] = json.loads((out / f"{name}_{fmt}" / "model.json").read_text())["max_abs_difference"]
    return found


def run(quick: bool = False) -> List[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, config in NETWORKS.items():
            for fmt, difference in differences(Path(tmp), name, config).items():
                rows.append(
                    row(
                        "16 export",
                        f"max abs difference exported vs eager, {fmt}, {name}",
                        [difference],
                        "<= 1e-4",
                        lambda m: m <= 1e-4,
                        "onnxruntime (CPU)" if fmt == "onnx" else "torch.export.load(...).module()",
                        fmt="{:.1e}",
                    )
                )
    return rows


if __name__ == "__main__":
    for line in run():
        print(f"{line['measure']}: {line['value']}")

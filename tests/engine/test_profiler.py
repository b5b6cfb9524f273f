"""train.profile: a Chrome trace of the scheduled steps on rank 0 and the top operators in the log."""

import json
import re

import main
from tests.conftest import fast_overrides


def test_profile_writes_a_json_trace_naming_the_active_steps_and_logs_the_top_operators(out_root, caplog):
    args = fast_overrides(out_root, "prof", epochs=1) + ["train.profile={wait: 1, warmup: 1, active: 5}"]
    assert main.main(args) == 0
    # valid JSON, as Perfetto reads it
    trace = json.loads((out_root / "prof" / "latest" / "profile" / "trace.json").read_text())
    steps = sorted({e["name"] for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")})
    assert steps == [f"ProfilerStep#{k}" for k in range(2, 7)]  # 1 step waited, 1 warmed up, 5 recorded
    assert any(e.get("name", "").startswith("aten::") and e.get("ph") == "X" for e in trace["traceEvents"])
    line = re.search(
        r"profiler: trace .*trace.json of training steps 3-7 \(ProfilerStep#2-#6\); top operators by self time:\n(.*)",
        caplog.text,
        re.S,
    )
    assert line and "Self CPU" in line.group(1) and "aten::" in line.group(1)


def test_no_profile_by_default(out_root):
    assert main.main(fast_overrides(out_root, "plain", epochs=1)) == 0
    assert not (out_root / "plain" / "latest" / "profile").exists()

#!/usr/bin/env bash
# The GPU suite: every CUDA path of the framework on this machine's first GPU, then the GPU figures.
#
#   tests/gpu/run.sh [OUT_DIR]      (from the repository root; logs and JSON in OUT_DIR, default gpu_out)
#
# The tests marked `cuda` (tests/gpu/: real main.py runs over every CUDA path; apex's where an apex
# with apex.amp imports), the exact-resume tests (on the GPU, since device=auto picks it), then
# benchmarks/bench_gpu.py alone on the quiet GPU. Exit status: the first failing part's.
set -u
out=${1:-gpu_out}
mkdir -p "$out"
python3 -c "import torch, sys; torch.cuda.is_available() or sys.exit('error: no CUDA device'); print('torch', torch.__version__, torch.cuda.get_device_name(0))" || exit 2
workers=""
python3 -c "import xdist" 2>/dev/null && workers="-n ${GPU_SUITE_WORKERS:-6}"
limit=${GPU_SUITE_PART_S:-0}  # seconds for each of the three parts (0: no limit)
status=0
timeout "$limit" python3 -m pytest -q -p no:cacheprovider -m cuda $workers tests --junitxml "$out/cuda.xml" 2>&1 | tee "$out/cuda.log"
status=$(( status ? status : ${PIPESTATUS[0]} ))
# one process (two ranks on one GPU is a case of its own in tests/gpu)
timeout "$limit" python3 -m pytest -q -p no:cacheprovider $workers -k "sigkill or sigterm" tests/checkpoint/test_resume_exact.py 2>&1 | tee "$out/resume.log"
status=$(( status ? status : ${PIPESTATUS[0]} ))
timeout "$limit" python3 benchmarks/bench_gpu.py --json "$out/bench_gpu.json" 2>&1 | tee "$out/bench_gpu.log"
status=$(( status ? status : ${PIPESTATUS[0]} ))
exit $status

#!/bin/bash
# One device lease: the spaced-sample study's k = 10 and k = 50 runs on the
# CPU cores (single-threaded processes) beside the GPU rows of the step-time
# benchmark (3x500 on the GPU, its workers pinned to two cores).
# Usage: OUT=<folder> bash benchmarks/device_session.sh [quick]
set -u
start=$(date +%s)
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
python3 -c "import torch, lightning, pina, platform; print(torch.__version__, lightning.__version__, pina.__version__, platform.python_version(), torch.cuda.is_available())"
nproc; nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null
if [ "${1:-}" = quick ]; then
  sweep="--quick --every 1 10"; gpu="--quick"; deadline=200
else
  sweep="--every 10 50"; gpu="--widths 500 --rounds 3"; deadline=555
fi
mkdir -p "$OUT/sweep"
pin_study="taskset -c 2-15"; pin_gpu="taskset -c 0-1"
if [ "$(nproc)" -lt 16 ]; then pin_study=""; pin_gpu=""; fi  # a dry run here
$pin_study python3 benchmarks/spaced_samples.py $sweep --workers 12 \
  --output-dir "$OUT/sweep" > "$OUT/sweep.log" 2>&1 &
sweep_pid=$!
$pin_gpu python3 benchmarks/step_time.py $gpu --device auto \
  --output "$OUT/gpu-step-time.md" > "$OUT/gpu.log" 2>&1
echo "gpu rows done after $(( $(date +%s) - start )) s"
# the GPU rows are done: let the study's processes use every core
if [ -n "$pin_study" ]; then
  for p in $(pgrep -f spaced_samples); do taskset -a -c -p 0-15 "$p" >/dev/null; done
fi
while kill -0 $sweep_pid 2>/dev/null; do
  if [ $(( $(date +%s) - start )) -gt $deadline ]; then
    echo "deadline: study not finished"; break
  fi
  sleep 5
done
echo "finished after $(( $(date +%s) - start )) s"
tail -n 30 "$OUT/sweep.log"; tail -n 40 "$OUT/gpu-step-time.md"

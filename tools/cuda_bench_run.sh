#!/usr/bin/env bash
# tools/cuda_bench_run.sh: everything the CUDA backend needs from one device call, in order:
# conformance (default dispatch; every decode GEMV on the second decode kernel; its K-slice
# knob), the full cudabench table, the M <= 16 rows with the first decode kernel only
# (DSV4GO_GEMV_OLD=1, the "before") and with the second kernel only (DSV4GO_GEMV2_ALL=1),
# and torch's comparator. Logs go to $OUT (or /tmp/cudaout); a summary is printed last.
# Usage on the GPU machine, after `make cuda-bins` here (carry out/cuda):
#   bash tools/cuda_bench_run.sh
set -uo pipefail
B=${BIN:-out/cuda}
O=${OUT:-/tmp/cudaout}
mkdir -p "$O"
export DSV4GO_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
date -u

echo "== conformance, default dispatch: all tests"
timeout 200 "$B/kernels-cuda.test" -test.count=1 -test.v >"$O/conf.txt" 2>&1
echo "rc=$?"; grep -E '^(--- |ok|FAIL|PASS)' "$O/conf.txt"

echo "== conformance, DSV4GO_GEMV2_ALL=1: QGEMM and graph tests"
DSV4GO_GEMV2_ALL=1 timeout 150 "$B/kernels-cuda.test" -test.count=1 -test.v -test.run 'QGEMM|Graph' >"$O/conf_v2.txt" 2>&1
echo "rc=$?"; grep -E '^(--- |ok|FAIL|PASS)' "$O/conf_v2.txt"
for v in 0 1 2 3; do
  echo "== DSV4GO_GEMV2_ALL=1 DSV4GO_GEMV2_LGKW=$v (decode tests)" >>"$O/conf_v2.txt"
  DSV4GO_GEMV2_ALL=1 DSV4GO_GEMV2_LGKW=$v timeout 30 "$B/kernels-cuda.test" -test.count=1 -test.run 'DecodeSplits|Grouped|GraphDecode' >>"$O/conf_v2.txt" 2>&1
  echo "all+lgkw=$v rc=$?"
done

echo "== cudabench, default dispatch, full table"
timeout 150 "$B/cudabench" >"$O/bench.txt" 2>&1; echo "rc=$?"

echo "== cudabench, first decode kernel only (DSV4GO_GEMV_OLD=1), M <= 16"
DSV4GO_GEMV_OLD=1 timeout 60 "$B/cudabench" -formats NVFP4,MXFP4 -m 1,4,16 -sweep=false >"$O/bench_old.txt" 2>&1; echo "rc=$?"

echo "== cudabench, second decode kernel only (DSV4GO_GEMV2_ALL=1), M <= 16"
DSV4GO_GEMV2_ALL=1 timeout 60 "$B/cudabench" -formats NVFP4,MXFP4 -m 1,4,16 -sweep=false >"$O/bench_v2.txt" 2>&1; echo "rc=$?"

echo "== torch comparator, M <= 16"
PYTHONUNBUFFERED=1 timeout 90 python3 tools/cuda_bench.py --m 1,4,16 >"$O/torch.txt" 2>&1; echo "rc=$?"

echo "== summary: NVFP4/MXFP4 M <= 16, default | first kernel | second kernel | torch"
grep -E '^device|^device-to-device' "$O/bench.txt"
grep -E '\| (NVFP4|MXFP4) \| (1|4|16) \|' "$O/bench.txt"
echo "-- first kernel"
grep -E '\| (NVFP4|MXFP4) \| (1|4|16) \|' "$O/bench_old.txt"
echo "-- second kernel"
grep -E '\| (NVFP4|MXFP4) \| (1|4|16) \|' "$O/bench_v2.txt"
echo "-- torch"
grep -E 'copy|bf16 matmul' "$O/torch.txt"
echo "-- grouped (default / first / second)"
grep -E '^\| 6 experts' "$O/bench.txt" "$O/bench_old.txt" "$O/bench_v2.txt" | grep -v FP8 | sed 's|^.*/||'
date -u

#!/usr/bin/env bash
# tools/cuda_bench_run.sh: everything the CUDA backend needs from one device call, in order:
# conformance (default dispatch: predecode / streaming decode GEMV, wgmma for large M; then,
# in one log, grouped launches all streaming / all earlier, the earlier decode kernels, no
# 4-deep rings, the next grid scheduled at the wait, no clusters, the predecode kernel off /
# with x per unit / with x first / with one row tile per block, no large-M x pre-pass under
# capture), the read-only ceiling (tools/cuda_ceiling.cu), the decode arithmetic alone
# (tools/cuda_decode_probe.cu), the decode GEMVs' launch timeline (tools/cuda_stream_trace.cu,
# also with the predecode kernel off), the full cudabench table, the M <= 16 rows again with
# the predecode kernel off (DSV4GO_GEMV3_PREDEC=0: this session's change undone), launched
# without programmatic dependent launch (DSV4GO_GEMV3_PDL=0: isolated launches), with the
# earlier dispatch (DSV4GO_GEMV3=0), with the next grid scheduled at the wait
# (DSV4GO_GEMV3_LD=0), the grouped MoE launches all on the streaming GEMV
# (DSV4GO_GEMV3_GROUPED=1) and all on the earlier kernel (=0), M = 2048 without the x
# pre-pass under capture (DSV4GO_QGEMM_XPERM_GRAPH=0), and torch's comparator. Logs go
# to $OUT (or /tmp/cudaout; the device tool returns at most 8 files, so pack them first there);
# a summary is printed last.
# Usage on the GPU machine, after `make cuda-bins` here (carry out/cuda):
#   bash tools/cuda_bench_run.sh
set -uo pipefail
B=${BIN:-out/cuda}
O=${OUT:-/tmp/cudaout}
mkdir -p "$O"
export DSV4GO_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,clocks.mem,temperature.gpu --format=csv,noheader
date -u

echo "== conformance, default dispatch: all tests"
timeout 200 "$B/kernels-cuda.test" -test.count=1 -test.v >"$O/conf.txt" 2>&1
echo "rc=$?"; grep -E '^(--- |ok|FAIL|PASS)' "$O/conf.txt"
: >"$O/conf_variants.txt"
for v in "DSV4GO_GEMV3_GROUPED=1" "DSV4GO_GEMV3_GROUPED=0" "DSV4GO_GEMV3=0" "DSV4GO_GEMV3_SMALL=0" "DSV4GO_GEMV3_LD=0" "DSV4GO_GEMV3_CL=1" "DSV4GO_GEMV3_PREDEC=0" "DSV4GO_GEMV3_PREDEC=1" "DSV4GO_GEMV3_PREDEC=2" "DSV4GO_GEMV3_PDRW=1" "DSV4GO_QGEMM_XPERM_GRAPH=0"; do
  env $v timeout 40 "$B/kernels-cuda.test" -test.count=1 -test.v -test.run 'QGEMMStream|QGEMMGrouped|QGEMMDecodeSplits|GEMVPath|Graph' >"$O/conf_v.txt" 2>&1
  rc=$?
  { echo "== $v rc=$rc"; grep -E '^(--- |ok|FAIL|PASS)' "$O/conf_v.txt"; } >>"$O/conf_variants.txt"
  echo "$v: rc=$rc $(grep -cE '^--- PASS' "$O/conf_v.txt") passed, $(grep -cE '^--- FAIL' "$O/conf_v.txt") failed"
done
rm -f "$O/conf_v.txt"

echo "== read-only ceiling; decode arithmetic alone (tools/cuda_decode_probe.cu)"
timeout 60 "$B/ceiling" >"$O/ceiling.txt" 2>&1; echo "rc=$?"
timeout 60 "$B/decode_probe" >"$O/decode_probe.txt" 2>&1; echo "rc=$?"
timeout 60 "$B/stream_trace" >"$O/stream_trace.txt" 2>&1; echo "rc=$?"
DSV4GO_GEMV3_PREDEC=0 timeout 60 "$B/stream_trace" >"$O/stream_trace0.txt" 2>&1; echo "rc=$?"

echo "== cudabench, default dispatch, full table"
timeout 150 "$B/cudabench" -sweep=false >"$O/bench.txt" 2>&1; echo "rc=$?"

echo "== cudabench M <= 16: predecode kernel off (DSV4GO_GEMV3_PREDEC=0); isolated launches (DSV4GO_GEMV3_PDL=0), earlier dispatch (DSV4GO_GEMV3=0)"
DSV4GO_GEMV3_PREDEC=0 timeout 60 "$B/cudabench" -m 1,4,16 -sweep=false -grouped=false >"$O/bench_pd0.txt" 2>&1; echo "rc=$?"
DSV4GO_GEMV3_PDL=0 timeout 60 "$B/cudabench" -m 1,4,16 -sweep=false >"$O/bench_nopdl.txt" 2>&1; echo "rc=$?"
DSV4GO_GEMV3=0 timeout 60 "$B/cudabench" -m 1,4,16 -sweep=false >"$O/bench_prev.txt" 2>&1; echo "rc=$?"
echo "== cudabench M <= 16: the next grid scheduled at the wait (DSV4GO_GEMV3_LD=0)"
DSV4GO_GEMV3_LD=0 timeout 60 "$B/cudabench" -m 1,4,16 -sweep=false -grouped=false >"$O/bench_ld0.txt" 2>&1; echo "rc=$?"
echo "== cudabench grouped MoE launches: all on the streaming GEMV (DSV4GO_GEMV3_GROUPED=1), all on the earlier kernel (=0)"
DSV4GO_GEMV3_GROUPED=1 timeout 60 "$B/cudabench" -m 1,4,16 -sweep=false -single=false >"$O/bench_grouped.txt" 2>&1; echo "rc=$?"
DSV4GO_GEMV3_GROUPED=0 timeout 60 "$B/cudabench" -m 1,4,16 -sweep=false -single=false >"$O/bench_grouped0.txt" 2>&1; echo "rc=$?"

echo "== cudabench M = 2048 without the large-M x pre-pass under graph capture (DSV4GO_QGEMM_XPERM_GRAPH=0)"
DSV4GO_QGEMM_XPERM_GRAPH=0 timeout 60 "$B/cudabench" -m 2048 -sweep=false -grouped=false >"$O/bench_xpgraph.txt" 2>&1; echo "rc=$?"

echo "== torch comparator"
PYTHONUNBUFFERED=1 timeout 120 python3 tools/cuda_bench.py --m 1,4,16,256,2048 >"$O/torch.txt" 2>&1; echo "rc=$?"

echo "== summary"
grep -E '^device|^device-to-device' "$O/bench.txt"
grep -E '^\| .* \| (1|4|16|2048) \|' "$O/bench.txt"
echo "-- predecode kernel off"
grep -E '^\| (expert|attn).* \| (1|4|16) \|' "$O/bench_pd0.txt"
echo "-- isolated launches"
grep -E '^\| (expert|attn).* \| (1|4|16) \|' "$O/bench_nopdl.txt"
echo "-- previous dispatch"
grep -E '^\| (expert|attn).* \| (1|4|16) \|' "$O/bench_prev.txt"
echo "-- grouped: default | DSV4GO_GEMV3_GROUPED=1 | DSV4GO_GEMV3_GROUPED=0"
grep -E '^\| 6 experts' "$O/bench.txt" "$O/bench_grouped.txt" "$O/bench_grouped0.txt" | sed 's|^.*/||'
echo "-- next grid scheduled at the wait (LD=0)"
grep -E '^\| (expert|attn).* \| (1|4|16) \|' "$O/bench_ld0.txt"
echo "-- M = 2048 without the x pre-pass under capture (XPERM_GRAPH=0)"
grep -E '^\| .* \| 2048 \|' "$O/bench_xpgraph.txt"
echo "-- launch timeline (tools/cuda_stream_trace.cu)"
cat "$O/stream_trace.txt"
echo "-- launch timeline, predecode kernel off"
cat "$O/stream_trace0.txt"
echo "-- decode arithmetic alone"
cat "$O/decode_probe.txt"
echo "-- ceiling"
grep -E 'copy|empty|\| (1.18|4.72|18.90) \| [12] \|' "$O/ceiling.txt"
echo "-- torch"
grep -E 'copy|bf16 matmul|dense' "$O/torch.txt" | head -40
date -u

#!/usr/bin/env bash
# tools/cuda_bench_run.sh: everything the CUDA backend needs from one device call, in order:
# conformance (default dispatch: predecode / streaming decode GEMV, wgmma for large M; then,
# in one log, the decode tests with grouped launches on the earlier kernel and on the streaming
# kernel's power-of-two layout, the earlier decode kernels,
# the predecode kernel off / with x per unit / with x first / with one row tile per block, the
# large-M split-K reduced by clusters or atomics, x by tensor-map copies in natural order on
# every tile (no fallback) and never (session 7's paths), each also with the 64 x 128 or
# 128 x 64 tiles forced on every case, the 64 x 128 tiles with each ring-slot release, the
# 128 x 128 tiles forced, and captured graphs without the pre-pass's allocation),
# the large-M call split into its
# x pre-pass and GEMM (tools/cuda_large_parts.cu), its per-chunk timeline
# (tools/cuda_large_trace.cu), the read-only ceiling
# (tools/cuda_ceiling.cu), the least time of a dependent launch (tools/cuda_floor.cu), x's
# latency behind weight loads (tools/cuda_xlat.cu), the decode
# arithmetic alone (tools/cuda_decode_probe.cu), the decode
# GEMVs' launch timeline (tools/cuda_stream_trace.cu, also with the predecode kernel off), the
# full cudabench table, a layer's MoE launches for M tokens routed top-6 over 256 experts, the
# M <= 16 rows again with the predecode kernel off
# (DSV4GO_GEMV3_PREDEC=0: session 6's change undone) and with the earlier dispatch
# (DSV4GO_GEMV3=0), the grouped MoE launches on the earlier split-K kernel
# (DSV4GO_GEMV3_GROUPED=0), and torch's comparator. (Session 5's version also ran the
# isolated-launch, LD=0, whole-ring-first, math-off and grouped-knob rows: git history.) Logs go
# to $OUT (or /tmp/cudaout; the device tool returns at most 8 files, so pack them first there);
# a summary is printed last.
# Usage on the GPU machine, after `make cuda-bins` here (carry out/cuda):
#   bash tools/cuda_bench_run.sh
# PART=conf runs only the conformance part, PART=bench everything after it (two device calls
# when one would run past the device tool's 10-minute limit).
set -uo pipefail
B=${BIN:-out/cuda}
O=${OUT:-/tmp/cudaout}
PART=${PART:-all}
mkdir -p "$O"
export DSV4GO_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,clocks.mem,temperature.gpu --format=csv,noheader
date -u

if [ "$PART" != bench ]; then

echo "== conformance, default dispatch: all tests"
timeout 200 "$B/kernels-cuda.test" -test.count=1 -test.v >"$O/conf.txt" 2>&1
echo "rc=$?"; grep -E '^(--- |ok|FAIL|PASS)' "$O/conf.txt"
: >"$O/conf_variants.txt"
for v in "DSV4GO_GEMV3_SPLIT=0" "DSV4GO_GEMV3_DEPTH=2" "DSV4GO_GEMV3_GROUPED=0" "DSV4GO_GEMV3_FLAT=0" "DSV4GO_GEMV3_READY=0" "DSV4GO_GEMV3=0" "DSV4GO_GEMV3_PREDEC=0" "DSV4GO_GEMV3_PREDEC=1" "DSV4GO_GEMV3_PREDEC=2" "DSV4GO_GEMV3_PDRW=1" "DSV4GO_QGEMM_SPLITRED=0" "DSV4GO_QGEMM_XN=2" "DSV4GO_QGEMM_XN=2 DSV4GO_QGEMM_ALT=1" "DSV4GO_QGEMM_XN=2 DSV4GO_QGEMM_TILE=1" "DSV4GO_QGEMM_XN=0" "DSV4GO_QGEMM_XN=0 DSV4GO_QGEMM_ALT=1" "DSV4GO_QGEMM_XN=0 DSV4GO_QGEMM_TILE=1" "DSV4GO_QGEMM_ALT=1 DSV4GO_QGEMM_ALTREL=1" "DSV4GO_QGEMM_ALT=1 DSV4GO_QGEMM_ALTREL=0" "DSV4GO_QGEMM_T128=1" "DSV4GO_QGEMM_XPERM_GRAPH=0"; do
  case $v in
  *QGEMM_*) re='QGEMMLargeM|GraphLargeM' ;;
  *SPLIT*) re='QGEMMStream|QGEMMXRange|GEMVPath|GraphStreamChain' ;;
  *DEPTH*) re='QGEMMStream|QGEMMGrouped|GEMVPath|GraphStreamChain' ;;
  *GROUPED*|*FLAT*|*READY*) re='QGEMMGrouped|GraphMoEIDsReady|GraphDecodeStep' ;;
  *) re='QGEMMStream|QGEMMDecodeSplits|GEMVPath|GraphStreamChain' ;;
  esac
  env $v timeout 60 "$B/kernels-cuda.test" -test.count=1 -test.v -test.run "$re" >"$O/conf_v.txt" 2>&1
  rc=$?
  { echo "== $v rc=$rc"; grep -E '^(--- |ok|FAIL|PASS)' "$O/conf_v.txt"; } >>"$O/conf_variants.txt"
  echo "$v: rc=$rc $(grep -cE '^--- PASS' "$O/conf_v.txt") passed, $(grep -cE '^--- FAIL' "$O/conf_v.txt") failed"
done
rm -f "$O/conf_v.txt"
fi
[ "$PART" = conf ] && exit 0

echo "== large-M parts (tools/cuda_large_parts.cu): x pre-pass, GEMM, whole call"
timeout 60 "$B/large_parts" >"$O/large_parts.txt" 2>&1; echo "rc=$?"
echo "== large-M per-chunk timeline (tools/cuda_large_trace.cu)"
timeout 60 "$B/large_trace" >"$O/large_trace.txt" 2>&1; echo "rc=$?"
echo "== read-only ceiling; decode arithmetic alone (tools/cuda_decode_probe.cu)"
timeout 60 "$B/ceiling" >"$O/ceiling.txt" 2>&1; echo "rc=$?"
timeout 60 "$B/decode_probe" >"$O/decode_probe.txt" 2>&1; echo "rc=$?"
timeout 60 "$B/xlat" >"$O/xlat.txt" 2>&1; echo "rc=$?"
timeout 120 "$B/floor" >"$O/floor.txt" 2>&1; echo "rc=$?"
timeout 60 "$B/clusters" >"$O/clusters.txt" 2>&1; echo "rc=$?"
timeout 60 "$B/stream_trace" >"$O/stream_trace.txt" 2>&1; echo "rc=$?"
DSV4GO_GEMV3_PREDEC=0 timeout 60 "$B/stream_trace" >"$O/stream_trace0.txt" 2>&1; echo "rc=$?"

echo "== cudabench, default dispatch, full table"
timeout 150 "$B/cudabench" -sweep=false -routed=false >"$O/bench.txt" 2>&1; echo "rc=$?"
echo "== cudabench MoE decode launches, routed: M tokens top-6 over 256 experts (and the grouped rows again)"
timeout 200 "$B/cudabench" -sweep=false -single=false -m 1,4,16 >"$O/bench_routed.txt" 2>&1; echo "rc=$?"

echo "== cudabench M <= 16: predecode kernel off (DSV4GO_GEMV3_PREDEC=0), earlier dispatch (DSV4GO_GEMV3=0)"
DSV4GO_GEMV3_PREDEC=0 timeout 60 "$B/cudabench" -m 1,4,16 -sweep=false -grouped=false >"$O/bench_pd0.txt" 2>&1; echo "rc=$?"
DSV4GO_GEMV3=0 timeout 60 "$B/cudabench" -m 1,4,16 -sweep=false -grouped=false >"$O/bench_prev.txt" 2>&1; echo "rc=$?"
echo "== cudabench grouped MoE launches: on the earlier split-K kernel (DSV4GO_GEMV3_GROUPED=0)"
DSV4GO_GEMV3_GROUPED=0 timeout 200 "$B/cudabench" -m 1,4,16 -sweep=false -single=false >"$O/bench_grouped.txt" 2>&1; echo "rc=$?"


echo "== torch comparator"
PYTHONUNBUFFERED=1 timeout 120 python3 tools/cuda_bench.py --m 1,4,16,256,2048 >"$O/torch.txt" 2>&1; echo "rc=$?"

echo "== summary"
grep -E '^device|^device-to-device' "$O/bench.txt"
grep -E '^\| .* \| (1|4|16|256|2048) \|' "$O/bench.txt"
echo "-- predecode kernel off"
grep -E '^\| (expert|attn).* \| (1|4|16) \|' "$O/bench_pd0.txt"
echo "-- earlier dispatch (DSV4GO_GEMV3=0)"
grep -E '^\| (expert|attn).* \| (1|4|16) \|' "$O/bench_prev.txt"
echo "-- grouped: default | DSV4GO_GEMV3_GROUPED=0"
grep -E '^\| [0-9]+ expert' "$O/bench.txt" "$O/bench_grouped.txt" | sed 's|^.*/||'
echo "-- routed MoE launches: default | DSV4GO_GEMV3_GROUPED=0"
grep -E '^\| w(1|2)' "$O/bench_routed.txt" "$O/bench_grouped.txt" | sed 's|^.*/||'
echo "-- launch timeline (tools/cuda_stream_trace.cu)"
cat "$O/stream_trace.txt"
echo "-- launch timeline, predecode kernel off"
cat "$O/stream_trace0.txt"
echo "-- x behind the weight loads (tools/cuda_xlat.cu)"
cat "$O/xlat.txt"
echo "-- decode arithmetic alone"
cat "$O/decode_probe.txt"
echo "-- large-M parts"
cat "$O/large_parts.txt"
echo "-- large-M per-chunk timeline"
cat "$O/large_trace.txt"
echo "-- the least time of a dependent launch (tools/cuda_floor.cu)"
cat "$O/floor.txt"
echo "-- cluster launches (tools/cuda_clusters.cu)"
cat "$O/clusters.txt"
echo "-- ceiling"
grep -E 'copy|empty|\| (1.18|4.72|18.90) \| [12] \|' "$O/ceiling.txt"
echo "-- torch"
grep -E 'copy|bf16 matmul|dense' "$O/torch.txt" | head -40
date -u

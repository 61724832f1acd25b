#!/usr/bin/env bash
# tools/cuda_bench_run.sh: everything the CUDA backend needs from one device call, in order:
# conformance (default dispatch: streaming decode GEMV, wgmma for large M; then, in one log,
# grouped launches all streaming / all earlier, the earlier decode kernels, no 4-deep rings,
# the next grid scheduled at the wait, no clusters, clusters of 2, the earlier grouped
# kernel's previous split-K target, no large-M x pre-pass under capture), the read-only ceiling (tools/cuda_ceiling.cu), the decode
# arithmetic alone (tools/cuda_decode_probe.cu), the streaming GEMV's launch timeline
# (tools/cuda_stream_trace.cu), the full cudabench table, the M <= 16
# rows again with the streaming GEMV launched without programmatic dependent launch
# (DSV4GO_GEMV3_PDL=0: isolated launches), with the previous default dispatch (DSV4GO_GEMV3=0),
# with the whole weight ring issued before the wait (DSV4GO_GEMV3_PRE=6), with this round's
# dispatch changes undone (DSV4GO_GEMV3_LD=0: the next grid scheduled at the wait;
# DSV4GO_GEMV3_CL=1 DSV4GO_GEMV3_SMALL=0: no clusters, no 4-deep rings) and with the math off
# (DSV4GO_GEMV3_PROBE=1), the grouped MoE launches all on the streaming GEMV
# (DSV4GO_GEMV3_GROUPED=1) and all on the earlier kernel (=0) (which, for FP4, also with its
# previous split-K target and with a cluster reduction), M = 2048 without the x pre-pass under
# capture (DSV4GO_QGEMM_XPERM_GRAPH=0), and torch's comparator. Logs go
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
for v in "DSV4GO_GEMV3_GROUPED=1" "DSV4GO_GEMV3_GROUPED=0" "DSV4GO_GEMV3=0" "DSV4GO_GEMV3_SMALL=0" "DSV4GO_GEMV3_LD=0" "DSV4GO_GEMV3_CL=1" "DSV4GO_GEMV3_CL=2" "DSV4GO_GEMV_BPS=4" "DSV4GO_QGEMM_XPERM_GRAPH=0"; do
  env $v timeout 40 "$B/kernels-cuda.test" -test.count=1 -test.v -test.run 'QGEMMStream|QGEMMGrouped|QGEMMDecodeSplits|Graph' >"$O/conf_v.txt" 2>&1
  rc=$?
  { echo "== $v rc=$rc"; grep -E '^(--- |ok|FAIL|PASS)' "$O/conf_v.txt"; } >>"$O/conf_variants.txt"
  echo "$v: rc=$rc $(grep -cE '^--- PASS' "$O/conf_v.txt") passed, $(grep -cE '^--- FAIL' "$O/conf_v.txt") failed"
done
rm -f "$O/conf_v.txt"

echo "== read-only ceiling; decode arithmetic alone (tools/cuda_decode_probe.cu)"
timeout 60 "$B/ceiling" >"$O/ceiling.txt" 2>&1; echo "rc=$?"
timeout 60 "$B/decode_probe" >"$O/decode_probe.txt" 2>&1; echo "rc=$?"
timeout 60 "$B/stream_trace" >"$O/stream_trace.txt" 2>&1; echo "rc=$?"

echo "== cudabench, default dispatch, full table"
timeout 150 "$B/cudabench" -sweep=false >"$O/bench.txt" 2>&1; echo "rc=$?"

echo "== cudabench M <= 16: isolated launches (DSV4GO_GEMV3_PDL=0), previous dispatch (DSV4GO_GEMV3=0)"
DSV4GO_GEMV3_PDL=0 timeout 60 "$B/cudabench" -m 1,4,16 -sweep=false >"$O/bench_nopdl.txt" 2>&1; echo "rc=$?"
DSV4GO_GEMV3=0 timeout 60 "$B/cudabench" -m 1,4,16 -sweep=false >"$O/bench_prev.txt" 2>&1; echo "rc=$?"
echo "== cudabench NVFP4 M <= 16: whole ring issued before the wait (DSV4GO_GEMV3_PRE=6, the previous order); math off (DSV4GO_GEMV3_PROBE=1)"
DSV4GO_GEMV3_PRE=6 timeout 60 "$B/cudabench" -formats NVFP4 -m 1,4,16 -sweep=false -grouped=false >"$O/bench_pre6.txt" 2>&1; echo "rc=$?"
DSV4GO_GEMV3_PROBE=1 timeout 60 "$B/cudabench" -formats NVFP4 -m 1 -sweep=false -grouped=false >"$O/bench_probe.txt" 2>&1; echo "rc=$?"
echo "== cudabench M <= 16: this round's dispatch undone (DSV4GO_GEMV3_LD=0; DSV4GO_GEMV3_CL=1 DSV4GO_GEMV3_SMALL=0)"
DSV4GO_GEMV3_LD=0 timeout 60 "$B/cudabench" -m 1,4,16 -sweep=false -grouped=false >"$O/bench_ld0.txt" 2>&1; echo "rc=$?"
DSV4GO_GEMV3_CL=1 DSV4GO_GEMV3_SMALL=0 timeout 60 "$B/cudabench" -m 1,4,16 -sweep=false -grouped=false >"$O/bench_nocl.txt" 2>&1; echo "rc=$?"
echo "== cudabench grouped MoE launches: all on the streaming GEMV (DSV4GO_GEMV3_GROUPED=1), all on the earlier kernel (=0)"
DSV4GO_GEMV3_GROUPED=1 timeout 60 "$B/cudabench" -m 1,4,16 -sweep=false -single=false >"$O/bench_grouped.txt" 2>&1; echo "rc=$?"
DSV4GO_GEMV3_GROUPED=0 timeout 60 "$B/cudabench" -m 1,4,16 -sweep=false -single=false >"$O/bench_grouped0.txt" 2>&1; echo "rc=$?"
echo "== cudabench grouped FP4 launches on the earlier kernel: the previous split-K target (DSV4GO_GEMV_BPS=4), split K reduced in a cluster (DSV4GO_GEMV_CLUSTER=1)"
for v in "DSV4GO_GEMV_BPS=4" "DSV4GO_GEMV_CLUSTER=1"; do
  echo "-- $v" >>"$O/bench_grouped_knobs.txt"
  env $v timeout 60 "$B/cudabench" -formats NVFP4,MXFP4 -m 1,4,16 -sweep=false -single=false 2>&1 | grep -E '^\| 6 experts' >>"$O/bench_grouped_knobs.txt"; echo "rc=$?"
done

echo "== cudabench M = 2048 without the large-M x pre-pass under graph capture (DSV4GO_QGEMM_XPERM_GRAPH=0)"
DSV4GO_QGEMM_XPERM_GRAPH=0 timeout 60 "$B/cudabench" -m 2048 -sweep=false -grouped=false >"$O/bench_xpgraph.txt" 2>&1; echo "rc=$?"

echo "== torch comparator"
PYTHONUNBUFFERED=1 timeout 120 python3 tools/cuda_bench.py --m 1,4,16,256,2048 >"$O/torch.txt" 2>&1; echo "rc=$?"

echo "== summary"
grep -E '^device|^device-to-device' "$O/bench.txt"
grep -E '^\| .* \| (1|4|16|2048) \|' "$O/bench.txt"
echo "-- isolated launches"
grep -E '^\| (expert|attn).* \| (1|4|16) \|' "$O/bench_nopdl.txt"
echo "-- previous dispatch"
grep -E '^\| (expert|attn).* \| (1|4|16) \|' "$O/bench_prev.txt"
echo "-- grouped: default | DSV4GO_GEMV3_GROUPED=1 | DSV4GO_GEMV3_GROUPED=0"
grep -E '^\| 6 experts' "$O/bench.txt" "$O/bench_grouped.txt" "$O/bench_grouped0.txt" | sed 's|^.*/||'
echo "-- next grid scheduled at the wait (LD=0)"
grep -E '^\| (expert|attn).* \| (1|4|16) \|' "$O/bench_ld0.txt"
echo "-- no clusters, no 4-deep rings (CL=1 SMALL=0)"
grep -E '^\| attn w(kv|o_b).* \| (1|4|16) \||^\| expert w2.* \| 16 \|' "$O/bench_nocl.txt"
echo "-- grouped FP4, earlier kernel: previous split-K target / cluster reduction"
cat "$O/bench_grouped_knobs.txt"
echo "-- whole ring before the wait (PRE=6)"
grep -E '^\| (expert|attn).* \| (1|4|16) \|' "$O/bench_pre6.txt"
echo "-- math off (PROBE=1)"
grep -E '^\| (expert|attn).* \| 1 \|' "$O/bench_probe.txt"
echo "-- M = 2048 without the x pre-pass under capture (XPERM_GRAPH=0)"
grep -E '^\| .* \| 2048 \|' "$O/bench_xpgraph.txt"
echo "-- launch timeline (tools/cuda_stream_trace.cu)"
cat "$O/stream_trace.txt"
echo "-- decode arithmetic alone"
cat "$O/decode_probe.txt"
echo "-- ceiling"
grep -E 'copy|empty|\| (1.18|4.72|18.90) \| [12] \|' "$O/ceiling.txt"
echo "-- torch"
grep -E 'copy|bf16 matmul|dense' "$O/torch.txt" | head -40
date -u

#!/usr/bin/env bash
# tools/cuda_sass_check.sh: fails when a kernel of the CUDA library loads global memory (LDG,
# not the cp.async LDGSTS) before its griddepcontrol.wait (SASS ACQBULK). Kernels launched with
# programmatic dependent launch may run that part while the previous kernel still writes its
# output, so only weights (uploaded once, read with cp.async) may be read there; ptxas may
# hoist read-only (ld.global.nc) loads of a `const __restrict__` pointer above the wait, which
# is how an x load got there once (REVIEW6, session 6). Layout order stands for program order:
# the prologues are straight-line code. Loads coherent at device scope (LDG.E.STRONG.GPU, from
# ld.relaxed.gpu) are deliberate: a grouped launch whose caller declared its expert ids ready
# (DSV4C_IDS_READY) reads them before the wait.
# Usage: tools/cuda_sass_check.sh [objects...] (default: kernels/cuda/lib/obj/*.o); needs
# cuobjdump (CUDA toolkit, or the nvidia-cuda-cuobjdump wheel) on PATH or in $CUOBJDUMP.
set -uo pipefail
CUOBJDUMP=${CUOBJDUMP:-cuobjdump}
objs=("$@")
[ ${#objs[@]} -eq 0 ] && objs=(kernels/cuda/lib/obj/*.o)
bad=0
for o in "${objs[@]}"; do
  "$CUOBJDUMP" -sass "$o" | grep -v '^\s*/\* 0x' | awk -v obj="$o" '
    function flush() { if (f != "" && acq && pre) { printf "%s: %d global loads before griddepcontrol.wait in %s\n", obj, pre, f; bad = 1 } }
    /Function : / { flush(); f = $3; acq = 0; pre = 0; next }
    /ACQBULK/ { acq = 1 }
    !acq && /LDG\.E/ && !/LDGSTS/ && !/STRONG\.GPU/ { pre++ }
    END { flush(); exit bad }' || bad=1
done
[ $bad -eq 0 ] && echo "sass check: no global load before griddepcontrol.wait (${#objs[@]} objects)"
exit $bad

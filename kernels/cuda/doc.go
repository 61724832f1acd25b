// Package cuda is the CUDA backend of package kernels: a device runtime (device selection,
// a stream-ordered memory pool, streams, events, CUDA graph capture and replay), weights
// uploaded once in a tile layout, and kernels for Hopper (sm_90) and newer: weight-only
// NVFP4, MXFP4 and FP8-block GEMV/GEMM that dequantize in registers into bf16 mma.sync
// tensor-core instructions, RMSNorm, interleaved RoPE, softmax, clamped SwiGLU, top-k, the
// DeepSeek-V4 sqrt-softplus router and embedding gather.
//
// Build: the kernels are CUDA C++ in csrc/, compiled by nvcc into lib/libdsv4cuda.a
// (`make cuda`; on machines without a toolkit .ci/cuda-build installs the pinned nvcc wheels
// from PyPI), then linked through cgo when building with `-tags cuda`. Without the tag (or
// with CGO_ENABLED=0) the package is pure Go: every entry point returns ErrNoCUDA, and the
// packing functions (PackNVFP4, PackMXFP4, PackFP8Block) still work.
//
// Tile layout of a packed weight [N][K]: rows padded to NPad (multiple of 64); tiles of 16
// rows x 64 inputs in row-tile-major order (tile (rt, kt) at index rt*K/64 + kt). Within a
// tile, lane l of a warp owns bytes [16l, 16l+16) (E2M1) or [32l, 32l+32) (E4M3): for each of
// the tile's four k16 steps, the eight values of its mma.sync m16n8k16 A fragment (rows
// l/4 and l/4+8, inputs 2(l%4)+{0,1} and +8). E2M1 words are bit-permuted (see e2m1Bit) so
// that shifts (left shifts but one, run as integer multiplies on the FMA pipe) and masks
// yield bf16 numbers; scales are re-encoded as 8-bit codes that
// one integer multiply-add expands to a bf16 pair (NVFP4: (E+9)<<3|mantissa; UE8M0: the
// exponent shifted by a per-tensor offset). Dequantization is exact: every product has at
// most 6 significant bits, which bf16 holds; the remaining power of two and NVFP4's global
// scale are Packed.Alpha, applied to the float32 accumulators.
//
// Decode (M <= 16 tokens) of one small FP4 matrix (at most twice as many 16-row tiles as SMs,
// or fewer with K split over a thread-block cluster, and at most 4 chunks of 128 inputs per
// K-slice warp: expert w1/w3 and w2, wkv) uses a predecode GEMV (csrc/qgemv_stream.cu):
// each block issues all its weights and decodes them into bf16 MMA fragments (shared memory
// and registers) before waiting for the previous kernel, so that after the wait only x's loads,
// the MMAs and the K-slice reduction remain; the next GEMV is scheduled at block start.
// Decode (M <= 16 tokens) of other single matrices uses a streaming GEMV (same file): at
// most two blocks per SM, each warp streams its units of weights through its own cp.async
// ring, issues the first ones before waiting for the previous kernel (programmatic dependent
// launch: the next GEMV of a CUDA graph is already scheduled while this one drains), keeps
// split-K inside the block, or inside a thread-block cluster when the matrix has too few row
// tiles to occupy the SMs (no memset node, no atomics, deterministic), and stages x with
// 4-deep rings when x is too large for 8-deep ones. Grouped MoE launches use it in a balanced
// layout: one wave of blocks, each owning a contiguous run of one expert's row tiles whose
// units its 8 warps split evenly (partial row tiles meet in shared memory, added in a fixed
// order), with x loaded ahead of the first weights; when the caller declares the expert ids
// ready (GroupedOptions.IDsReady: written before the previous launch began), the ids and the
// first weights go out before the wait, as for one matrix; with GroupedOptions.SwiGLU a launch
// stages the clamped SwiGLU of float32 gate / up rows as its x (the routed w2 right after
// w1/w3). Stream.MoE runs a routed MoE layer (w1/w3, SwiGLU, w2) in two launches: for FP4
// each block of its w1/w3 launch streams the same rows of w1 and then w3, keeps them in shared
// memory and writes their bf16 SwiGLU, and w2 follows on it (DSV4GO_MOE_FORM=1..4 forces one of
// its forms, see dsv4c_moe in csrc/qgemm.cu). Shapes it declines (x larger than its
// shared memory, too few row tiles and no cluster size that fixes it) use the earlier kernels of
// csrc/qgemm.cu. Large M on compute capability 9.0 uses wgmma (csrc/qgemm_large.cu,
// sm_90a). Timings on the H200 are in BENCHMARKS.md ("CUDA (H200)"). Environment switches
// for benchmarks: DSV4GO_GEMV3_PREDEC=0 turns the predecode GEMV off (1 / 2: x loaded per unit /
// all first, by default first at M <= 2), DSV4GO_GEMV3_PDRW=1 keeps it at one row tile per
// block, DSV4GO_GEMV3_PDLD=1 / 2 schedules the next grid at its wait / after it,
// DSV4GO_GEMV3_PREDEC16=0 keeps M > 8 off it;
// DSV4GO_GEMV3=0 turns the streaming and predecode GEMVs off, DSV4GO_GEMV3_PDL=0 launches it
// without programmatic dependent launch, DSV4GO_GEMV3_DEPTH=2 / DSV4GO_GEMV3_UP=1 /
// DSV4GO_GEMV3_BPS=n change its ring depth, units per iteration and blocks per SM,
// DSV4GO_GEMV3_SPLIT=0 keeps a warp's last loop step whole (one matrix),
// DSV4GO_GEMV3_PRE=n the units issued before the wait, DSV4GO_GEMV3_LD=0 / 1 schedules the
// next grid at the wait / once x is staged, DSV4GO_GEMV3_CL=n sets the cluster size of its K
// split (1: none), DSV4GO_GEMV3_CLA=n launches the grids without a K split in clusters of n
// blocks they do not use (default: 2 for the predecode kernel at M = 9..16, else 1: none),
// DSV4GO_GEMV3_SMALL=0 turns the 4-deep rings off, DSV4GO_GEMV3_GROUPED=0
// keeps grouped launches off it, DSV4GO_GEMV3_FLAT=0 puts them in its power-of-two layout
// (whole row tiles per warp), DSV4GO_GEMV3_GPRE=n sets the units they issue before staging
// x, DSV4GO_GEMV3_GXF=0 loads x after those, DSV4GO_GEMV3_RPRE=n sets the units issued before
// the wait with ids declared ready, DSV4GO_GEMV3_READY=0 ignores that declaration,
// DSV4GO_GEMV3_FLATW=0 / DSV4GO_GEMV3_FLATC=n set the balanced layout's waves (one) and its
// makespan model's per-block start cost (row tiles); DSV4GO_GEMV_OLD=1 / DSV4GO_GEMV2_ALL=1 force one
// earlier decode kernel, DSV4GO_PDL=1 enables programmatic dependent launch for those,
// DSV4GO_GEMV_BPS=n sets their split-K target (blocks per SM); DSV4GO_QGEMM_WGMMA=0 keeps
// large M on mma.sync, DSV4GO_QGEMM_XPERM=0 / 1 turns its x pre-pass off / on for every
// shape, DSV4GO_QGEMM_XPERM_GRAPH=0 skips the pre-pass while a stream is being captured
// (by default its buffer is then a graph allocation node and free node: such a graph cannot be
// embedded with cudaGraphAddChildGraphNode, only moved into a parent), DSV4GO_QGEMM_TILE=0 / 1
// never / always uses its 128 x 64 tiles, DSV4GO_QGEMM_ALT=0 / 1 its 64 x 128 tiles
// (DSV4GO_QGEMM_ALTXP=0 / 1: their pre-pass off / on), DSV4GO_QGEMM_XN=0 / 1 never / always
// loads x in natural order by tensor-map copies with A decoded in natural order (default: all
// but FP4 matrices of more than 2,048 rows where the pre-pass would run, and where XPERM=1 or
// ALTXP=1 forces the pre-pass; so XPERM=0 now means this path there, not the 4-byte copies; 2:
// always, failing instead of falling back), DSV4GO_QGEMM_SPLITRED=0 reduces split-K in clusters or with atomics
// instead of the scratch buffer.
//
// Errors from CUDA are *Error values carrying the operation, the cudaError_t code and its
// name; shape problems match ErrShape with errors.Is.
//
// Sources of the math: NVFP4 (ModelOpt convention) and MXFP4/FP8 (DeepSeek's convert.py)
// dequantization as documented in docs/dsv4-formats.md; mma.sync fragment layouts from the
// PTX ISA (warp-level matrix fragments for m16n8k16).
package cuda

// Package kernels holds the numerical operations of the DeepSeek-V4 forward pass.
//
// The functions in this package are the pure-Go CPU backend: float32 in, float32 out,
// row-major slices with explicit shapes, no hidden state and no allocation in the hot
// paths. The large products (MatMul, MatVec) split their output rows over all cores
// (runtime.GOMAXPROCS goroutines); the small per-token operations run on the caller's
// goroutine. Backend is the same operation set as an interface, so that a CUDA backend
// (package kernels/cuda, build tag "cuda") can implement it and be checked op by op
// against CPU.
//
// Conventions shared by every op:
//   - A weight matrix W of a linear layer is stored as in PyTorch's nn.Linear: [out][in]
//     row-major, so y = W·x means y[o] = sum_i W[o*in+i] * x[i].
//   - Activations are [rows][cols] row-major.
//   - Shapes are given as ints; a call whose slices are shorter than the shapes imply
//     panics with a message naming the op (a programming error inside dsv4, never user
//     input: dsv4 validates shapes at load time).
//
// Weights are dequantized to float32 once, at load (see dsv4): the CPU kernels read only
// float32. That costs 4 bytes per parameter (a tiny test model: a few MiB; one
// V4-Flash-sized layer: 27 GB with its 256 experts; V4-Flash, 284 B parameters: 1.1 TB,
// which no CPU host of this project holds anyway), and buys the fastest CPU inner loop
// (no per-use decode of FP8/FP4 blocks) and bit-stable results. On-the-fly decoding
// would cut resident memory 2-8x but adds work to every multiply-add of a loop that is
// already compute-bound at prefill; it is the GPU backend's job.
//
// MatMul is batch invariant: every output accumulates in the same order whatever the
// number of rows, so a row's result depends only on that row (a sequence gets
// bit-identical logits alone or batched, prefilled at once or token by token). The
// default build is portable scalar Go; built with GOEXPERIMENT=simd on amd64 with AVX2
// and FMA, the MatMul micro-kernels use 8-wide fused multiply-adds (about 3x the
// GFLOP/s; see BENCHMARKS.md). gorgonia.org/tensor was not used: its float32 matmul
// gives no batch-invariance guarantee and would add a dependency to the hot path.
package kernels

package cuda

// GroupedOptions modify a QGEMMGroupedOpts launch.
type GroupedOptions struct {
	// Accumulate: y += … instead of y = ….
	Accumulate bool
	// IDsReady promises that ids was completely written, and its writes visible, before the
	// previous launch on the stream began. That holds when at least one launch made without
	// programmatic dependent launch (any Stream op but the QGEMM family, e.g. RMSNorm or
	// SwiGLU) sits between the kernel that wrote ids and this launch, or when ids was
	// uploaded from the host: in a decode step's MoE layer, the router's output with the
	// SwiGLU of the shared expert before the routed w1/w3 (and so before a routed w2 that
	// stages its SwiGLU itself, see SwiGLU), or the routed SwiGLU launch before w2.
	// The streaming kernel then reads the ids (and the stack's per-expert alphas) and starts
	// loading the experts' weights before it waits for the previous kernel, as it does for
	// one matrix: one layer's 12 routed w1/w3 matrices at m = 1 take 16.2 µs instead of 18.2
	// on the H200 when the previous launch is a GEMV (BENCHMARKS.md, "CUDA (H200)", session
	// 10). It pays only after a launch of the QGEMM family (launched with programmatic
	// dependent launch): right after a plain op such as SwiGLU there is nothing to overlap,
	// and issuing weights ahead of x cost the routed w2 launch about 1 µs at m = 1 there.
	// Without the promise the ids are read after the wait. A broken promise reads stale
	// ids: wrong experts or skipped groups, never memory outside the stack (ids outside
	// [0, E) are still skipped). Ignored when ids is nil, for one group, and by the kernels
	// other than the streaming one.
	IDsReady bool
	// SwiGLU: x is not bf16 but float32 [2][groups][m][K] (16-byte aligned), group z's gate
	// rows at [0][z] and up rows at [1][z], and the launch stages silu(min(g, SwiGLULimit)) ·
	// clamp(u, ±SwiGLULimit) rounded to bf16 as its x (the math of Stream.SwiGLU; the same
	// bits in TestQGEMMGroupedSwiGLU). A w1/w3 grouped launch whose ids list every expert's
	// w1 and then every expert's w3 (w1/w3's N equal to this stack's K) writes that layout,
	// so the w2 launch can follow it directly, with no SwiGLU launch between them (which
	// would leave nothing for w2 to overlap: BENCHMARKS.md). A w1/w3 group skipped for an id
	// outside the stack leaves its rows unwritten, and w2 reads them as they are. groups ≥ 2;
	// a NaN limit is ErrShape. Where the streaming kernel declines (its balanced layout: x
	// and the partial-sum slots too large for shared memory, or DSV4GO_GEMV3_GROUPED=0 /
	// FLAT=0), a SwiGLU launch into stream-ordered scratch runs first (under capture: a
	// graph allocation and free node).
	SwiGLU bool
	// SwiGLULimit is the SwiGLU's clamp (≤ 0: none); V4 configs use swiglu_limit.
	SwiGLULimit float32
}

// MoEOptions modify a Stream.MoE launch.
type MoEOptions struct {
	// Accumulate: y += … instead of y = ….
	Accumulate bool
	// IDsReady: the promise of GroupedOptions.IDsReady, for ids.
	IDsReady bool
	// SwiGLULimit is the SwiGLU's clamp (≤ 0: none; NaN is ErrShape); V4 configs use
	// swiglu_limit.
	SwiGLULimit float32
}

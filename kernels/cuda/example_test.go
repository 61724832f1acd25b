package cuda_test

import (
	"errors"
	"fmt"

	"github.com/dsv4go/dsv4go/kernels/cuda"
)

// Packing an NVFP4 weight on the host (works in every build), then, where a GPU and the
// cuda build tag are present, uploading it once and running a decode-sized GEMM.
func ExamplePackNVFP4() {
	const n, k = 64, 128
	w := make([]byte, n*k/2)       // two E2M1 codes per byte, low nibble first
	scales := make([]byte, n*k/16) // one E4M3 scale per 16 inputs
	for i := range w {
		w[i] = 0x21 // codes 1 (0.5) and 2 (1.0)
	}
	for i := range scales {
		scales[i] = 0x38 // E4M3 1.0
	}
	p, err := cuda.PackNVFP4(w, scales, 0.5, n, k)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Format, p.NPad, len(p.Data), len(p.Scales), p.Alpha)

	dev, err := cuda.Open(0)
	if errors.Is(err, cuda.ErrNoCUDA) || err != nil {
		return // no CUDA in this build or no GPU here
	}
	defer dev.Close()
	wt, err := dev.UploadWeight(p) // once
	if err != nil {
		return
	}
	defer wt.Free()
	// x: bf16 [M][K] and y: float32 [M][N] device buffers, then per step:
	// dev.Stream().QGEMM(wt, x, y, M, false)

	// Output:
	// NVFP4 64 4096 512 64
}

// A routed MoE layer of a decode step through Stream.MoE: the layer's experts stacked once (w1
// and w3 in one stack: every w1, then every w3), a workspace per stream, then one call per step
// with the router's expert ids on the device.
func ExampleStream_MoE() {
	dev, err := cuda.Open(0)
	if err != nil {
		return // no CUDA in this build (cuda.ErrNoCUDA) or no GPU here
	}
	defer dev.Close()
	var w1s, w3s, w2s []*cuda.Packed // per expert, from cuda.PackNVFP4 (w1/w3 [I][H], w2 [H][I])
	if len(w1s) == 0 {
		return
	}
	w13, err := dev.UploadWeightStack(append(append([]*cuda.Packed{}, w1s...), w3s...))
	if err != nil {
		return
	}
	defer w13.Free()
	w2, err := dev.UploadWeightStack(w2s)
	if err != nil {
		return
	}
	defer w2.Free()
	const m, slots = 1, 6 // one token routed to 6 experts
	ws, err := dev.NewMoEWorkspace(m, slots, w13.N)
	if err != nil {
		return
	}
	defer ws.Free()
	// ids: int32 [slots] (the router's output), x: bf16 [slots][m][H], y: float32 [slots][m][H]
	// device buffers, then per step:
	// dev.Stream().MoE(w13, w2, ids, x, y, ws, m, slots, cuda.MoEOptions{IDsReady: true, SwiGLULimit: limit})
}

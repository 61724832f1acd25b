package dsv4

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// reportCPU adds the cpu-ms/op metric for the CPU time spent since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/1e6/float64(b.N), "cpu-ms/op")
}

// Benchmarks of the CPU forward pass. Results and the machine they ran on are recorded
// in BENCHMARKS.md ("## CPU forward").

func benchTinyNet(b *testing.B) (*network, []int32) {
	dir := filepath.Join("testdata", "forward", "mixed-hc4-yarn")
	return testNet(b, dir), readGolden(b, dir).Tokens
}

// BenchmarkTinyPrefill: prefill of 45 tokens on the tiny mixed-hc4-yarn config
// (4 layers: sliding, CSA, HCA, CSA; hidden 32; hc 4).
func BenchmarkTinyPrefill(b *testing.B) {
	n, ids := benchTinyNet(b)
	benchPrefill(b, n, ids)
}

// benchPrefill times prefills of ids into fresh sequences.
func benchPrefill(b *testing.B, n *network, ids []int32) {
	ctx := context.Background()
	b.ResetTimer()
	c0 := cpuTime()
	for b.Loop() {
		st := n.newState()
		if _, err := n.forward(ctx, []segment{{&st, ids}}, false); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(ids)*b.N)/b.Elapsed().Seconds(), "tokens/s")
	reportCPU(b, c0)
}

// BenchmarkTinyDecode: single-sequence decode steps on the tiny config, context 16..400.
func BenchmarkTinyDecode(b *testing.B) { benchTinyDecode(b, 1) }

// BenchmarkTinyDecodeBatch8: one Decode step over 8 sequences of different lengths.
func BenchmarkTinyDecodeBatch8(b *testing.B) { benchTinyDecode(b, 8) }

func benchTinyDecode(b *testing.B, batch int) {
	n, ids := benchTinyNet(b)
	ctx := context.Background()
	sts := make([]*SequenceState, batch)
	reset := func() {
		for i := range sts {
			st := n.newState()
			if _, err := n.forward(ctx, []segment{{&st, ids[:16+i]}}, false); err != nil {
				b.Fatal(err)
			}
			sts[i] = &st
		}
	}
	reset()
	step := 0
	c0 := cpuTime()
	for b.Loop() {
		if step == 384 {
			b.StopTimer()
			reset()
			step = 0
			b.StartTimer()
		}
		segs := make([]segment, batch)
		for i, st := range sts {
			segs[i] = segment{st, []int32{ids[(step+i)%len(ids)]}}
		}
		if _, err := n.forward(ctx, segs, false); err != nil {
			b.Fatal(err)
		}
		step++
	}
	b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "tokens/s")
	reportCPU(b, c0)
}

// randSource serves random float32 weights (uniform, scaled by 1/sqrt(fan-in)) for any
// name and shape: the synthetic checkpoint of the V4-Flash-sized layer benchmarks.
type randSource struct{ r *rand.Rand }

func (s randSource) float32s(name string, shape ...int) ([]float32, error) {
	n := 1
	for _, d := range shape {
		n *= d
	}
	out := make([]float32, n)
	scale := float32(1)
	switch {
	case strings.HasSuffix(name, "norm.weight"):
		for i := range out {
			out[i] = 1
		}
		return out, nil
	case len(shape) >= 2:
		scale = float32(math.Sqrt(3 / float64(shape[len(shape)-1])))
	default:
		scale = 0.1
	}
	x := s.r.Uint64()
	for i := range out {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		out[i] = (float32(x>>40)/float32(1<<24)*2 - 1) * scale
	}
	return out, nil
}

func (s randSource) int32s(name string, shape ...int) ([]int32, error) {
	n := 1
	for _, d := range shape {
		n *= d
	}
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i % 6)
	}
	return out, nil
}

// flashPhysicalExperts is how many distinct expert weight sets the V4-Flash-sized layer
// holds in memory: its 256 logical experts map onto them (e mod 16), because 256 real
// float32 experts (25.8 GB) do not fit this 24 GiB machine. A decode step still reads
// 6 distinct routed experts + the shared one, as V4-Flash does, so its bytes per token
// are those of the real layer.
const flashPhysicalExperts = 16

// flashLayer builds one V4-Flash-sized decoder layer (hidden 4096, 64 heads x 512,
// q_lora 1024, 8 output groups of 1024, 256 experts x 2048, top-6, 1 shared expert,
// hc 4; CSA with a 64-head lightning indexer, or HCA) with random weights, and a
// 1024-token vocabulary (the benchmark times a layer, not the 129280-row lm_head).
func flashLayer(b *testing.B, typ LayerType) *network {
	cfg, err := ParseConfig([]byte(fmt.Sprintf(`{"num_hidden_layers": 1, "vocab_size": 1024,
		"layer_types": [%q], "mlp_layer_types": ["moe"], "n_routed_experts": %d}`, typ, flashPhysicalExperts)))
	if err != nil {
		b.Fatal(err)
	}
	n, err := build(cfg, randSource{rand.New(rand.NewPCG(1, 2))})
	if err != nil {
		b.Fatal(err)
	}
	// widen the router to 256 logical experts over the physical ones
	m := &n.layers[0].moe
	const E = 256
	gate, _ := randSource{rand.New(rand.NewPCG(3, 4))}.float32s("router", E, cfg.HiddenSize)
	m.gate, m.bias = gate, make([]float32, E)
	for e := flashPhysicalExperts; e < E; e++ {
		m.gateUp = append(m.gateUp, m.gateUp[e%flashPhysicalExperts])
		m.down = append(m.down, m.down[e%flashPhysicalExperts])
	}
	m.E = E
	c := *cfg
	c.NRoutedExperts = E
	n.cfg = &c
	return n
}

func benchFlashDecode(b *testing.B, typ LayerType, ctxLen int) {
	n := flashLayer(b, typ)
	ctx := context.Background()
	ids := make([]int32, ctxLen+64)
	for i := range ids {
		ids[i] = int32(i*7919) % 1024
	}
	st := n.newState()
	if _, err := n.forward(ctx, []segment{{&st, ids[:ctxLen]}}, false); err != nil {
		b.Fatal(err)
	}
	snap := st.clone()
	step := 0
	b.ResetTimer()
	c0 := cpuTime()
	for b.Loop() {
		if step == 64 {
			st = *snap.clone()
			step = 0
		}
		if _, err := n.forward(ctx, []segment{{&st, ids[ctxLen+step : ctxLen+step+1]}}, false); err != nil {
			b.Fatal(err)
		}
		step++
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/token")
	reportCPU(b, c0)
}

// BenchmarkFlashLayerDecodeCSA: one decode step through one V4-Flash-sized CSA layer at
// context 128 (weights streamed per token: see flashLayer).
func BenchmarkFlashLayerDecodeCSA(b *testing.B) { benchFlashDecode(b, LayerCSA, 128) }

// BenchmarkFlashLayerDecodeHCA: the same for an HCA layer.
func BenchmarkFlashLayerDecodeHCA(b *testing.B) { benchFlashDecode(b, LayerHCA, 128) }

// BenchmarkFlashLayerPrefillCSA: a 64-token prefill through one V4-Flash-sized CSA layer.
func BenchmarkFlashLayerPrefillCSA(b *testing.B) {
	n := flashLayer(b, LayerCSA)
	ids := make([]int32, 64)
	for i := range ids {
		ids[i] = int32(i*7919) % 1024
	}
	benchPrefill(b, n, ids)
}

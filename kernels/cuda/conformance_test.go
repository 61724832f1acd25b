//go:build cuda && cgo

package cuda

// Conformance suite: every operation of the CUDA backend against the CPU backend (package
// kernels) or, for the quantized GEMMs, against dequantization by internal/numfmt plus a
// float64 matmul, on fresh random inputs (seeded from the clock; the seed is logged).
// Outputs are poisoned (NaN) before each run so unwritten elements fail.
//
// Tolerances (stated, with the reason):
//   - quantized GEMM: |y - ref| <= 2^-14 * sum_k |w x| + 1e-30 per element. Products of
//     the exact bf16 dequantized weight and the bf16 activation are exact in the tensor
//     cores; only the float32 accumulation (and split-K float32 atomics) round.
//   - float32 matmul, RMSNorm, softmax, SwiGLU: 1e-5 relative (float32 summation order and
//     expf/rsqrtf vs Go's float64 math).
//   - RoPE: 1e-6 absolute on |x| <= 1 (one fused multiply-add difference).
//   - TopK, router indices: exact; router weights 1e-5 relative.
// Run: go test -tags cuda ./kernels/cuda (skips when no GPU is present).

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsv4go/dsv4go/internal/numfmt"
	"github.com/dsv4go/dsv4go/kernels"
)

var testDev *Device

// randomStack uploads a stack of n random weights of case c (packRandom's).
func randomStack(t *testing.T, d *Device, r *rand.Rand, c qcase, n int) *WeightStack {
	t.Helper()
	ps := make([]*Packed, n)
	for i := range ps {
		ps[i], _ = packRandom(t, r, c)
	}
	ws, err := d.UploadWeightStack(ps)
	must(t, err)
	return ws
}

// allocator returns a function that allocates n bytes of d (n > 0) or fails t.
func allocator(t *testing.T, d *Device) func(n int) *Buffer {
	return func(n int) *Buffer {
		t.Helper()
		b, err := d.Alloc(int64(n))
		must(t, err)
		return b
	}
}

// newStream returns a new stream of d, closed when the test ends.
func newStream(t *testing.T, d *Device) *Stream {
	t.Helper()
	st, err := d.NewStream()
	must(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

func device(t *testing.T) *Device {
	t.Helper()
	if testDev != nil {
		return testDev
	}
	n, err := DeviceCount()
	if err != nil || n == 0 {
		if os.Getenv("DSV4GO_REQUIRE_GPU") != "" {
			t.Fatalf("no CUDA device: %v", err)
		}
		t.Skipf("no CUDA device: %v", err)
	}
	d, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	testDev = d
	return d
}

func rng(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
}

func randF32(r *rand.Rand, n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = (r.Float32()*2 - 1) * scale
	}
	return v
}

func poison(v []float32) {
	for i := range v {
		v[i] = float32(math.NaN())
	}
}

func relErr(got, want []float32) float64 {
	var num, den float64
	for i := range want {
		d := float64(got[i]) - float64(want[i])
		if math.IsNaN(float64(got[i])) {
			return math.Inf(1)
		}
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}

func TestCPUConformanceOps(t *testing.T) {
	d := device(t)
	r := rng(t)
	gpu := &HostBackend{Dev: d}
	cpu := kernels.CPU{}

	t.Run("MatMul", func(t *testing.T) {
		for _, s := range [][3]int{{1, 64, 96}, {5, 33, 17}, {64, 128, 256}} {
			m, n, k := s[0], s[1], s[2]
			x, w := randF32(r, m*k, 1), randF32(r, n*k, 1)
			want, got := make([]float32, m*n), make([]float32, m*n)
			poison(got)
			cpu.MatMul(want, x, w, m, n, k)
			gpu.MatMul(got, x, w, m, n, k)
			if e := relErr(got, want); e > 1e-5 || gpu.Err() != nil {
				t.Fatalf("%v: rel err %g (err %v)", s, e, gpu.Err())
			}
		}
	})
	t.Run("RMSNorm", func(t *testing.T) {
		for _, weighted := range []bool{true, false} {
			rows, n := 7, 4096
			x := randF32(r, rows*n, 3)
			var w []float32
			if weighted {
				w = randF32(r, n, 2)
			}
			want, got := make([]float32, rows*n), make([]float32, rows*n)
			poison(got)
			cpu.RMSNorm(want, x, w, rows, n, 1e-6)
			gpu.RMSNorm(got, x, w, rows, n, 1e-6)
			if e := relErr(got, want); e > 1e-5 || gpu.Err() != nil {
				t.Fatalf("weighted=%v: rel err %g (err %v)", weighted, e, gpu.Err())
			}
		}
	})
	t.Run("RoPEInterleaved", func(t *testing.T) {
		for _, sign := range []float32{1, -1} {
			rows, half := 64*3, 32
			x := randF32(r, rows*2*half, 1)
			ang := randF32(r, rows*half, 100)
			c, s := make([]float32, len(ang)), make([]float32, len(ang))
			for i, a := range ang {
				c[i], s[i] = float32(math.Cos(float64(a))), float32(math.Sin(float64(a)))
			}
			want := append([]float32(nil), x...)
			got := append([]float32(nil), x...)
			cpu.RoPEInterleaved(want, c, s, rows, half, sign)
			gpu.RoPEInterleaved(got, c, s, rows, half, sign)
			for i := range want {
				if math.Abs(float64(got[i]-want[i])) > 1e-6 || gpu.Err() != nil {
					t.Fatalf("sign %v: element %d: got %g want %g (err %v)", sign, i, got[i], want[i], gpu.Err())
				}
			}
		}
	})
	t.Run("Softmax", func(t *testing.T) {
		rows, n := 9, 1000
		x := randF32(r, rows*n, 20)
		for i := 0; i < n; i++ { // an all -Inf row
			x[3*n+i] = float32(math.Inf(-1))
		}
		want := append([]float32(nil), x...)
		got := append([]float32(nil), x...)
		cpu.Softmax(want, rows, n)
		gpu.Softmax(got, rows, n)
		if e := relErr(got, want); e > 1e-5 || gpu.Err() != nil {
			t.Fatalf("rel err %g (err %v)", e, gpu.Err())
		}
	})
	t.Run("SwiGLU", func(t *testing.T) {
		for _, limit := range []float32{10, 0} {
			n := 3*2048 + 5
			g, u := randF32(r, n, 30), randF32(r, n, 30)
			want, got := make([]float32, n), make([]float32, n)
			poison(got)
			cpu.SwiGLU(want, g, u, limit)
			gpu.SwiGLU(got, g, u, limit)
			if e := relErr(got, want); e > 1e-5 || gpu.Err() != nil {
				t.Fatalf("limit %v: rel err %g (err %v)", limit, e, gpu.Err())
			}
		}
	})
	t.Run("TopK", func(t *testing.T) {
		for _, c := range []struct {
			n, k int
			ties bool
		}{{256, 6, false}, {4096, 64, false}, {300, 20, true}} {
			s := randF32(r, c.n, 1)
			if c.ties {
				for i := range s {
					s[i] = float32(r.IntN(10))
				}
				s[7] = float32(math.NaN())
			}
			want, got := make([]int32, c.k), make([]int32, c.k)
			cpu.TopK(want, s, c.k)
			gpu.TopK(got, s, c.k)
			if gpu.Err() != nil {
				t.Fatal(gpu.Err())
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("n=%d k=%d: position %d: got %d want %d", c.n, c.k, i, got[i], want[i])
				}
			}
		}
	})
}

// refRouter is the DeepSeek-V4 gate composed from the CPU backend's TopK.
func refRouter(logits, bias []float32, n, k int, scale float32) ([]int32, []float32) {
	s := make([]float32, n)
	key := make([]float32, n)
	for i, l := range logits {
		sp := math.Log1p(math.Exp(float64(l)))
		if l > 20 {
			sp = float64(l)
		}
		s[i] = float32(math.Sqrt(sp))
		key[i] = s[i]
		if bias != nil {
			key[i] += bias[i]
		}
	}
	idx := make([]int32, k)
	kernels.TopK(idx, key, k)
	var sum float64
	for _, i := range idx {
		sum += float64(s[i])
	}
	w := make([]float32, k)
	for j, i := range idx {
		w[j] = float32(float64(s[i]) / (sum + 1e-20) * float64(scale))
	}
	return idx, w
}

func TestRouterAndEmbedding(t *testing.T) {
	d := device(t)
	r := rng(t)
	st := d.Stream()
	rows, n, k := 33, 256, 6
	logits, bias := randF32(r, rows*n, 4), randF32(r, n, 0.5)
	lb, _ := d.Alloc(int64(rows * n * 4))
	bb, _ := d.Alloc(int64(n * 4))
	ib, _ := d.Alloc(int64(rows * k * 4))
	wb, _ := d.Alloc(int64(rows * k * 4))
	defer func() { lb.Free(); bb.Free(); ib.Free(); wb.Free() }()
	must(t, lb.UploadF32(logits), bb.UploadF32(bias), st.Router(ib, wb, lb, bb, rows, n, k, 1.5))
	gi, gw := make([]int32, rows*k), make([]float32, rows*k)
	must(t, ib.DownloadI32(gi), wb.DownloadF32(gw))
	for row := 0; row < rows; row++ {
		wi, ww := refRouter(logits[row*n:(row+1)*n], bias, n, k, 1.5)
		for j := 0; j < k; j++ {
			if gi[row*k+j] != wi[j] {
				t.Fatalf("row %d pos %d: idx %d want %d", row, j, gi[row*k+j], wi[j])
			}
		}
		if e := relErr(gw[row*k:(row+1)*k], ww); e > 1e-5 {
			t.Fatalf("row %d: weights rel err %g", row, e)
		}
	}

	// embedding gather, bf16 and float32 tables
	vocab, dim, m := 1000, 4096, 17
	tab := randF32(r, vocab*dim, 1)
	tb16 := make([]byte, 2*len(tab))
	if err := numfmt.F32ToBF16Bytes(tb16, tab); err != nil {
		t.Fatal(err)
	}
	ids := make([]int32, m)
	for i := range ids {
		ids[i] = int32(r.IntN(vocab))
	}
	for _, isBF16 := range []bool{true, false} {
		var tbuf *Buffer
		var err error
		if isBF16 {
			tbuf, err = d.Alloc(int64(len(tb16)))
			must(t, err, tbuf.Upload(tb16))
		} else {
			tbuf, err = d.Alloc(int64(4 * len(tab)))
			must(t, err, tbuf.UploadF32(tab))
		}
		idb, _ := d.Alloc(int64(4 * m))
		yb, _ := d.Alloc(int64(4 * m * dim))
		must(t, idb.UploadI32(ids), st.Embedding(yb, tbuf, idb, isBF16, m, dim, vocab))
		got := make([]float32, m*dim)
		must(t, yb.DownloadF32(got))
		for i, id := range ids {
			for j := 0; j < dim; j++ {
				want := tab[int(id)*dim+j]
				if isBF16 {
					want = numfmt.BF16ToF32(numfmt.F32ToBF16(want))
				}
				if got[i*dim+j] != want {
					t.Fatalf("bf16=%v row %d col %d: got %g want %g", isBF16, i, j, got[i*dim+j], want)
				}
			}
		}
		tbuf.Free()
		idb.Free()
		yb.Free()
	}
}

func must(t *testing.T, errs ...error) {
	t.Helper()
	for _, e := range errs {
		if e != nil {
			t.Fatal(e)
		}
	}
}

// bf16Acts returns random activations as bf16 bytes and their float64 values.
func bf16Acts(r *rand.Rand, n int) ([]byte, []float64) { return bf16Of(randF32(r, n, 2)) }

// bf16Of returns f rounded to bf16, as bytes and as float64 values.
func bf16Of(f []float32) ([]byte, []float64) {
	b := make([]byte, 2*len(f))
	numfmt.F32ToBF16Bytes(b, f)
	v := make([]float64, len(f))
	for i := range v {
		v[i] = float64(numfmt.BF16ToF32(uint16(b[2*i]) | uint16(b[2*i+1])<<8))
	}
	return b, v
}

type qcase struct {
	f    Format
	n, k int
}

func packRandom(t *testing.T, r *rand.Rand, c qcase) (*Packed, []float64) {
	switch c.f {
	case NVFP4:
		w, s, g := randNVFP4(r, c.n, c.k)
		p, err := PackNVFP4(w, s, g, c.n, c.k)
		must(t, err)
		return p, refNVFP4(w, s, g, c.n, c.k)
	case MXFP4:
		w, s := randMXFP4(r, c.n, c.k)
		p, err := PackMXFP4(w, s, c.n, c.k)
		must(t, err)
		return p, refMXFP4(w, s, c.n, c.k)
	default:
		w, s := randFP8(r, c.n, c.k)
		p, err := PackFP8Block(w, s, c.n, c.k)
		must(t, err)
		return p, refFP8(w, s, c.n, c.k)
	}
}

func TestQGEMMConformance(t *testing.T) {
	d := device(t)
	r := rng(t)
	st := d.Stream()
	cases := []qcase{
		{NVFP4, 256, 512}, {NVFP4, 200, 1024}, {NVFP4, 2048, 4096},
		{MXFP4, 256, 512}, {MXFP4, 136, 2048},
		{FP8Block, 256, 512}, {FP8Block, 300, 1024},
		{NVFP4, 128, 8192}, {MXFP4, 136, 8192}, {FP8Block, 200, 8192}, // K >= 8192: FP4 takes 8 warps per block at M = 17..64
		{NVFP4, 4096, 2048}, // M = 100: 64 x 128 wgmma tiles, K unsplit (half a wave, 16 chunks)
	}
	ms := []int{1, 3, 8, 16, 17, 33, 40, 64, 65, 100, 300} // 40: a partial second group of 32 tokens
	for _, c := range cases {
		p, ref := packRandom(t, r, c)
		w, err := d.UploadWeight(p)
		must(t, err)
		for _, m := range ms {
			if c.n*c.k > 1<<20 && m != 1 && m != 16 && m != 64 && m != 65 && m != 100 {
				continue // keep the float64 reference affordable
			}
			for _, acc := range []bool{false, true} {
				splits := 0
				if m > 16 && m%2 == 1 {
					splits = -1 // odd M > 16: the large-M pipelined kernel from M = 33 (M <= 32 keeps the 32-token tiles)
				}
				runQGEMMCase(t, d, st, r, w, ref, c, m, acc, splits, nil)
			}
		}
		w.Free()
	}
}

// TestGraphDecodeStep captures RMSNorm -> gate/up QGEMM -> SwiGLU -> down QGEMM (one
// expert's FFN, as in a decode step) into a CUDA graph and checks that replays (one cgo
// call each) reproduce the eager result bit for bit.
func TestGraphDecodeStep(t *testing.T) {
	d := device(t)
	r := rng(t)
	st := newStream(t, d)
	const m, hid, inter = 4, 1024, 512
	p1, _ := packRandom(t, r, qcase{NVFP4, inter, hid})
	p3, _ := packRandom(t, r, qcase{NVFP4, inter, hid})
	p2, _ := packRandom(t, r, qcase{NVFP4, hid, inter})
	w1, err := d.UploadWeight(p1)
	must(t, err)
	w3, err := d.UploadWeight(p3)
	must(t, err)
	w2, err := d.UploadWeight(p2)
	must(t, err)
	alloc := allocator(t, d)
	x, xn := alloc(4*m*hid), alloc(2*m*hid)
	g, u, h := alloc(4*m*inter), alloc(4*m*inter), alloc(2*m*inter)
	y := alloc(4 * m * hid)
	must(t, x.UploadF32(randF32(r, m*hid, 2)))
	step := func() error {
		return firstErr(st.RMSNorm(nil, xn, x, nil, m, hid, 1e-6),
			st.QGEMM(w1, xn, g, m, false), st.QGEMM(w3, xn, u, m, false),
			st.SwiGLU(nil, h, g, u, m*inter, 10),
			st.QGEMM(w2, h, y, m, false))
	}
	must(t, step(), st.Sync())
	eager := make([]float32, m*hid)
	must(t, y.DownloadF32(eager))
	got := replayGraph(t, st, step, y, m*hid)
	// Split-K float32 atomics add in a different order between runs, and the bf16 rounding
	// of the SwiGLU output can then flip by one bf16 ulp (2^-8): allow 1e-2 relative (norm).
	if e := relErr(got, eager); e > 1e-2 {
		t.Fatalf("graph replay differs from eager: rel err %g", e)
	}
}

// TestQGEMMGroupedSwiGLU checks grouped launches whose x is the SwiGLU of float32 gate / up rows
// (GroupedOptions.SwiGLU) against Stream.SwiGLU into bf16 followed by the plain grouped launch:
// bit for bit on the streaming kernel (the same staged x, the same kernel), within the split-K
// atomics' reordering on the earlier kernel (DSV4GO_GEMV3_GROUPED=0: the fallback runs exactly
// that pair of launches); with and without clamp, ids ready or not, accumulate, every format.
func TestQGEMMGroupedSwiGLU(t *testing.T) {
	d := device(t)
	r := rng(t)
	st := newStream(t, d)
	ids := []int32{3, 0, -1, 4, 1} // group 2 skipped: its y is left as it was (or zeroed, below)
	g := len(ids)
	// 256 x 4096 at m = 16: x (128 KB) does not fit beside the streaming kernel's rings, so the
	// launch takes its fallback (a SwiGLU launch into scratch, then the grouped launch) with the
	// default switches too
	for _, c := range []qcase{{NVFP4, 2048, 512}, {MXFP4, 1024, 1024}, {FP8Block, 2048, 512}, {NVFP4, 256, 4096}} {
		ws := randomStack(t, d, r, c, 5)
		ms := []int{1, 3, 9}
		if c.k == 4096 {
			ms = []int{16}
		}
		for _, m := range ms {
			alloc := allocator(t, d)
			n := g * m * c.k
			gu, xb, ib, y, yw := alloc(8*n), alloc(2*n), alloc(4*g), alloc(4*g*m*c.n), alloc(4*g*m*c.n)
			must(t, gu.UploadF32(randF32(r, 2*n, 8)), ib.UploadI32(ids))
			gate, err1 := gu.Slice(0, int64(4*n))
			up, err2 := gu.Slice(int64(4*n), int64(4*n))
			must(t, err1, err2)
			for _, o := range []GroupedOptions{{SwiGLU: true, SwiGLULimit: 10}, {SwiGLU: true}, {SwiGLU: true, SwiGLULimit: 1.5, IDsReady: true, Accumulate: true}} {
				init := randF32(r, g*m*c.n, 1)
				must(t, y.UploadF32(init), yw.UploadF32(init))
				must(t, st.SwiGLU(nil, xb, gate, up, n, o.SwiGLULimit),
					st.QGEMMGroupedOpts(ws, ib, xb, yw, m, g, GroupedOptions{Accumulate: o.Accumulate}))
				ref := gemvPath()
				must(t, st.QGEMMGroupedOpts(ws, ib, gu, y, m, g, o), st.Sync())
				path := gemvPath()
				got, want := make([]float32, g*m*c.n), make([]float32, g*m*c.n)
				must(t, y.DownloadF32(got), yw.DownloadF32(want))
				if (ref == pathStream || ref == pathStreamReady) && (path == pathStream || path == pathStreamReady) {
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%v m=%d %+v: y[%d] = %g, want %g (SwiGLU launch + grouped launch)", c.f, m, o, i, got[i], want[i])
						}
					}
				} else if e := relErr(got, want); e > 1e-5 {
					t.Fatalf("%v m=%d %+v (kernel families %d, %d): rel err %g", c.f, m, o, ref, path, e)
				}
			}
			for _, b := range []*Buffer{gu, xb, ib, y, yw} {
				b.Free()
			}
		}
		ws.Free()
	}
	// bad arguments: one group, NaN limit, x too short for float32 rows
	ws := randomStack(t, d, r, qcase{NVFP4, 256, 256}, 1)
	defer ws.Free()
	small, err := d.Alloc(2 * 2 * 256 * 2) // 2 groups x 256 as bf16 x: too short as float32 gate / up rows
	must(t, err)
	defer small.Free()
	yb, err := d.Alloc(4 * 2 * 256)
	must(t, err)
	defer yb.Free()
	if err := st.QGEMMGroupedOpts(ws, nil, small, yb, 1, 1, GroupedOptions{SwiGLU: true}); !errors.Is(err, ErrShape) {
		t.Errorf("one group: got %v, want ErrShape", err)
	}
	ws2 := randomStack(t, d, r, qcase{NVFP4, 256, 256}, 2)
	defer ws2.Free()
	if err := st.QGEMMGroupedOpts(ws2, nil, small, yb, 1, 2, GroupedOptions{SwiGLU: true}); !errors.Is(err, ErrShape) {
		t.Errorf("short float32 x: got %v, want ErrShape", err)
	}
	big, err := d.Alloc(2 * 2 * 256 * 4) // long enough: only the limit is wrong
	must(t, err)
	defer big.Free()
	if err := st.QGEMMGroupedOpts(ws2, nil, big, yb, 1, 2, GroupedOptions{SwiGLU: true, SwiGLULimit: float32(math.NaN())}); !errors.Is(err, ErrShape) {
		t.Errorf("NaN limit: got %v, want ErrShape", err)
	}
}

// TestGraphMoEIDsReady captures a routed MoE step, Router -> RMSNorm -> grouped w1, w3 (expert
// ids = the router's output) -> SwiGLU -> grouped w2, with the grouped launches declaring their
// ids ready (GroupedOptions.IDsReady: the router finished before the previous launch began, so
// the streaming kernel reads them and issues weights before its wait), into a CUDA graph, and
// replays it with router logits that change between replays: every replay must reproduce the
// eager result for its own logits bit for bit (stale ids would select other experts), and the
// eager results must equal those without the declaration.
func TestGraphMoEIDsReady(t *testing.T) {
	d := device(t)
	r := rng(t)
	st := newStream(t, d)
	const rows, ne, k, hid, inter = 2, 8, 3, 512, 1024
	const g = rows * k
	w1, w3, w2 := randomStack(t, d, r, qcase{NVFP4, inter, hid}, ne), randomStack(t, d, r, qcase{NVFP4, inter, hid}, ne), randomStack(t, d, r, qcase{NVFP4, hid, inter}, ne)
	defer func() { w1.Free(); w3.Free(); w2.Free() }()
	alloc := allocator(t, d)
	logits, idx, wts, xf, xg := alloc(4*rows*ne), alloc(4*g), alloc(4*g), alloc(4*g*hid), alloc(2*g*hid)
	gb, ub, hb, y := alloc(4*g*inter), alloc(4*g*inter), alloc(2*g*inter), alloc(4*g*hid)
	defer func() {
		for _, b := range []*Buffer{logits, idx, wts, xf, xg, gb, ub, hb, y} {
			b.Free()
		}
	}()
	must(t, xf.UploadF32(randF32(r, g*hid, 2)))
	step := func(ready bool) func() error {
		o := GroupedOptions{IDsReady: ready}
		return func() error {
			return firstErr(st.Router(idx, wts, logits, nil, rows, ne, k, 1),
				st.RMSNorm(nil, xg, xf, nil, g, hid, 1e-6),
				st.QGEMMGroupedOpts(w1, idx, xg, gb, 1, g, o),
				st.QGEMMGroupedOpts(w3, idx, xg, ub, 1, g, o),
				st.SwiGLU(nil, hb, gb, ub, g*inter, 10),
				st.QGEMMGroupedOpts(w2, idx, hb, y, 1, g, o))
		}
	}
	la, lb := randF32(r, rows*ne, 4), randF32(r, rows*ne, 4)
	eager := func(l []float32, ready bool) ([]float32, []int32) {
		must(t, logits.UploadF32(l), step(ready)(), st.Sync())
		out, ids := make([]float32, g*hid), make([]int32, g)
		must(t, y.DownloadF32(out), idx.DownloadI32(ids))
		return out, ids
	}
	// Bit for bit on the streaming kernel; the earlier split-K kernel (DSV4GO_GEMV3_GROUPED=0)
	// adds with float32 atomics in any order, and the SwiGLU's bf16 rounding can then flip
	// by one bf16 ulp (as in TestGraphDecodeStep): 1e-2 relative (norm) there.
	var bits bool
	same := func(what string, got, want []float32) {
		t.Helper()
		if !bits {
			if e := relErr(got, want); e > 1e-2 {
				t.Fatalf("%s: rel err %g", what, e)
			}
			return
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: y[%d] = %g, want %g", what, i, got[i], want[i])
			}
		}
	}
	ya, ida := eager(la, true)
	bits = gemvPath() == pathStreamReady || gemvPath() == pathStream // the last grouped launch (w2) on the streaming kernel
	yb, idb := eager(lb, true)
	if slices.Equal(ida, idb) {
		t.Fatalf("both logits route to the same experts %v: the test cannot see stale ids", ida)
	}
	for _, c := range []struct {
		l []float32
		y []float32
	}{{la, ya}, {lb, yb}} {
		y0, _ := eager(c.l, false)
		same("eager, ids after the wait", y0, c.y)
	}
	must(t, st.BeginCapture())
	if err := step(true)(); err != nil {
		st.EndCapture()
		t.Fatal(err)
	}
	gr, err := st.EndCapture()
	must(t, err)
	defer gr.Close()
	for i, l := range [][]float32{la, lb, la, lb, lb, la} {
		must(t, logits.UploadF32(l), gr.Launch(st, 1, true))
		got := make([]float32, g*hid)
		must(t, y.DownloadF32(got))
		want := ya
		if i == 1 || i == 3 || i == 4 {
			want = yb
		}
		same(fmt.Sprintf("replay %d", i), got, want)
	}
}

func TestErrors(t *testing.T) {
	d := device(t)
	st := d.Stream()
	p, err := PackNVFP4(make([]byte, 64*128/2), make([]byte, 64*128/16), 1, 64, 128)
	must(t, err)
	w, err := d.UploadWeight(p)
	must(t, err)
	defer w.Free()
	small, err := d.Alloc(16)
	must(t, err)
	if err := st.QGEMM(w, small, small, 1, false); !errors.Is(err, ErrShape) {
		t.Fatalf("short buffers: got %v, want ErrShape", err)
	}
	small.Free()
	if err := small.Upload([]byte{1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("freed buffer: got %v, want ErrClosed", err)
	}
	if _, err := d.Alloc(-1); !errors.Is(err, ErrShape) {
		t.Fatalf("negative alloc: got %v", err)
	}
	if _, err := d.Alloc(d.Memory() * 2); err == nil {
		t.Fatal("oversized alloc succeeded")
	}
	// a CUDA-side error is a *Error carrying the code
	huge, err := d.Alloc(d.Memory() - 1)
	if err == nil {
		huge.Free()
	} else {
		var ce *Error
		if !errors.As(err, &ce) && !errors.Is(err, ErrShape) {
			t.Fatalf("huge alloc: %v is not a *Error", err)
		}
		if ce != nil && ce.Code == 0 {
			t.Fatalf("error without code: %v", ce)
		}
	}
}

// TestQGEMMGrouped runs the MoE grouped decode GEMM (expert ids read on the device) against
// dequantization + float64 matmul, with per-expert global scales.
func TestQGEMMGrouped(t *testing.T) {
	d := device(t)
	r := rng(t)
	st := d.Stream()
	// On a 132-SM device with the default switches: 192 x 512 (4 groups = 48 row tiles): the
	// earlier split-K kernel (too few row tiles for the streaming kernel); the others the
	// streaming kernel's balanced layout (FLAT: 264 / G blocks per group, units split evenly
	// over a block's warps): 2048 x 512 (4 groups) 1-2 row tiles per block, warps ending inside
	// row tiles; 8448 x 512 a row tile per warp; 1024 x 384 (3 chunks) one unit per step, 3
	// warps sharing a row tile; expert w1/w3 (12 groups; at M = 16 x does not fit beside the
	// rings: the earlier kernel) and w2 (6 groups) as a V4-Flash layer launches them, warps
	// starting and ending inside row tiles. With DSV4GO_GEMV3_FLAT=0 the streaming kernel's
	// power-of-two layout, with DSV4GO_GEMV3_GROUPED=0 the earlier kernel for all.
	four, twelve, six := []int32{3, 0, 3, 4}, []int32{3, 0, 3, 4, 1, 2, 2, 0, 4, 1, 3, 0}, []int32{4, 1, 0, 3, 2, 1}
	check := d.SMs() == 132 // the kernel family, as TestGEMVPath checks it
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "DSV4GO_GEMV") {
			check = false
		}
	}
	for _, gc := range []struct {
		qcase
		ids []int32
	}{{qcase{NVFP4, 192, 512}, four}, {qcase{MXFP4, 192, 512}, four}, {qcase{FP8Block, 192, 512}, four},
		{qcase{NVFP4, 2048, 512}, four}, {qcase{MXFP4, 2048, 512}, four}, {qcase{FP8Block, 2048, 512}, four},
		{qcase{FP8Block, 8448, 512}, four}, {qcase{NVFP4, 1024, 384}, four},
		{qcase{NVFP4, 2048, 4096}, twelve}, {qcase{MXFP4, 4096, 2048}, six}, {qcase{FP8Block, 4096, 2048}, six}} {
		fc := gc.qcase
		f, n, k := fc.f, fc.n, fc.k
		const e = 5
		var ps []*Packed
		var refs [][]float64
		for i := 0; i < e; i++ {
			p, ref := packRandom(t, r, qcase{f, n, k})
			if f == NVFP4 { // distinct global scales per expert
				p.Alpha *= float32(i + 1)
				for j := range ref {
					ref[j] *= float64(i + 1)
				}
			}
			ps = append(ps, p)
			refs = append(refs, ref)
		}
		ws, err := d.UploadWeightStack(ps)
		must(t, err)
		for _, m := range []int{1, 3, 16} {
			ids := gc.ids
			g := len(ids)
			must(t, CheckExpertIDs(ids, e))
			xb, xv := bf16Acts(r, g*m*k)
			xbuf, err := d.Alloc(int64(len(xb)))
			must(t, err, xbuf.Upload(xb))
			ibuf, err := d.Alloc(int64(4 * g))
			must(t, err, ibuf.UploadI32(ids))
			ybuf, err := d.Alloc(int64(4 * g * m * n))
			must(t, err)
			y0 := make([]float32, g*m*n)
			poison(y0)
			must(t, ybuf.UploadF32(y0), st.QGEMMGrouped(ws, ibuf, xbuf, ybuf, m, g, false))
			want := pathStream // balanced layout
			if n == 192 || m == 16 && (k == 4096 || f == FP8Block && k == 2048) {
				want = pathEarlier // too few row tiles, or x too large beside the rings
			}
			path := gemvPath()
			if check && path != want {
				t.Errorf("%v %dx%d x %d groups M=%d: kernel family %d, want %d", f, n, k, g, m, path, want)
			}
			got := make([]float32, g*m*n)
			must(t, ybuf.DownloadF32(got))
			for z, id := range ids {
				ref := refs[id]
				for i := 0; i < m; i++ {
					for j := 0; j < n; j++ {
						var sum, sa float64
						for kk := 0; kk < k; kk++ {
							p := ref[j*k+kk] * xv[(z*m+i)*k+kk]
							sum += p
							sa += math.Abs(p)
						}
						gv := float64(got[(z*m+i)*n+j])
						if math.IsNaN(gv) || math.Abs(gv-sum) > sa*0x1p-14+1e-30 {
							t.Fatalf("%v m=%d group %d (expert %d) y[%d][%d] = %g, want %g", f, m, z, id, i, j, gv, sum)
						}
					}
				}
			}
			// The ids declared ready (uploaded before the previous launch began): the same
			// kernel reads them before its wait, with the same bits.
			ready := make([]float32, g*m*n)
			must(t, ybuf.UploadF32(y0), st.QGEMMGroupedOpts(ws, ibuf, xbuf, ybuf, m, g, GroupedOptions{IDsReady: true}))
			if rp := gemvPath(); check && path == pathStream && rp != pathStreamReady {
				t.Errorf("%v %dx%d x %d groups M=%d, ids ready: kernel family %d, want %d", f, n, k, g, m, rp, pathStreamReady)
			}
			must(t, ybuf.DownloadF32(ready))
			if path != pathStream { // the earlier kernel's split-K atomics add in any order
				if e := relErr(ready, got); e > 1e-5 {
					t.Fatalf("%v m=%d ids ready: rel err %g", f, m, e)
				}
				got = ready // y now holds these bits (the checks below add to y)
			} else {
				for i := range ready {
					if math.Float32bits(ready[i]) != math.Float32bits(got[i]) {
						t.Fatalf("%v m=%d ids ready: y[%d] = %g, want %g", f, m, i, ready[i], got[i])
					}
				}
			}
			if n >= 1024 && m == 3 {
				// The balanced layout with ids == nil (group z uses expert z, for the first
				// min(g, e) groups; the others keep y) and accumulate (y += ...).
				gn := min(g, e)
				must(t, st.QGEMMGrouped(ws, nil, xbuf, ybuf, m, gn, true))
				acc := make([]float32, g*m*n)
				must(t, ybuf.DownloadF32(acc))
				for z := 0; z < g; z++ {
					for i := 0; i < m; i++ {
						for j := 0; j < n; j++ {
							want := float64(got[(z*m+i)*n+j])
							sa := math.Abs(want)
							if z < gn {
								for kk := 0; kk < k; kk++ {
									p := refs[z][j*k+kk] * xv[(z*m+i)*k+kk]
									want += p
									sa += math.Abs(p)
								}
							}
							av := float64(acc[(z*m+i)*n+j])
							if math.IsNaN(av) || math.Abs(av-want) > sa*0x1p-14+1e-30 {
								t.Fatalf("%v m=%d ids=nil accumulate group %d y[%d][%d] = %g, want %g", f, m, z, i, j, av, want)
							}
						}
					}
				}
				// An expert id outside the stack: that group is skipped on the device (y keeps
				// its NaN on the streaming kernel; the earlier kernel zeroes y before its split-K
				// atomics), the others match the first launch bit for bit on the streaming
				// kernel (deterministic); on the earlier kernel they are only written (the
				// values were checked above).
				bad := append([]int32(nil), ids...)
				bad[1] = int32(e)
				must(t, ibuf.UploadI32(bad), ybuf.UploadF32(y0), st.QGEMMGrouped(ws, ibuf, xbuf, ybuf, m, g, false))
				bits := gemvPath() == pathStream
				must(t, ybuf.DownloadF32(acc))
				for z := 0; z < g; z++ {
					for i := 0; i < m*n; i++ {
						gv, av := got[z*m*n+i], acc[z*m*n+i]
						same := math.Float32bits(av) == math.Float32bits(gv) || !bits && !math.IsNaN(float64(av))
						skipped := math.IsNaN(float64(av)) || !bits && av == 0
						if z == 1 && !skipped || z != 1 && !same {
							t.Fatalf("%v m=%d invalid id in group 1: group %d y[%d] = %g, want %g (group 1: untouched)", f, m, z, i, av, gv)
						}
					}
				}
			}
			xbuf.Free()
			ibuf.Free()
			ybuf.Free()
		}
		ws.Free()
	}
}

// TestQGEMMDecodeSplits runs the decode kernel (M <= 16) with forced split-K factors over
// blocks (1: in-block reduction only; 2, 3, 7: float32 atomics, uneven last split) on
// shapes where the automatic choice would not pick them, for every format.
func TestQGEMMDecodeSplits(t *testing.T) {
	d := device(t)
	r := rng(t)
	st := d.Stream()
	for _, c := range []qcase{{NVFP4, 200, 1408}, {MXFP4, 136, 1408}, {FP8Block, 130, 1408}} {
		p, ref := packRandom(t, r, c)
		w, err := d.UploadWeight(p)
		must(t, err)
		for _, m := range []int{1, 2, 5, 9, 16} {
			for _, splits := range []int{1, 2, 3, 7} {
				runQGEMMCase(t, d, st, r, w, ref, c, m, splits%2 == 0, splits, nil)
			}
		}
		w.Free()
	}
}

// runQGEMMCase runs one y = x . W^T (or y += with acc) of M fresh random bf16 rows through
// Stream.QGEMMSplit (splits as given: 0 = the dispatch's choice) and checks the rows that
// keep selects (nil: all) against the float64 reference with checkQGEMMRows' tolerance.
func runQGEMMCase(t *testing.T, d *Device, st *Stream, r *rand.Rand, w *Weight, ref []float64, c qcase, m int, acc bool, splits int, keep func(int) bool) {
	t.Helper()
	name := fmt.Sprintf("%v/%dx%d/M=%d/splits=%d/acc=%v", c.f, c.n, c.k, m, splits, acc)
	xb, xv := bf16Acts(r, m*c.k)
	xbuf, err := d.Alloc(int64(len(xb)))
	must(t, err, xbuf.Upload(xb))
	defer xbuf.Free()
	ybuf, err := d.Alloc(int64(4 * m * c.n))
	must(t, err)
	defer ybuf.Free()
	y0 := randF32(r, m*c.n, 1)
	if !acc {
		poison(y0)
	}
	must(t, ybuf.UploadF32(y0))
	if err := st.QGEMMSplit(w, xbuf, ybuf, m, acc, splits); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if keep == nil {
		keep = func(int) bool { return true }
	}
	checkQGEMMRows(t, name, ybuf, ref, xv, y0, m, c.n, c.k, acc, keep)
}

// TestQGEMMStream covers the streaming decode GEMV (csrc/qgemv_stream.cu) in each of its
// layouts: R = 1 / 2 / 4 row tiles per block with 8 / 4 / 2 K-slices reduced in shared memory,
// R > 8 whole row tiles per warp stored as they finish, one or two units per iteration (odd and
// even chunk counts), M <= 8 and M > 8 (two n8 token tiles), N not a multiple of 16, every
// format, store and accumulate, 4-deep rings where x is large, and K split over thread-block
// clusters where row tiles are few. On a 132-SM H200 every shape below but the last is
// accepted by the kernel (the launcher falls back silently, so the comments give the path the
// launcher's rules pick; with DSV4GO_GEMV3=0 the same cases check the earlier kernels). FP4
// cases with one row tile per block and at most 4 units per warp run the predecode kernel
// instead (TestGEMVPath); DSV4GO_GEMV3_PREDEC=0 puts them back on the streaming kernel.
func TestQGEMMStream(t *testing.T) {
	runQGEMMTable(t, []qgemmCases{
		{qcase{NVFP4, 4096, 1024}, []int{1, 2, 9}, 0}, // R=1, one chunk per K-slice
		{qcase{MXFP4, 2056, 2048}, []int{1, 4}, 0},    // R=1, ragged N, two chunks per K-slice
		{qcase{NVFP4, 16384, 1024}, []int{1, 3}, 0},   // R=4, two K-slices
		{qcase{MXFP4, 8192, 512}, []int{1, 16}, 0},    // R=2, M=16
		{qcase{FP8Block, 8192, 1024}, []int{1, 7}, 0}, // R=2, FP8-block
		{qcase{NVFP4, 34048, 256}, []int{1, 12}, 0},   // R=9: whole row tiles per warp
		{qcase{FP8Block, 34000, 256}, []int{1}, 0},    // R=9, FP8-block, ragged N
		{qcase{NVFP4, 4096, 1152}, []int{1, 5}, 0},    // R=1, 9 chunks: uneven and empty K-slices
		{qcase{FP8Block, 8192, 1024}, []int{12}, 0},   // R=2, FP8-block, M > 8
		{qcase{NVFP4, 16384, 1024}, []int{10}, 0},     // R=4, M > 8
		{qcase{MXFP4, 8192, 1024}, []int{1}, 0},       // R=2, two units per iteration
		{qcase{FP8Block, 4096, 1024}, []int{1, 3}, 0}, // R=1, FP8-block
		{qcase{FP8Block, 16384, 512}, []int{1}, 0},    // R=4, FP8-block
		// x too large beside the 8-deep rings: 4-deep rings (with DSV4GO_GEMV3_SMALL=0 the
		// earlier kernels)
		{qcase{NVFP4, 4096, 8192}, []int{3}, 0},  // wo_b-like, two units per step
		{qcase{MXFP4, 4096, 7168}, []int{4}, 0},  // 56 chunks: 7 per K-slice, one unit per step
		{qcase{NVFP4, 4096, 2048}, []int{16}, 0}, // w2 at M=16, two token tiles
		// too few row tiles for half the SMs: K split over a thread-block cluster per row tile
		{qcase{NVFP4, 512, 4096}, []int{1, 5}, 0},  // wkv: clusters of 4 (M=5: 4-deep rings)
		{qcase{FP8Block, 512, 4096}, []int{1}, 0},  // wkv, FP8-block
		{qcase{MXFP4, 520, 2048}, []int{1, 10}, 0}, // 36 row tiles, ragged N: clusters of 2, M > 8
		{qcase{NVFP4, 256, 1024}, []int{1, 3}, 0},  // 16 row tiles: clusters of 8, one chunk each
		{qcase{NVFP4, 1024, 4096}, []int{1}, 0},    // clusters of 2, 8-deep rings, two units per step
		{qcase{FP8Block, 512, 2048}, []int{9}, 0},  // clusters of 4, FP8-block, M > 8
		{qcase{NVFP4, 1024, 384}, []int{2}, 0},     // 3 chunks, no power-of-two split: declined
		// one row tile per block, <= 4 units per warp, M <= 8: the shapes that
		// DSV4GO_GEMV3_PREDEC decodes before the wait
		{qcase{NVFP4, 2048, 4096}, []int{1, 3}, 0}, // expert w1/w3: 4 units per warp
		{qcase{MXFP4, 2048, 4096}, []int{2}, 0},    // w1/w3, MXFP4
		{qcase{NVFP4, 2056, 3968}, []int{1}, 0},    // 31 chunks: the last warp 3 units; ragged N
		{qcase{NVFP4, 4096, 2048}, []int{1, 8}, 0}, // expert w2: two row tiles per block, 4 units per warp
		{qcase{NVFP4, 2048, 4096}, []int{16}, 0},   // M > 8: two token tiles
		{qcase{MXFP4, 512, 4096}, []int{11}, 0},    // M > 8, clusters of 4
		// streaming kernel at M <= 8 with one row tile per block: 8 units per warp
		{qcase{NVFP4, 2048, 8192}, []int{1}, 0},  // 8-deep rings, two units per step
		{qcase{MXFP4, 1024, 16384}, []int{2}, 0}, // clusters of 2, 64 chunks per block
	}, nil)
}

// TestGEMVPath checks which decode kernel the dispatch picks for each shape (it falls back
// between them without a signal, so a passing TestQGEMMStream alone cannot tell), after
// checking the result as TestQGEMMStream does. The paths are those of a 132-SM device (H200)
// with the default switches; elsewhere, or with any DSV4GO_GEMV* variable set, only the results
// are checked.
func TestGEMVPath(t *testing.T) {
	d := device(t)
	check := checkPaths(d)
	for _, tc := range []struct {
		c    qcase
		m    int
		path int
	}{
		{qcase{NVFP4, 2048, 4096}, 1, pathPredec},          // expert w1/w3, x loaded first
		{qcase{MXFP4, 2048, 4096}, 5, pathPredec},          // x per unit
		{qcase{NVFP4, 4096, 2048}, 2, pathPredec},          // expert w2: two row tiles per block
		{qcase{NVFP4, 512, 4096}, 1, pathPredecCluster},    // wkv
		{qcase{NVFP4, 2048, 4096}, 12, pathPredec},         // two token tiles
		{qcase{NVFP4, 512, 4096}, 9, pathPredecCluster},    // two token tiles, wkv
		{qcase{NVFP4, 4096, 2048}, 16, pathPredec},         // two token tiles, w2
		{qcase{NVFP4, 16384, 1024}, 10, pathStream},        // M > 8, 4 row tiles per block
		{qcase{FP8Block, 2048, 4096}, 12, pathEarlier},     // x too large beside FP8-block rings
		{qcase{FP8Block, 2048, 4096}, 1, pathStream},       // FP8-block: no predecode
		{qcase{NVFP4, 16384, 1024}, 1, pathStream},         // 4 row tiles per block
		{qcase{NVFP4, 4096, 8192}, 4, pathStream},          // 16 units per warp, 4-deep rings
		{qcase{FP8Block, 512, 4096}, 2, pathStreamCluster}, // FP8-block wkv
		{qcase{NVFP4, 1024, 384}, 2, pathEarlier},          // 3 chunks: declined
		{qcase{NVFP4, 2048, 8192}, 1, pathStream},          // 8 units per warp
		{qcase{MXFP4, 1024, 16384}, 2, pathStreamCluster},  // clusters of 2, 8 units per warp
	} {
		r := rng(t)
		p, ref := packRandom(t, r, tc.c)
		w, err := d.UploadWeight(p)
		must(t, err)
		runQGEMMCase(t, d, d.Stream(), r, w, ref, tc.c, tc.m, false, 0, nil)
		if got := gemvPath(); check && got != tc.path {
			t.Errorf("%v %dx%d M=%d: kernel family %d, want %d", tc.c.f, tc.c.n, tc.c.k, tc.m, got, tc.path)
		}
		w.Free()
	}
}

// The decode kernel families gemvPath reports (DSV4C_GEMV_* in csrc/dsv4cuda.h).
const (
	pathEarlier       = 1
	pathStream        = 2
	pathStreamCluster = 3
	pathPredec        = 4
	pathPredecCluster = 5
	pathStreamReady   = 6 // streaming, grouped, expert ids read before the wait
)

// checkPaths reports whether a test should check the kernel family of its decode launches: on
// a 132-SM device (the H200 the families were chosen on) with no DSV4GO_GEMV* switch set.
func checkPaths(d *Device) bool {
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "DSV4GO_GEMV") {
			return false
		}
	}
	return d.SMs() == 132
}

// replayGraph captures step on st into a CUDA graph, fills out and the float32 buffers in
// scratch with NaN, replays the graph 3 times and returns out's first n float32 values.
func replayGraph(t *testing.T, st *Stream, step func() error, out *Buffer, n int, scratch ...*Buffer) []float32 {
	t.Helper()
	must(t, st.BeginCapture())
	if err := step(); err != nil {
		st.EndCapture()
		t.Fatal(err)
	}
	gr, err := st.EndCapture()
	must(t, err)
	defer gr.Close()
	for _, b := range append([]*Buffer{out}, scratch...) {
		v := make([]float32, b.Len()/4)
		poison(v)
		must(t, b.UploadF32(v))
	}
	must(t, gr.Launch(st, 3, true))
	got := make([]float32, n)
	must(t, out.DownloadF32(got))
	return got
}

// TestGraphStreamChain captures GEMV -> ToBF16 -> GEMV, both GEMVs on the streaming kernel
// (launched with programmatic dependent launch, so the second one's grid starts while the
// conversion kernel runs and must wait for it before reading x), into a CUDA graph and checks
// that replays reproduce the eager result bit for bit (the kernel has no atomics), and the eager
// result against the float64 reference computed from the intermediate bf16 activations.
func TestGraphStreamChain(t *testing.T) {
	d := device(t)
	r := rng(t)
	st := newStream(t, d)
	const m, k1, n1, n2 = 2, 1024, 4096, 4096
	p1, _ := packRandom(t, r, qcase{NVFP4, n1, k1})
	p2, ref2 := packRandom(t, r, qcase{MXFP4, n2, n1})
	w1, err := d.UploadWeight(p1)
	must(t, err)
	defer w1.Free()
	w2, err := d.UploadWeight(p2)
	must(t, err)
	defer w2.Free()
	alloc := allocator(t, d)
	x0, y1, x1, y2 := alloc(2*m*k1), alloc(4*m*n1), alloc(2*m*n1), alloc(4*m*n2)
	defer func() { x0.Free(); y1.Free(); x1.Free(); y2.Free() }()
	xb, _ := bf16Acts(r, m*k1)
	must(t, x0.Upload(xb))
	step := func() error {
		return firstErr(st.QGEMM(w1, x0, y1, m, false), st.ToBF16(x1, y1, m*n1),
			st.QGEMM(w2, x1, y2, m, false))
	}
	must(t, step(), st.Sync())
	eager := make([]float32, m*n2)
	must(t, y2.DownloadF32(eager))
	x1b := make([]byte, 2*m*n1)
	must(t, x1.Download(x1b))
	x1v := make([]float64, m*n1)
	for i := range x1v {
		x1v[i] = float64(numfmt.BF16ToF32(uint16(x1b[2*i]) | uint16(x1b[2*i+1])<<8))
	}
	for i := 0; i < m; i++ {
		for j := 0; j < n2; j++ {
			var s, sa float64
			for kk := 0; kk < n1; kk++ {
				p := ref2[j*n1+kk] * x1v[i*n1+kk]
				s += p
				sa += math.Abs(p)
			}
			if g := float64(eager[i*n2+j]); math.IsNaN(g) || math.Abs(g-s) > sa*0x1p-14+1e-30 {
				t.Fatalf("eager y2[%d][%d] = %g, want %g", i, j, g, s)
			}
		}
	}
	got := replayGraph(t, st, step, y2, m*n2, y1)
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(eager[i]) {
			t.Fatalf("graph replay y2[%d] = %g, eager %g", i, got[i], eager[i])
		}
	}
}

// TestGraphLargeM captures large-M GEMMs (several row blocks, >= 8 chunks per block, no
// split-K) into a CUDA graph and checks that replays reproduce the eager result bit for bit:
// x by tensor-map copies (the map captured by value), and x rearranged by the pre-pass, whose
// buffer is then a graph allocation node; with DSV4GO_QGEMM_XPERM_GRAPH=0 the captured call
// stages x with 4-byte copies instead, which must give the same bits as well.
func TestGraphLargeM(t *testing.T) {
	d := device(t)
	r := rng(t)
	st := newStream(t, d)
	for _, c := range []struct {
		q qcase
		m int
	}{
		// x by tensor-map copies (the default on these; the map is a kernel parameter, captured
		// by value): 256 x 128 tiles, then the 128 x 64 tiles
		{qcase{NVFP4, 1100, 2048}, 1000}, {qcase{FP8Block, 4352, 256}, 4000}, {qcase{MXFP4, 4096, 2048}, 256},
		// the x pre-pass (an FP4 matrix of more than 2,048 rows): its buffer is a graph
		// allocation node, or with DSV4GO_QGEMM_XPERM_GRAPH=0 the captured call stages x with
		// 4-byte copies (same order of sums, same bits)
		{qcase{NVFP4, 4096, 1024}, 1000}} {
		p, _ := packRandom(t, r, c.q)
		w, err := d.UploadWeight(p)
		must(t, err)
		alloc := allocator(t, d)
		x, y := alloc(2*c.m*c.q.k), alloc(4*c.m*c.q.n)
		xb, _ := bf16Acts(r, c.m*c.q.k)
		must(t, x.Upload(xb))
		step := func() error { return st.QGEMM(w, x, y, c.m, false) }
		must(t, step(), st.Sync())
		eager := make([]float32, c.m*c.q.n)
		must(t, y.DownloadF32(eager))
		got := replayGraph(t, st, step, y, c.m*c.q.n)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(eager[i]) {
				t.Fatalf("%v M=%d: graph replay y[%d] = %g, eager %g", c.q, c.m, i, got[i], eager[i])
			}
		}
		x.Free()
		y.Free()
		w.Free()
	}
}

// qgemmCases is one weight shape of a QGEMM test table, the token counts M to run it with
// and the split argument of Stream.QGEMMSplit (0: the dispatch's choice).
type qgemmCases struct {
	c      qcase
	ms     []int
	splits int
}

// runQGEMMTable packs and uploads a random weight per row of the table and runs every M with
// and without accumulate through runQGEMMCase; rows(m), when non-nil, picks the token rows
// that are checked at that M.
func runQGEMMTable(t *testing.T, cases []qgemmCases, rows func(m int) func(int) bool) {
	t.Helper()
	d := device(t)
	r := rng(t)
	st := d.Stream()
	for _, tc := range cases {
		p, ref := packRandom(t, r, tc.c)
		w, err := d.UploadWeight(p)
		must(t, err)
		for _, m := range tc.ms {
			var keep func(int) bool
			if rows != nil {
				keep = rows(m)
			}
			for _, acc := range []bool{false, true} {
				runQGEMMCase(t, d, st, r, w, ref, tc.c, m, acc, tc.splits, keep)
			}
		}
		w.Free()
	}
}

// TestQGEMMLargeM covers the large-M GEMM (on compute capability 9.0: the wgmma kernel of
// qgemm_large.cu) for every format: M = 256 and 2048 and ragged M, K from 1024 to 8192, N
// that is not a multiple of the 256-row block (rows clamped to the last tile), automatic
// split-K (small grids: partial tiles summed in split order by a second kernel; with
// DSV4GO_QGEMM_SPLITRED=0 a cluster reduction for 2-8 splits, atomics otherwise) and accumulate,
// and grids with more work units than SMs (persistent blocks), with x staged by the kernel or
// rearranged by the pre-pass (xperm_kernel; DSV4GO_QGEMM_XPERM=1 forces it on every case), or
// loaded in natural order by tensor-map copies with A built in natural order (the default on
// most cases; DSV4GO_QGEMM_XN=2 on every case without fallback, XN=0 never).
// splits = -2 forces the wgmma kernel at M <= 64 too. Every token tile and the last tokens are
// checked, other tokens every fifth one, to keep the float64 reference affordable.
func TestQGEMMLargeM(t *testing.T) {
	runQGEMMTable(t, []qgemmCases{
		{qcase{NVFP4, 256, 1024}, []int{256, 2048}, 0},
		{qcase{NVFP4, 200, 2048}, []int{300}, 0},
		{qcase{NVFP4, 1000, 8192}, []int{130}, 0},
		{qcase{NVFP4, 2048, 4096}, []int{256}, 0},
		{qcase{NVFP4, 320, 1024}, []int{33, 64}, -2},
		{qcase{MXFP4, 136, 4096}, []int{256, 2048}, 0},
		{qcase{MXFP4, 520, 1024}, []int{129}, 0},
		{qcase{FP8Block, 300, 1024}, []int{256, 2048}, 0},
		{qcase{FP8Block, 130, 8192}, []int{200}, 0},
		{qcase{FP8Block, 256, 2048}, []int{40}, -2},
		// more work units than SMs (persistent grid: a block takes several units, the
		// producer loads the next unit's chunks during the epilogue), ragged last row block
		{qcase{NVFP4, 4160, 1024}, []int{1800}, 0},
		{qcase{MXFP4, 2500, 1024}, []int{2048}, 0},
		{qcase{FP8Block, 4100, 1024}, []int{1500}, 0},
		// K chunks that do not divide evenly by the split count (20 chunks in 8 splits: the
		// last gets none; 10 in 4: the last gets one): the splits stay a power of two and
		// reduce in a cluster
		{qcase{NVFP4, 512, 2560}, []int{256}, 0},
		{qcase{FP8Block, 384, 1280}, []int{192}, 0},
		// rb >= 4 row blocks, >= 8 chunks per block, several units per block, ragged M (tokens
		// past M zero): x by tensor-map copies by default (FP8-block, and FP4 of <= 2,048 rows;
		// DSV4GO_QGEMM_XN=0 or XPERM=1: rearranged once per call by the pre-pass), and an FP4
		// matrix of more than 2,048 rows, which takes the pre-pass by default
		{qcase{FP8Block, 4352, 256}, []int{4000}, 0},
		{qcase{NVFP4, 1100, 2048}, []int{1000}, 0},
		{qcase{NVFP4, 4096, 1024}, []int{1000}, 0},
		// 256 x 128 tiles would split K into splits of <= 4 chunks, 128 x 64 tiles fill the SMs:
		// unsplit 128-row x 64-token tiles (expert w2 at M = 256; ragged rows and tokens)
		{qcase{NVFP4, 4096, 2048}, []int{256}, 0},
		{qcase{FP8Block, 4000, 1024}, []int{250}, 0},
		{qcase{MXFP4, 4096, 2048}, []int{200}, 0},
		// 160 small tiles (several per block when DSV4GO_QGEMM_TILE=1 forces them)
		{qcase{MXFP4, 520, 1024}, []int{2040}, 0},
		// split-K summed by splitk_reduce_kernel from a scratch buffer (DSV4GO_QGEMM_SPLITRED=0:
		// clusters or atomics): attn wkv at M = 2048 (4 splits, 128 units), 16 splits over
		// ragged row and token tiles
		{qcase{NVFP4, 512, 4096}, []int{2048}, 0},
		{qcase{FP8Block, 520, 4096}, []int{256}, 0},
		{qcase{MXFP4, 512, 4096}, []int{200}, 0},
		// 64-row x 128-token tiles, K unsplit, the two consumer warpgroups on alternate chunks
		// and their sums added through shared memory (wkv at M = 2048 above; here FP8-block
		// scales, ragged rows and tokens, an odd chunk count: 19 chunks, 10 + 9);
		// DSV4GO_QGEMM_ALT=1 forces these tiles on every case, DSV4GO_QGEMM_ALTXP=0/1 their x
		// pre-pass off/on
		{qcase{FP8Block, 512, 4096}, []int{2048}, 0},
		{qcase{MXFP4, 500, 4096}, []int{1990}, 0},
		{qcase{NVFP4, 512, 2432}, []int{2048}, 0},
		// 9 chunks (odd), 165 units of 64 x 128 tiles or 170 of 128 x 64 for 132 SMs when
		// DSV4GO_QGEMM_ALT=1 or DSV4GO_QGEMM_TILE=1 forces them: some blocks take two units
		// (by default: 256 x 128 tiles, K split in 2)
		{qcase{MXFP4, 2100, 1152}, []int{600}, 0},
	}, func(m int) func(int) bool {
		return func(i int) bool { return i%5 == 0 || i%128 == 127 || i >= m-3 }
	})
	// Split-K results are deterministic: a second call and a CUDA-graph replay of the call give
	// the same bits (the splits are summed in split order, not by atomics; the previous
	// reduction, DSV4GO_QGEMM_SPLITRED=0, may use atomics; a captured call with
	// DSV4GO_QGEMM_XPERM_GRAPH=0 leaves the scratch buffer's allocation node out and reduces
	// split-K that way (clusters or atomics), so its bits may differ from the eager call's).
	if os.Getenv("DSV4GO_QGEMM_SPLITRED") == "0" {
		return
	}
	replay := os.Getenv("DSV4GO_QGEMM_XPERM_GRAPH") != "0"
	d := device(t)
	r := rng(t)
	st := newStream(t, d)
	for _, c := range []qgemmCases{{qcase{NVFP4, 512, 4096}, []int{2048}, 0}, {qcase{MXFP4, 2048, 4096}, []int{256}, 0}} {
		m, n, k := c.ms[0], c.c.n, c.c.k
		p, _ := packRandom(t, r, c.c)
		w, err1 := d.UploadWeight(p)
		x, err2 := d.Alloc(int64(2 * m * k))
		y, err3 := d.Alloc(int64(4 * m * n))
		must(t, err1, err2, err3)
		xb, _ := bf16Acts(r, m*k)
		must(t, x.Upload(xb))
		call := func() error { return st.QGEMM(w, x, y, m, false) }
		ys := make([][]float32, 2)
		for i := range ys {
			ys[i] = make([]float32, m*n)
			must(t, call(), st.Sync(), y.DownloadF32(ys[i]))
		}
		if replay {
			ys = append(ys, replayGraph(t, st, call, y, m*n))
		} else {
			ys = append(ys, ys[1])
		}
		for i, v := range ys[0] {
			if b := math.Float32bits(v); b != math.Float32bits(ys[1][i]) || b != math.Float32bits(ys[2][i]) {
				t.Fatalf("%v M=%d: y[%d] = %g, then %g, graph replay %g", c.c, m, i, v, ys[1][i], ys[2][i])
			}
		}
		x.Free()
		y.Free()
		w.Free()
	}
}

// checkQGEMMRows downloads y [m][n] from ybuf and compares the tokens i with keep(i) with the
// float64 product of x [m][k] and the dequantized weight ref [n][k] (plus y0 when acc): the
// error bound is 2^-14 of sum |w x| (float32 accumulation of exact bf16 products). Every
// element of y must be a number (no unwritten NaN anywhere).
func checkQGEMMRows(t *testing.T, name string, ybuf *Buffer, ref, xv []float64, y0 []float32, m, n, k int, acc bool, keep func(int) bool) {
	t.Helper()
	got := make([]float32, m*n)
	must(t, ybuf.DownloadF32(got))
	for i, g := range got {
		if math.IsNaN(float64(g)) {
			t.Fatalf("%s: y[%d][%d] is NaN (unwritten)", name, i/n, i%n)
		}
	}
	for i := 0; i < m; i++ {
		if !keep(i) {
			continue
		}
		for j := 0; j < n; j++ {
			var s, sa float64
			row, xr := ref[j*k:(j+1)*k], xv[i*k:(i+1)*k]
			for kk, wv := range row {
				p := wv * xr[kk]
				s += p
				sa += math.Abs(p)
			}
			if acc {
				s += float64(y0[i*n+j])
				sa += math.Abs(float64(y0[i*n+j]))
			}
			g := float64(got[i*n+j])
			if math.Abs(g-s) > sa*0x1p-14+0x1p-149 { // (the floor: rows whose products are all zero)
				t.Fatalf("%s: y[%d][%d] = %g, want %g (sum|wx| %g)", name, i, j, g, s, sa)
			}
		}
	}
}

// TestQGEMMXRange runs the decode GEMVs on x uniform in (-2, 2) times 2^96, 2^40, 2^-40 or
// 2^-100, and on ordinary x with one element of 2^12, against float64. The MMAs take bf16
// weights built from the block scales with the packer's exponent offset (pack.go; at most 21 in
// magnitude, the rest of the scale in Alpha) and sum in float32. At x * 2^96 the sums reach up
// to about 2^113, at x * 2^-100 the products fall to about 2^-102 and below. A kernel whose
// extra power-of-two factor on x or the weights pushes sums past float32's range (upward by
// about 2^10 to 2^25) or products deep into its subnormals (downward by about 2^-33) fails, and
// so does one that quantizes x around an outlier. The tolerance is checkQGEMMRows'.
func TestQGEMMXRange(t *testing.T) {
	d := device(t)
	r := rng(t)
	st := d.Stream()
	check := checkPaths(d)
	cases := []struct {
		c    qcase
		ms   []int
		path int // the kernel family on a 132-SM device (checkPaths)
	}{
		{qcase{NVFP4, 16384, 1024}, []int{1, 3}, pathStream}, // 4 row tiles and 2 K-slices per block
		{qcase{MXFP4, 8192, 1024}, []int{1}, pathStream},
		{qcase{NVFP4, 34048, 256}, []int{1, 12}, pathStream}, // whole row tiles per warp; M > 8
		{qcase{NVFP4, 2048, 4096}, []int{1}, pathPredec},
		{qcase{NVFP4, 1024, 384}, []int{2}, pathEarlier}, // 3 chunks: the streaming kernel declines
		{qcase{FP8Block, 8192, 1024}, []int{1}, pathStream},
	}
	xforms := []struct {
		name string
		f    func(v []float32)
	}{
		{"x*2^96", func(v []float32) { scaleAll(v, 0x1p96) }},
		{"x*2^40", func(v []float32) { scaleAll(v, 0x1p40) }},
		{"x*2^-40", func(v []float32) { scaleAll(v, 0x1p-40) }},
		{"x*2^-100", func(v []float32) { scaleAll(v, 0x1p-100) }},
		{"one x=2^12", func(v []float32) { v[len(v)/3] = 0x1p12 }},
	}
	for _, tc := range cases {
		p, ref := packRandom(t, r, tc.c)
		w, err := d.UploadWeight(p)
		must(t, err)
		for _, m := range tc.ms {
			for _, xf := range xforms {
				func() {
					name := fmt.Sprintf("%v/%dx%d/M=%d/%s", tc.c.f, tc.c.n, tc.c.k, m, xf.name)
					f := randF32(r, m*tc.c.k, 2)
					xf.f(f)
					xb, xv := bf16Of(f)
					xbuf, err := d.Alloc(int64(len(xb)))
					must(t, err)
					defer xbuf.Free()
					ybuf, err := d.Alloc(int64(4 * m * tc.c.n))
					must(t, err)
					defer ybuf.Free()
					y0 := make([]float32, m*tc.c.n)
					poison(y0)
					must(t, xbuf.Upload(xb), ybuf.UploadF32(y0))
					if err := st.QGEMMSplit(w, xbuf, ybuf, m, false, 0); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if got := gemvPath(); check && got != tc.path {
						t.Errorf("%s: kernel family %d, want %d", name, got, tc.path)
					}
					checkQGEMMRows(t, name, ybuf, ref, xv, nil, m, tc.c.n, tc.c.k, false, func(int) bool { return true })
				}()
			}
		}
		w.Free()
	}
}

func scaleAll(v []float32, s float32) {
	for i := range v {
		v[i] *= s
	}
}

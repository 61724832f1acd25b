package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

func TestMatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ m, n, k int }{{1, 1, 1}, {1, 7, 3}, {3, 5, 9}, {2, 300, 257}, {17, 64, 1000}, {1, 4096, 64}, {0, 3, 3}, {2, 3, 0}} {
		x := randSlice(r, tc.m*tc.k)
		w := randSlice(r, tc.n*tc.k)
		y := randSlice(r, tc.m*tc.n)
		MatMul(y, x, w, tc.m, tc.n, tc.k)
		for i := 0; i < tc.m; i++ {
			for o := 0; o < tc.n; o++ {
				var want float64
				for j := 0; j < tc.k; j++ {
					want += float64(x[i*tc.k+j]) * float64(w[o*tc.k+j])
				}
				if d := math.Abs(want - float64(y[i*tc.n+o])); d > 1e-5*math.Sqrt(float64(tc.k))+1e-6 {
					t.Fatalf("%+v: y[%d][%d] = %v, want %v", tc, i, o, y[i*tc.n+o], want)
				}
			}
		}
	}
}

func TestRMSNorm(t *testing.T) {
	x := []float32{1, 2, 3, 4, -1, -1, -1, -1}
	y := make([]float32, 8)
	RMSNorm(y, x, []float32{1, 1, 2, 2}, 2, 4, 0)
	rms := math.Sqrt(30.0 / 4)
	want := []float64{1 / rms, 2 / rms, 6 / rms, 8 / rms, -1, -1, -2, -2}
	for i := range want {
		if math.Abs(float64(y[i])-want[i]) > 1e-6 {
			t.Fatalf("y[%d] = %v, want %v", i, y[i], want[i])
		}
	}
	RMSNorm(x, x, nil, 2, 4, 0) // aliasing, unweighted
	if math.Abs(float64(x[3])-4/rms) > 1e-6 || x[4] != -1 {
		t.Fatalf("unweighted: %v", x)
	}
}

func TestRoPEInverse(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	x := randSlice(r, 2*8)
	orig := slices.Clone(x)
	cos, sin := make([]float32, 8), make([]float32, 8)
	for i := range cos {
		a := float64(i) * 0.7
		cos[i], sin[i] = float32(math.Cos(a)), float32(math.Sin(a))
	}
	RoPEInterleaved(x, cos, sin, 2, 4, 1)
	// pair (0,1) of row 0 has angle 0: unchanged; pair 1 of row 0 angle 0.7
	a, b := float64(orig[2]), float64(orig[3])
	if math.Abs(float64(x[2])-(a*math.Cos(0.7)-b*math.Sin(0.7))) > 1e-6 || math.Abs(float64(x[3])-(b*math.Cos(0.7)+a*math.Sin(0.7))) > 1e-6 {
		t.Fatalf("rotation wrong: %v", x[:4])
	}
	RoPEInterleaved(x, cos, sin, 2, 4, -1)
	for i := range x {
		if math.Abs(float64(x[i]-orig[i])) > 1e-5 {
			t.Fatalf("inverse rotation: x[%d]=%v want %v", i, x[i], orig[i])
		}
	}
}

func TestSoftmax(t *testing.T) {
	inf := float32(math.Inf(-1))
	x := []float32{1, 2, inf, 3, inf, inf}
	Softmax(x, 2, 3)
	e := math.Exp(1)
	if math.Abs(float64(x[1])-e/(1+e)) > 1e-6 || x[2] != 0 || x[3] != 1 || x[4] != 0 || x[5] != 0 {
		t.Fatalf("softmax: %v", x)
	}
}

func TestSwiGLU(t *testing.T) {
	out := make([]float32, 3)
	SwiGLU(out, []float32{20, 1, -3}, []float32{20, -20, 2}, 10)
	want := []float64{10 / (1 + math.Exp(-10)) * 10, 1 / (1 + math.Exp(-1)) * -10, -3 / (1 + math.Exp(3)) * 2}
	for i := range want {
		if math.Abs(float64(out[i])-want[i]) > 1e-5 {
			t.Fatalf("out[%d]=%v want %v", i, out[i], want[i])
		}
	}
}

func TestTopKTies(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(-1))
	tests := []struct {
		scores []float32
		k      int
		want   []int32
	}{
		{[]float32{1, 3, 3, 2}, 3, []int32{1, 2, 3}},
		{[]float32{0, 0, 0, 0}, 2, []int32{0, 1}},
		{[]float32{nan, inf, 1}, 3, []int32{2, 1, 0}},
		{[]float32{5}, 4, []int32{0}},
	}
	for _, tc := range tests {
		idx := make([]int32, tc.k)
		n := TopKN(idx, tc.scores, tc.k)
		if !slices.Equal(idx[:n], tc.want) {
			t.Errorf("TopK(%v,%d) = %v, want %v", tc.scores, tc.k, idx[:n], tc.want)
		}
	}
	// large input takes the partial-selection path; compare with the full sort
	r := rand.New(rand.NewPCG(5, 6))
	s := make([]float32, 1000)
	for i := range s {
		s[i] = float32(r.IntN(50)) // many ties
	}
	a := make([]int32, 20)
	TopK(a, s, 20)
	all := make([]int32, 1000)
	TopK(all, s, 1000)
	if !slices.Equal(a, all[:20]) {
		t.Fatalf("partial %v != full %v", a, all[:20])
	}
	for i := 1; i < 20; i++ {
		if s[a[i]] > s[a[i-1]] || (s[a[i]] == s[a[i-1]] && a[i] < a[i-1]) {
			t.Fatalf("order broken at %d: %v", i, a)
		}
	}
}

func BenchmarkMatVec4096(b *testing.B) {
	b.Logf("SIMD=%q", SIMD)
	r := rand.New(rand.NewPCG(1, 1))
	w := randSlice(r, 4096*4096)
	x := randSlice(r, 4096)
	y := make([]float32, 4096)
	b.SetBytes(4096 * 4096 * 4)
	c0 := cpuSeconds()
	for b.Loop() {
		MatVec(y, w, x, 4096, 4096)
	}
	b.ReportMetric((cpuSeconds()-c0)*1e3/float64(b.N), "cpu-ms/op")
}

func BenchmarkMatMul64x4096x4096(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	w := randSlice(r, 4096*4096)
	x := randSlice(r, 64*4096)
	y := make([]float32, 64*4096)
	c0 := cpuSeconds()
	for b.Loop() {
		MatMul(y, x, w, 64, 4096, 4096)
	}
	flop := float64(2*64*4096*4096) * float64(b.N)
	b.ReportMetric(flop/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	if c := cpuSeconds() - c0; c > 0 {
		b.ReportMetric(flop/c/1e9, "GFLOP/cpu-s")
	}
}

// BenchmarkMemBandwidth measures the machine's streaming read bandwidth (sum of a
// 256 MiB float32 array over all workers): the roofline for GEMV-bound decode.
func BenchmarkMemBandwidth(b *testing.B) {
	a := make([]float32, 64<<20)
	for i := range a {
		a[i] = 1
	}
	sums := make([]float32, 64)
	b.SetBytes(int64(len(a)) * 4)
	for b.Loop() {
		parallelFor(len(a), 1024, len(a)*16, func(lo, hi int) {
			var s0, s1, s2, s3 float32
			for i := lo; i+4 <= hi; i += 4 {
				s0 += a[i]
				s1 += a[i+1]
				s2 += a[i+2]
				s3 += a[i+3]
			}
			sums[lo*63/len(a)] = s0 + s1 + s2 + s3
		})
	}
}

// TestMatMulBatchInvariant: a row's result is bit-identical whatever the batch.
func TestMatMulBatchInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const m, n, k = 7, 45, 333
	x := randSlice(r, m*k)
	w := randSlice(r, n*k)
	y := make([]float32, m*n)
	MatMul(y, x, w, m, n, k)
	for i := 0; i < m; i++ {
		yi := make([]float32, n)
		MatMul(yi, x[i*k:(i+1)*k], w, 1, n, k)
		if !slices.Equal(yi, y[i*n:(i+1)*n]) {
			t.Fatalf("row %d differs alone and batched", i)
		}
	}
}

package kernels

import (
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"
)

// Backend is the operation set the DeepSeek-V4 forward pass needs. CPU implements it in
// pure Go; a CUDA backend implements the same signatures so the conformance suite can
// compare them op by op. All slices are float32 row-major; shapes are explicit.
type Backend interface {
	// MatMul computes y[m][n] = x[m][k] · w[n][k]ᵀ (nn.Linear without bias).
	MatMul(y, x, w []float32, m, n, k int)
	// RMSNorm normalises each of the rows of x ([rows][n]) to y: y = w ⊙ x / sqrt(mean(x²)+eps);
	// w == nil means unweighted (w = 1).
	RMSNorm(y, x, w []float32, rows, n int, eps float32)
	// RoPEInterleaved rotates channel pairs (2i, 2i+1) of each row of x ([rows][2*half]) by
	// the per-row angles whose cos/sin are given ([rows][half]); sign -1 rotates backwards.
	RoPEInterleaved(x, cos, sin []float32, rows, half int, sign float32)
	// Softmax replaces each row of x ([rows][n]) by its softmax (max-subtracted, float32).
	Softmax(x []float32, rows, n int)
	// SwiGLU writes out[i] = silu(min(gate[i], limit)) * clamp(up[i], -limit, limit);
	// limit <= 0 disables the clamp.
	SwiGLU(out, gate, up []float32, limit float32)
	// TopK writes into idx the indices of the k largest scores, largest first; equal scores
	// are ordered by ascending index; NaN ranks below -Inf.
	TopK(idx []int32, scores []float32, k int)
}

// CPU is the pure-Go Backend. Its zero value is ready to use.
type CPU struct{}

var _ Backend = CPU{}

// MatMul implements Backend with the package function MatMul.
func (CPU) MatMul(y, x, w []float32, m, n, k int) { MatMul(y, x, w, m, n, k) }

// RMSNorm implements Backend with the package function RMSNorm.
func (CPU) RMSNorm(y, x, w []float32, rows, n int, eps float32) { RMSNorm(y, x, w, rows, n, eps) }

// RoPEInterleaved implements Backend with the package function RoPEInterleaved.
func (CPU) RoPEInterleaved(x, cos, sin []float32, rows, half int, sign float32) {
	RoPEInterleaved(x, cos, sin, rows, half, sign)
}

// Softmax implements Backend with the package function Softmax.
func (CPU) Softmax(x []float32, rows, n int) { Softmax(x, rows, n) }

// SwiGLU implements Backend with the package function SwiGLU.
func (CPU) SwiGLU(out, gate, up []float32, limit float32) { SwiGLU(out, gate, up, limit) }

// TopK implements Backend with the package function TopK.
func (CPU) TopK(idx []int32, scores []float32, k int) { TopK(idx, scores, k) }

func need(op string, s []float32, n int) {
	if len(s) < n {
		panic(fmt.Sprintf("kernels.%s: slice of length %d, need %d", op, len(s), n))
	}
}

// SIMD names the vector instructions the MatMul micro-kernels use: "" (portable scalar
// Go, the default build) or "avx2+fma" (built with GOEXPERIMENT=simd on a CPU with AVX2
// and FMA).
var SIMD = ""

// Workers is the number of goroutines the parallel ops use (default GOMAXPROCS at init).
// Set it before use; it is read, not locked.
var Workers = runtime.GOMAXPROCS(0)

// parallelFor runs body(lo, hi) over [0, n) split into contiguous chunks, one per worker,
// each chunk a multiple of align (except the last). It runs inline when work is small.
func parallelFor(n, align int, work int, body func(lo, hi int)) {
	w := Workers
	if w < 1 {
		w = 1
	}
	// below ~64k multiply-adds, goroutine start-up costs more than it saves
	if w == 1 || work < 1<<16 || n < 2*align {
		body(0, n)
		return
	}
	chunk := (n + w - 1) / w
	chunk = (chunk + align - 1) / align * align
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			body(lo, hi)
		}(lo, hi)
	}
	wg.Wait()
}

// Dot returns sum_i a[i]*b[i] over len(a) elements, accumulated in float32 over four lanes.
func Dot(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+8 <= n; i += 8 {
		s0 += a[i]*b[i] + a[i+4]*b[i+4]
		s1 += a[i+1]*b[i+1] + a[i+5]*b[i+5]
		s2 += a[i+2]*b[i+2] + a[i+6]*b[i+6]
		s3 += a[i+3]*b[i+3] + a[i+7]*b[i+7]
	}
	for ; i < n; i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// dot4 and dot2x4 are the MatMul micro-kernels: the portable scalar ones below, or the
// AVX2+FMA ones of simd_amd64.go when built with GOEXPERIMENT=simd on a CPU that has
// them. Within one build both accumulate every product in the same order, so that a
// row's result does not depend on how rows are batched (batch invariance).
var (
	dot4   = dot4Scalar
	dot2x4 = dot2x4Scalar
)

// dot4Scalar returns the dot products of x with four rows w0..w3 (len(x) each),
// sharing the loads of x; each product accumulates in index order, as dot2x4Scalar.
func dot4Scalar(x, w0, w1, w2, w3 []float32) (float32, float32, float32, float32) {
	n := len(x)
	w0, w1, w2, w3 = w0[:n], w1[:n], w2[:n], w3[:n]
	var a0, a1, a2, a3 float32
	for i, v := range x {
		a0 += v * w0[i]
		a1 += v * w1[i]
		a2 += v * w2[i]
		a3 += v * w3[i]
	}
	return a0, a1, a2, a3
}

// dot2x4Scalar returns the 8 dot products of rows x0, x1 with rows w0..w3 (len(x0)
// each), sharing every load between two or four products.
func dot2x4Scalar(x0, x1, w0, w1, w2, w3 []float32) (a, b [4]float32) {
	n := len(x0)
	x1, w0, w1, w2, w3 = x1[:n], w0[:n], w1[:n], w2[:n], w3[:n]
	var a0, a1, a2, a3, b0, b1, b2, b3 float32
	for i := 0; i < n; i++ {
		u, v := x0[i], x1[i]
		p0, p1, p2, p3 := w0[i], w1[i], w2[i], w3[i]
		a0 += u * p0
		a1 += u * p1
		a2 += u * p2
		a3 += u * p3
		b0 += v * p0
		b1 += v * p1
		b2 += v * p2
		b3 += v * p3
	}
	return [4]float32{a0, a1, a2, a3}, [4]float32{b0, b1, b2, b3}
}

// MatVec computes y[n] = w[n][k] · x[k]. It is MatMul with m = 1.
func MatVec(y, w, x []float32, n, k int) { MatMul(y, x, w, 1, n, k) }

// MatMul computes y[m][n] = x[m][k] · w[n][k]ᵀ, the product of nn.Linear (no bias).
// Output features are split over Workers goroutines; within a worker, tiles of w small
// enough to stay in cache are applied to every row of x, two rows by four output
// features at a time. Every output is accumulated in the same order whatever m is, so
// y's row r depends only on x's row r (batch invariance: a sequence gets bit-identical
// logits alone or batched, in one prefill or token by token).
func MatMul(y, x, w []float32, m, n, k int) {
	need("MatMul y", y, m*n)
	need("MatMul x", x, m*k)
	need("MatMul w", w, n*k)
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		clear(y[:m*n])
		return
	}
	// tile of w rows: ~128 KiB
	tile := max(4, (32<<10)/k/4*4)
	parallelFor(n, 4, m*n*k, func(lo, hi int) {
		for t0 := lo; t0 < hi; t0 += tile {
			t1 := min(t0+tile, hi)
			r := 0
			for ; r+2 <= m; r += 2 {
				x0, x1 := x[r*k:r*k+k], x[(r+1)*k:(r+2)*k]
				y0, y1 := y[r*n:r*n+n], y[(r+1)*n:(r+2)*n]
				o := t0
				for ; o+4 <= t1; o += 4 {
					a, b := dot2x4(x0, x1, w[o*k:o*k+k], w[(o+1)*k:(o+2)*k], w[(o+2)*k:(o+3)*k], w[(o+3)*k:(o+4)*k])
					copy(y0[o:o+4], a[:])
					copy(y1[o:o+4], b[:])
				}
				for ; o < t1; o++ {
					y0[o] = Dot(x0, w[o*k:o*k+k])
					y1[o] = Dot(x1, w[o*k:o*k+k])
				}
			}
			for ; r < m; r++ {
				xr := x[r*k : r*k+k]
				yr := y[r*n : r*n+n]
				o := t0
				for ; o+4 <= t1; o += 4 {
					yr[o], yr[o+1], yr[o+2], yr[o+3] = dot4(xr, w[o*k:o*k+k], w[(o+1)*k:(o+2)*k], w[(o+2)*k:(o+3)*k], w[(o+3)*k:(o+4)*k])
				}
				for ; o < t1; o++ {
					yr[o] = Dot(xr, w[o*k:o*k+k])
				}
			}
		}
	})
}

// RMSNorm computes, for each of rows rows of x ([rows][n]), y = w ⊙ x / sqrt(mean(x²) + eps)
// in float32 (the oracle's DeepseekV4RMSNorm and, with w == nil, DeepseekV4UnweightedRMSNorm).
// y may alias x.
func RMSNorm(y, x, w []float32, rows, n int, eps float32) {
	need("RMSNorm x", x, rows*n)
	need("RMSNorm y", y, rows*n)
	if w != nil {
		need("RMSNorm w", w, n)
	}
	for r := 0; r < rows; r++ {
		xr := x[r*n : r*n+n]
		yr := y[r*n : r*n+n]
		var ss float64
		for _, v := range xr {
			ss += float64(v) * float64(v)
		}
		inv := float32(1 / math.Sqrt(ss/float64(n)+float64(eps)))
		if w == nil {
			for i, v := range xr {
				yr[i] = v * inv
			}
		} else {
			for i, v := range xr {
				yr[i] = w[i] * (v * inv)
			}
		}
	}
}

// RoPEInterleaved rotates, in place, the channel pairs (2i, 2i+1) of each of rows rows of
// x ([rows][2*half], row stride 2*half) by the angle whose cosine and sine are
// cos[r*half+i], sin[r*half+i]: (a, b) -> (a·c - s·b·sign, b·c + s·a·sign). sign = -1 applies
// the inverse rotation (used on the attention output). Source: the oracle's
// apply_rotary_pos_emb with rotate_half over interleaved pairs.
func RoPEInterleaved(x, cos, sin []float32, rows, half int, sign float32) {
	need("RoPEInterleaved x", x, rows*2*half)
	need("RoPEInterleaved cos", cos, rows*half)
	need("RoPEInterleaved sin", sin, rows*half)
	for r := 0; r < rows; r++ {
		xr := x[r*2*half : (r+1)*2*half]
		c := cos[r*half : (r+1)*half]
		s := sin[r*half : (r+1)*half]
		for i := 0; i < half; i++ {
			a, b := xr[2*i], xr[2*i+1]
			si := s[i] * sign
			xr[2*i] = a*c[i] - b*si
			xr[2*i+1] = b*c[i] + a*si
		}
	}
}

// Softmax replaces each row of x ([rows][n]) by exp(x - max) / sum. -Inf entries get 0;
// a row of all -Inf becomes all 0.
func Softmax(x []float32, rows, n int) {
	need("Softmax x", x, rows*n)
	for r := 0; r < rows; r++ {
		xr := x[r*n : r*n+n]
		mx := float32(math.Inf(-1))
		for _, v := range xr {
			if v > mx {
				mx = v
			}
		}
		if math.IsInf(float64(mx), -1) {
			clear(xr)
			continue
		}
		var sum float64
		for i, v := range xr {
			e := float32(math.Exp(float64(v - mx)))
			xr[i] = e
			sum += float64(e)
		}
		inv := float32(1 / sum)
		for i := range xr {
			xr[i] *= inv
		}
	}
}

// Silu returns x·sigmoid(x).
func Silu(x float32) float32 { return x / (1 + float32(math.Exp(float64(-x)))) }

// SwiGLU writes out[i] = silu(min(gate[i], limit)) · clamp(up[i], -limit, limit) for
// i < len(out) (the oracle's DeepseekV4MLP / DeepseekV4Experts._apply_gate with
// swiglu_limit). limit <= 0 disables both clamps. out may alias gate or up.
func SwiGLU(out, gate, up []float32, limit float32) {
	n := len(out)
	need("SwiGLU gate", gate, n)
	need("SwiGLU up", up, n)
	for i := 0; i < n; i++ {
		g, u := gate[i], up[i]
		if limit > 0 {
			g = min(g, limit)
			u = max(min(u, limit), -limit)
		}
		out[i] = Silu(g) * u
	}
}

// less reports whether score a (index ia) ranks after score b (index ib) in TopK order.
func ranksBefore(a float32, ia int32, b float32, ib int32) bool {
	an, bn := a != a, b != b
	switch {
	case an && bn:
		return ia < ib
	case an:
		return false
	case bn:
		return true
	case a != b:
		return a > b
	default:
		return ia < ib
	}
}

// TopK writes into idx[:k] the indices of the k largest scores, in decreasing order of
// score; equal scores are ordered by ascending index (so the result is deterministic and
// the same on every backend); NaN ranks below every number. k is clamped to len(scores)
// and len(idx); the number written is returned by TopKN.
func TopK(idx []int32, scores []float32, k int) { TopKN(idx, scores, k) }

// TopKN is TopK returning the number of indices written, min(k, len(scores), len(idx)).
func TopKN(idx []int32, scores []float32, k int) int {
	k = min(k, len(scores), len(idx))
	if k <= 0 {
		return 0
	}
	n := len(scores)
	if k*8 >= n || n <= 64 {
		all := make([]int32, n)
		for i := range all {
			all[i] = int32(i)
		}
		sort.Slice(all, func(a, b int) bool {
			return ranksBefore(scores[all[a]], all[a], scores[all[b]], all[b])
		})
		copy(idx, all[:k])
		return k
	}
	// partial selection: keep the best k in idx[:k] sorted by insertion
	cnt := 0
	for i := 0; i < n; i++ {
		ii := int32(i)
		s := scores[i]
		if cnt == k {
			last := idx[k-1]
			if !ranksBefore(s, ii, scores[last], last) {
				continue
			}
			cnt--
		}
		j := cnt
		for j > 0 && ranksBefore(s, ii, scores[idx[j-1]], idx[j-1]) {
			idx[j] = idx[j-1]
			j--
		}
		idx[j] = ii
		cnt++
	}
	return k
}

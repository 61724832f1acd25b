//go:build goexperiment.simd && amd64

package kernels

import "simd/archsimd"

// With GOEXPERIMENT=simd the MatMul micro-kernels use 8-wide AVX2 fused multiply-adds
// when the CPU has AVX2 and FMA. Each output keeps 8 lane sums over i ≡ lane (mod 8),
// adds them in a fixed order, then the scalar tail: the same order in dot4 and dot2x4,
// so batch invariance holds within the build. (Results differ from the scalar build
// by float32 rounding only.)
func init() {
	if archsimd.X86.AVX2() && archsimd.X86.FMA() {
		dot4, dot2x4 = dot4AVX2, dot2x4AVX2
		SIMD = "avx2+fma"
	}
}

// lanes adds the 8 stored lanes of an accumulator in a fixed order.
func lanes(a *[8]float32) float32 {
	return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]))
}

// The kernels end with VZEROUPPER (ClearAVXUpperBits) before any scalar code: the
// scalar float code Go emits uses legacy SSE encodings, which stall on this CPU while
// the upper halves of the YMM registers are dirty (measured: 6x slower on the tiny model).

func dot4AVX2(x, w0, w1, w2, w3 []float32) (float32, float32, float32, float32) {
	n := len(x)
	w0, w1, w2, w3 = w0[:n], w1[:n], w2[:n], w3[:n]
	var c0, c1, c2, c3 archsimd.Float32x8
	i := 0
	for ; i+8 <= n; i += 8 {
		xv := archsimd.LoadFloat32x8Slice(x[i:])
		c0 = archsimd.LoadFloat32x8Slice(w0[i:]).MulAdd(xv, c0)
		c1 = archsimd.LoadFloat32x8Slice(w1[i:]).MulAdd(xv, c1)
		c2 = archsimd.LoadFloat32x8Slice(w2[i:]).MulAdd(xv, c2)
		c3 = archsimd.LoadFloat32x8Slice(w3[i:]).MulAdd(xv, c3)
	}
	var s0, s1, s2, s3 [8]float32
	c0.Store(&s0)
	c1.Store(&s1)
	c2.Store(&s2)
	c3.Store(&s3)
	archsimd.ClearAVXUpperBits()
	a0, a1, a2, a3 := lanes(&s0), lanes(&s1), lanes(&s2), lanes(&s3)
	for ; i < n; i++ {
		v := x[i]
		a0 += v * w0[i]
		a1 += v * w1[i]
		a2 += v * w2[i]
		a3 += v * w3[i]
	}
	return a0, a1, a2, a3
}

func dot2x4AVX2(x0, x1, w0, w1, w2, w3 []float32) (a, b [4]float32) {
	n := len(x0)
	x1, w0, w1, w2, w3 = x1[:n], w0[:n], w1[:n], w2[:n], w3[:n]
	var c0, c1, c2, c3, d0, d1, d2, d3 archsimd.Float32x8
	i := 0
	for ; i+8 <= n; i += 8 {
		u := archsimd.LoadFloat32x8Slice(x0[i:])
		v := archsimd.LoadFloat32x8Slice(x1[i:])
		p := archsimd.LoadFloat32x8Slice(w0[i:])
		c0 = p.MulAdd(u, c0)
		d0 = p.MulAdd(v, d0)
		p = archsimd.LoadFloat32x8Slice(w1[i:])
		c1 = p.MulAdd(u, c1)
		d1 = p.MulAdd(v, d1)
		p = archsimd.LoadFloat32x8Slice(w2[i:])
		c2 = p.MulAdd(u, c2)
		d2 = p.MulAdd(v, d2)
		p = archsimd.LoadFloat32x8Slice(w3[i:])
		c3 = p.MulAdd(u, c3)
		d3 = p.MulAdd(v, d3)
	}
	var s [8][8]float32
	c0.Store(&s[0])
	c1.Store(&s[1])
	c2.Store(&s[2])
	c3.Store(&s[3])
	d0.Store(&s[4])
	d1.Store(&s[5])
	d2.Store(&s[6])
	d3.Store(&s[7])
	archsimd.ClearAVXUpperBits()
	a = [4]float32{lanes(&s[0]), lanes(&s[1]), lanes(&s[2]), lanes(&s[3])}
	b = [4]float32{lanes(&s[4]), lanes(&s[5]), lanes(&s[6]), lanes(&s[7])}
	for ; i < n; i++ {
		u, v := x0[i], x1[i]
		a[0] += u * w0[i]
		a[1] += u * w1[i]
		a[2] += u * w2[i]
		a[3] += u * w3[i]
		b[0] += v * w0[i]
		b[1] += v * w1[i]
		b[2] += v * w2[i]
		b[3] += v * w3[i]
	}
	return a, b
}

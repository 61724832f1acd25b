package numfmt

import "math"

// e4m3Table holds the float32 value of every FP8 E4M3FN code (OCP FP8
// specification: 1 sign, 4 exponent bits with bias 7, 3 mantissa bits; no
// infinities; S.1111.111 is NaN; largest finite magnitude 448).
var e4m3Table = func() (t [256]float32) {
	for c := range 256 {
		t[c] = decodeE4M3(uint8(c))
	}
	return t
}()

func decodeE4M3(c uint8) float32 {
	sign := float32(1)
	if c&0x80 != 0 {
		sign = -1
	}
	e := int(c>>3) & 0xf
	m := int(c & 7)
	if e == 15 && m == 7 {
		return float32(math.NaN())
	}
	if e == 0 {
		return sign * float32(m) / 8 * float32(math.Ldexp(1, -6))
	}
	return sign * (1 + float32(m)/8) * float32(math.Ldexp(1, e-7))
}

// E4M3ToF32 decodes one FP8 E4M3FN code (exact). 0x7f and 0xff are NaN.
func E4M3ToF32(c uint8) float32 { return e4m3Table[c] }

// E4M3Max is the largest finite FP8 E4M3FN magnitude.
const E4M3Max = 448

// F32ToE4M3 encodes f as FP8 E4M3FN with round-to-nearest-even, saturating
// magnitudes above 448 to ±448 (the "satfinite" cast used by quantizers such
// as NVIDIA ModelOpt and DeepSeek's act_quant after clamping). NaN encodes to
// 0x7f (sign kept); ±Inf saturates.
func F32ToE4M3(f float32) uint8 {
	u := math.Float32bits(f)
	sign := uint8(u>>24) & 0x80
	a := math.Float32frombits(u & 0x7fffffff)
	if a != a {
		return sign | 0x7f
	}
	if a >= E4M3Max {
		return sign | 0x7e
	}
	// Smallest normal is 2^-6; subnormals have step 2^-9.
	if a < 1.0/64 {
		// Subnormal: value = m * 2^-9, m in 0..7 (8 rounds up to the min normal).
		q := a * 512
		m := roundHalfEven(q)
		return sign | uint8(m) // m==8 gives 0x08 = 2^-6, the smallest normal: correct
	}
	// Normal: round the 23-bit mantissa to 3 bits, ties to even, letting the
	// carry run into the exponent (branch-free), then rebias 127 -> 7.
	bits := math.Float32bits(a)
	r := (bits + 0x7ffff + (bits>>20)&1) >> 20 // (exp32 << 3) | m3
	code := r - 120<<3
	if code > 0x7e {
		return sign | 0x7e
	}
	return sign | uint8(code)
}

func roundHalfEven(q float32) int {
	f := math.Floor(float64(q))
	r := float64(q) - f
	n := int(f)
	if r > 0.5 || (r == 0.5 && n&1 == 1) {
		n++
	}
	return n
}

// E4M3BytesToF32 decodes FP8 E4M3FN codes: dst[i] = E4M3ToF32(src[i]).
func E4M3BytesToF32(dst []float32, src []byte) error {
	if len(src) < len(dst) {
		return ErrShortBuffer
	}
	src = src[:len(dst)]
	for i, c := range src {
		dst[i] = e4m3Table[c]
	}
	return nil
}

// UE8M0ToF32 decodes an unsigned E8M0 scale byte: 2^(b-127). 255 is NaN
// (OCP MX specification). b=0 gives 2^-127, a float32 subnormal (exact).
func UE8M0ToF32(b uint8) float32 {
	if b == 255 {
		return float32(math.NaN())
	}
	return ue8m0Table[b]
}

var ue8m0Table = func() (t [256]float32) {
	for b := range 255 {
		t[b] = float32(math.Ldexp(1, b-127))
	}
	t[255] = float32(math.NaN())
	return t
}()

// F32ToUE8M0Ceil returns the smallest E8M0 code whose value 2^(b-127) is >= f,
// the rounding DeepSeek's quantizers use for scales (ceil of log2). f must be
// positive and finite; f <= 2^-127 gives 0, f > 2^127 gives 254.
func F32ToUE8M0Ceil(f float32) uint8 {
	if !(f > 0) {
		return 0
	}
	frac, exp := math.Frexp(float64(f)) // f = frac * 2^exp, frac in [0.5,1)
	e := exp - 1                        // f = (2*frac) * 2^e
	if frac != 0.5 {
		e++ // not a power of two: round up
	}
	b := e + 127
	if b < 0 {
		return 0
	}
	if b > 254 {
		return 254
	}
	return uint8(b)
}

// UE8M0BytesToF32 decodes E8M0 scale bytes into dst.
func UE8M0BytesToF32(dst []float32, src []byte) error {
	if len(src) < len(dst) {
		return ErrShortBuffer
	}
	src = src[:len(dst)]
	for i, c := range src {
		dst[i] = ue8m0Table[c]
	}
	return nil
}

package numfmt

import "math"

// e2m1Table is the value of every FP4 E2M1 code (OCP MX specification; the
// FP4_TABLE of DeepSeek's inference/convert.py): bit 3 is the sign, then 2
// exponent bits (bias 1) and 1 mantissa bit; no Inf or NaN.
var e2m1Table = [16]float32{
	0, 0.5, 1, 1.5, 2, 3, 4, 6,
	-0.0, -0.5, -1, -1.5, -2, -3, -4, -6,
}

// e2m1Pairs decodes one packed byte: [low nibble value, high nibble value].
var e2m1Pairs [256][2]float32

func init() {
	e2m1Table[8] = negZero()
	for b := range 256 {
		e2m1Pairs[b] = [2]float32{e2m1Table[b&0xf], e2m1Table[b>>4]}
	}
}

// E2M1PairToF32 decodes the two E2M1 values packed in b: the low nibble
// (even element) first.
func E2M1PairToF32(b uint8) [2]float32 { return e2m1Pairs[b] }

func negZero() float32 {
	var z float32
	return -z
}

// E2M1ToF32 decodes the low 4 bits of c as an FP4 E2M1 code (exact).
func E2M1ToF32(c uint8) float32 { return e2m1Table[c&0xf] }

// E2M1Max is the largest FP4 E2M1 magnitude.
const E2M1Max = 6

// F32ToE2M1 encodes f as an E2M1 code with round-to-nearest-even on the FP4
// grid {0, 0.5, 1, 1.5, 2, 3, 4, 6}, saturating at ±6, bit for bit as NVIDIA
// ModelOpt's NVFP4QTensor._cast_fp4: the sign bit is set for f < 0 (so -0
// encodes to +0 and -0.1 to -0); NaN encodes to +0.
func F32ToE2M1(f float32) uint8 {
	sign := b2u(f < 0) << 3 // -0 encodes as +0, as ModelOpt's _cast_fp4
	a := math.Float32frombits(math.Float32bits(f) &^ (1 << 31))
	// Count the midpoints between grid points that a lies above; "<=" at the
	// midpoints below even codes and "<" below odd ones gives ties-to-even.
	// Branch-free (quantizing random weights would mispredict every branch);
	// NaN compares false everywhere and encodes to 0 (the sign is dropped).
	c := b2u(a > 0.25) + b2u(a >= 0.75) + b2u(a > 1.25) + b2u(a >= 1.75) +
		b2u(a > 2.5) + b2u(a >= 3.5) + b2u(a > 5)
	return sign | c
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// E2M1PackedToF32 decodes packed FP4: byte j of src holds element 2j in its
// LOW nibble and element 2j+1 in its HIGH nibble (DeepSeek's convert.py and
// PyTorch's float4_e2m1fn_x2). dst gets len(dst) values; len(dst) may be odd.
func E2M1PackedToF32(dst []float32, src []byte) error {
	if len(src) < (len(dst)+1)/2 {
		return ErrShortBuffer
	}
	n := len(dst) / 2
	for j, b := range src[:n] {
		p := &e2m1Pairs[b]
		d := dst[2*j : 2*j+2 : 2*j+2]
		d[0], d[1] = p[0], p[1]
	}
	if len(dst)%2 == 1 {
		dst[len(dst)-1] = e2m1Table[src[n]&0xf]
	}
	return nil
}

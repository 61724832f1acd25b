package numfmt

import (
	"encoding/binary"
	"math"
)

// BF16ToF32 widens a bfloat16 bit pattern to float32. Exact: bfloat16 is the
// upper half of a float32, so NaN payloads and signed zeros are kept.
func BF16ToF32(b uint16) float32 {
	return math.Float32frombits(uint32(b) << 16)
}

// F32ToBF16 narrows f to bfloat16 with round-to-nearest-even, the rounding of
// PyTorch's tensor.to(torch.bfloat16). NaN stays NaN (sign and the top payload
// bits kept, quiet bit forced so that rounding can never turn it into Inf);
// values beyond the bfloat16 range round to ±Inf as in IEEE 754.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN
		return uint16(u>>16) | 0x0040
	}
	// Round to nearest even on the 16 discarded bits.
	rounding := uint32(0x7fff) + (u>>16)&1
	return uint16((u + rounding) >> 16)
}

// BF16BytesToF32 decodes len(dst) little-endian bfloat16 values from src into
// dst. It returns ErrShortBuffer when src holds fewer than 2*len(dst) bytes.
func BF16BytesToF32(dst []float32, src []byte) error {
	if len(src) < 2*len(dst) {
		return ErrShortBuffer
	}
	src = src[:2*len(dst)]
	// Four values per 8-byte load.
	n4 := len(dst) &^ 3
	for i := 0; i < n4; i += 4 {
		v := binary.LittleEndian.Uint64(src[2*i:])
		d := dst[i : i+4 : i+4]
		d[0] = math.Float32frombits(uint32(v) << 16)
		d[1] = math.Float32frombits(uint32(v>>16) << 16)
		d[2] = math.Float32frombits(uint32(v>>32) << 16)
		d[3] = math.Float32frombits(uint32(v>>48) << 16)
	}
	for i := n4; i < len(dst); i++ {
		dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
	}
	return nil
}

// F32ToBF16Bytes encodes src as little-endian bfloat16 (RNE, NaN kept) into
// dst, which must hold 2*len(src) bytes (ErrShortBuffer otherwise).
func F32ToBF16Bytes(dst []byte, src []float32) error {
	if len(dst) < 2*len(src) {
		return ErrShortBuffer
	}
	for i, f := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F32ToBF16(f))
	}
	return nil
}

// F32BytesToF32 decodes len(dst) little-endian float32 values from src.
func F32BytesToF32(dst []float32, src []byte) error {
	if len(src) < 4*len(dst) {
		return ErrShortBuffer
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
	return nil
}

// F32ToBytes encodes src as little-endian float32 into dst (4*len(src) bytes).
func F32ToBytes(dst []byte, src []float32) error {
	if len(dst) < 4*len(src) {
		return ErrShortBuffer
	}
	for i, f := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(f))
	}
	return nil
}

// F64BytesToF32 decodes len(dst) little-endian float64 values from src,
// rounding each to the nearest float32.
func F64BytesToF32(dst []float32, src []byte) error {
	if len(src) < 8*len(dst) {
		return ErrShortBuffer
	}
	for i := range dst {
		dst[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(src[8*i:])))
	}
	return nil
}

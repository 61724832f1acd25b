package numfmt

import (
	"encoding/binary"
	"errors"

	"github.com/x448/float16"
)

// ErrShortBuffer is returned by the batch converters when a source or
// destination buffer is smaller than the element count requires.
var ErrShortBuffer = errors.New("numfmt: buffer too short")

// F16ToF32 widens an IEEE 754 binary16 bit pattern to float32 (exact).
func F16ToF32(h uint16) float32 { return float16.Frombits(h).Float32() }

// F32ToF16 narrows f to IEEE 754 binary16 with round-to-nearest-even.
func F32ToF16(f float32) uint16 { return float16.Fromfloat32(f).Bits() }

// F16BytesToF32 decodes len(dst) little-endian binary16 values from src.
func F16BytesToF32(dst []float32, src []byte) error {
	if len(src) < 2*len(dst) {
		return ErrShortBuffer
	}
	for i := range dst {
		dst[i] = float16.Frombits(binary.LittleEndian.Uint16(src[2*i:])).Float32()
	}
	return nil
}

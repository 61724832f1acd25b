package convert

import (
	"fmt"
	"math"

	"github.com/dsv4go/dsv4go/internal/numfmt"
)

// FP8BlockSize is the side of the square FP8 weight-scale block (128x128), as
// in DeepSeek's published checkpoints ("weight_block_size": [128, 128]).
const FP8BlockSize = 128

// ue8m0For returns the UE8M0 code of the smallest power of two s with
// amax / s <= limit (s = 2^ceil(log2(amax/limit))), and s itself. amax = 0
// gives s = 1 (code 127). This is the scale rule of DeepSeek's quantizers
// with scale_fmt "ue8m0": no value saturates after scaling.
func ue8m0For(amax, limit float32) (uint8, float32) {
	if !(amax > 0) || math.IsInf(float64(amax), 0) {
		return 127, 1
	}
	b := numfmt.F32ToUE8M0Ceil(amax / limit)
	return b, numfmt.UE8M0ToF32(b)
}

// QuantizeFP8Block quantizes a row-major [rows, cols] float32 weight to FP8
// E4M3FN with one UE8M0 scale per 128x128 block (partial blocks at the
// edges): s = 2^ceil(log2(amax_block/448)), q = e4m3(w/s) with round to
// nearest even. It returns q [rows*cols] and the scales
// [ceil(rows/128) * ceil(cols/128)]. Dequantization q*s is exact up to the
// E4M3 rounding (relative error <= 2^-4 for normal values).
func QuantizeFP8Block(w []float32, rows, cols int) (q, scales []byte, err error) {
	if rows <= 0 || cols <= 0 || len(w) != rows*cols {
		return nil, nil, fmt.Errorf("convert: FP8 block: %d values for [%d %d]", len(w), rows, cols)
	}
	br, bc := ceilDiv(rows, FP8BlockSize), ceilDiv(cols, FP8BlockSize)
	q = make([]byte, rows*cols)
	scales = make([]byte, br*bc)
	for i := range br {
		r0, r1 := i*FP8BlockSize, min((i+1)*FP8BlockSize, rows)
		for j := range bc {
			c0, c1 := j*FP8BlockSize, min((j+1)*FP8BlockSize, cols)
			var amax float32
			for r := r0; r < r1; r++ {
				for _, v := range w[r*cols+c0 : r*cols+c1] {
					amax = max(amax, abs32(v))
				}
			}
			code, s := ue8m0For(amax, numfmt.E4M3Max)
			scales[i*bc+j] = code
			inv := 1 / s // exact: s is a power of two
			for r := r0; r < r1; r++ {
				for c := c0; c < c1; c++ {
					q[r*cols+c] = numfmt.F32ToE4M3(w[r*cols+c] * inv)
				}
			}
		}
	}
	return q, scales, nil
}

// QuantizeMXFP4 quantizes [rows, cols] (cols even) to FP4 E2M1 with one
// UE8M0 scale per 32 inputs of a row, as DeepSeek's routed experts:
// s = 2^ceil(log2(amax/6)), nibble = e2m1(w/s) (round to nearest even),
// packed two per byte with the even column in the low nibble. When cols is
// not a multiple of 32 the last group of each row is shorter (scales
// [rows, ceil(cols/32)], the layout the loader reads). It returns the
// packed weight [rows*cols/2] and the scales [rows*ceil(cols/32)].
func QuantizeMXFP4(w []float32, rows, cols int) (packed, scales []byte, err error) {
	if rows <= 0 || cols <= 0 || cols%2 != 0 || len(w) != rows*cols {
		return nil, nil, fmt.Errorf("convert: MXFP4: %d values for [%d %d] (cols must be even)", len(w), rows, cols)
	}
	groups := ceilDiv(cols, 32)
	packed = make([]byte, rows*cols/2)
	scales = make([]byte, rows*groups)
	for r := range rows {
		row, prow := w[r*cols:(r+1)*cols], packed[r*cols/2:(r+1)*cols/2]
		for g := range groups {
			blk := row[g*32 : min((g+1)*32, cols)]
			var amax float32
			for _, v := range blk {
				amax = max(amax, abs32(v))
			}
			code, s := ue8m0For(amax, numfmt.E2M1Max)
			scales[r*groups+g] = code
			packFP4Mul(prow[g*16:g*16+len(blk)/2], blk, 1/s) // exact: s is a power of two
		}
	}
	return packed, scales, nil
}

// QuantizeNVFP4 quantizes [rows, cols] (cols even) to NVFP4 the way NVIDIA
// ModelOpt does (NVFP4QTensor): a per-tensor global scale g = amax/(6*448)
// (F32, "weight_scale_2"); per 16-input block of a row
// s = e4m3(amax_block/(6*g)) ("weight_scale", 1 where the block is all
// zero, clamped to [2^-9, 448]); nibble = e2m1(w / (float32(s)*g)), round
// to nearest even (ModelOpt's _cast_fp4: -0 and values rounding to 0 from
// above keep only the sign of w < 0). A row's
// last block is shorter when cols is not a multiple of 16. It returns the
// packed weight [rows*cols/2], the E4M3 scales [rows*ceil(cols/16)] and g.
func QuantizeNVFP4(w []float32, rows, cols int) (packed, scales []byte, global float32, err error) {
	if rows <= 0 || cols <= 0 || cols%2 != 0 || len(w) != rows*cols {
		return nil, nil, 0, fmt.Errorf("convert: NVFP4: %d values for [%d %d] (cols must be even)", len(w), rows, cols)
	}
	var amax float32
	for _, v := range w {
		amax = max(amax, abs32(v))
	}
	global = amax / (numfmt.E2M1Max * numfmt.E4M3Max)
	if !(global > 0) || math.IsInf(float64(global), 0) {
		global = 1
	}
	groups := ceilDiv(cols, 16)
	packed = make([]byte, rows*cols/2)
	scales = make([]byte, rows*groups)
	for r := range rows {
		row, prow := w[r*cols:(r+1)*cols], packed[r*cols/2:(r+1)*cols/2]
		for g := range groups {
			blk := row[g*16 : min((g+1)*16, cols)]
			var bmax float32
			for _, v := range blk {
				bmax = max(bmax, abs32(v))
			}
			bs := bmax / (numfmt.E2M1Max * global)
			if bs == 0 {
				bs = 1
			}
			// Clamp into E4M3's range [2^-9, 448] before the cast, as ModelOpt's
			// _cast_per_block_scale_to_fp8 (no block scale underflows to 0).
			code := numfmt.F32ToE4M3(min(max(bs, 1.0/512), numfmt.E4M3Max))
			scales[r*groups+g] = code
			packFP4Div(prow[g*8:g*8+len(blk)/2], blk, numfmt.E4M3ToF32(code)*global)
		}
	}
	return packed, scales, global, nil
}

func packFP4Mul(dst []byte, src []float32, inv float32) {
	src = src[:2*len(dst)]
	for j := range dst {
		dst[j] = numfmt.F32ToE2M1(src[2*j]*inv) | numfmt.F32ToE2M1(src[2*j+1]*inv)<<4
	}
}

// packFP4Div divides (rather than multiplying by a reciprocal) to round as
// ModelOpt's weight / (scale * global) does.
func packFP4Div(dst []byte, src []float32, d float32) {
	src = src[:2*len(dst)]
	for j := range dst {
		dst[j] = numfmt.F32ToE2M1(src[2*j]/d) | numfmt.F32ToE2M1(src[2*j+1]/d)<<4
	}
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

func ceilDiv(a, b int) int { return (a + b - 1) / b }

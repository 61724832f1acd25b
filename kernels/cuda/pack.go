package cuda

import (
	"errors"
	"fmt"
	"math"
)

// Format names a weight-only quantization format understood by the GEMM kernels.
type Format int

// The weight formats. Their numbers are the DSV4C_FMT_* values of csrc/dsv4cuda.h.
const (
	// NVFP4: E2M1 values, one E4M3 scale per 16 inputs, one F32 global scale
	// (ModelOpt: W = e2m1 · e4m3(scale) · weight_scale_2).
	NVFP4 Format = 1
	// MXFP4: E2M1 values, one UE8M0 scale per 32 inputs (W = e2m1 · 2^(s-127)); DeepSeek's
	// official FP4 routed experts.
	MXFP4 Format = 2
	// FP8Block: E4M3 values, one UE8M0 scale per 128x128 block (DeepSeek's FP8 weights with
	// scale_fmt "ue8m0").
	FP8Block Format = 3
)

// String returns the format's name ("NVFP4", "MXFP4", "FP8-block").
func (f Format) String() string {
	switch f {
	case NVFP4:
		return "NVFP4"
	case MXFP4:
		return "MXFP4"
	case FP8Block:
		return "FP8-block"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// Errors of the packing functions (also returned, wrapped, by the CUDA entry points).
var (
	// ErrShape: a shape the kernels do not support (K must be a positive multiple of 128,
	// N positive, slices of the documented lengths).
	ErrShape = errors.New("cuda: unsupported shape")
	// ErrInvalidWeights: a NaN scale, or UE8M0 scales spanning more binades than the exact
	// bf16 dequantization can hold (> 110 for FP8-block, > 124 for MXFP4).
	ErrInvalidWeights = errors.New("cuda: invalid quantized weights")
)

// MaxDim bounds N and K of a packed weight (2^20), so sizes never overflow.
const MaxDim = 1 << 20

// Packed is a quantized weight [N][K] rearranged on the host into the tile layout the GEMM
// kernels read (see the package documentation): 16 weight rows x 64 inputs per tile, each
// lane's mma.sync A-fragment words contiguous, rows padded to NPad (a multiple of 64) with
// zeros. Upload it once with Device.UploadWeight.
type Packed struct {
	Format Format
	N, K   int // logical output and input features
	NPad   int // N rounded up to a multiple of 64
	Data   []byte
	Scales []byte
	// Alpha multiplies the float32 accumulators: the global scale times the power of two
	// that the in-register dequantization leaves out (exact).
	Alpha float32
}

// Bytes is the device memory the packed weight occupies (data plus scales).
func (p *Packed) Bytes() int64 { return int64(len(p.Data) + len(p.Scales)) }

// Bit positions, inside a lane's 32-bit word for one k16 step, of the E2M1 code bits of the
// eight fragment values. Value v = 2*reg + half; reg r becomes bf16x2 register r of the
// mma.sync A fragment after (qgemm_common.cuh dec_e2m1): r0 = (q<<6) & M; r1 = (q<<3)&MAG |
// (q<<1)&SG; r2 = q & M; r3 = (q>>4)&MAG | (q<<2)&SG (M = 0x81C081C0, MAG = 0x01C001C0,
// SG = 0x80008000), which places the sign at bf16 bit 15 and exponent/mantissa at bits 8..6:
// the bf16 number e2m1 · 2^-126. The shifts are left shifts but one, so that the device runs
// them as integer multiplies on the FMA pipe; no shifted bit wraps around.
var (
	e2m1MagShift  = [4]int{6, 3, 0, -4}
	e2m1SignShift = [4]int{6, 1, 0, 2}
)

// e2m1Bit returns the word bit that holds bit b (0 = mantissa, 1 = exp lsb, 2 = exp msb,
// 3 = sign) of fragment value v.
func e2m1Bit(v, b int) int {
	reg, half := v>>1, v&1
	if b == 3 {
		return 15 + 16*half - e2m1SignShift[reg]
	}
	return 6 + b + 16*half - e2m1MagShift[reg]
}

// fragCoord returns, for lane (0..31), k16 step j (0..3) and fragment value v (0..7), the
// row within the 16-row tile and the input column within the 64-input tile. Rows follow the
// mma.sync A fragment (l/4 and l/4+8). Inputs are permuted inside the tile (the MMA sums
// over k in any order if A and B agree): lane l's four k16 steps cover inputs
// 16(l%4) .. 16(l%4)+15, so its B fragments are one contiguous 32-byte run of x.
func fragCoord(lane, j, v int) (row, col int) {
	g, t := lane>>2, lane&3
	reg, half := v>>1, v&1
	row = g + 8*(reg&1)
	col = 16*t + 4*j + 2*(reg>>1) + half
	return
}

func checkShape(n, k, group int) error {
	if n <= 0 || k <= 0 || n > MaxDim || k > MaxDim || k%128 != 0 || k%group != 0 {
		return fmt.Errorf("%w: N=%d K=%d (K must be a positive multiple of 128, N,K <= %d)", ErrShape, n, k, MaxDim)
	}
	return nil
}

func padN(n int) int { return (n + 63) / 64 * 64 }

func nibble(w []byte, n, k, row, col int) uint8 {
	b := w[row*(k/2)+col/2]
	if col&1 == 0 {
		return b & 0xf
	}
	return b >> 4
}

// packE2M1 writes the E2M1 tiles; flip(row, col) reports whether a value's sign must be
// inverted and zero(row, col) whether it must become +0 (scale handling).
func packE2M1(w []byte, n, k, npad int, adj func(row, col int, c uint8) uint8) []byte {
	kt := k / 64
	out := make([]byte, npad/16*kt*512)
	for rt := 0; rt < npad/16; rt++ {
		for t := 0; t < kt; t++ {
			tile := out[(rt*kt+t)*512:]
			for lane := 0; lane < 32; lane++ {
				for j := 0; j < 4; j++ {
					var q uint32
					for v := 0; v < 8; v++ {
						r, c := fragCoord(lane, j, v)
						row, col := rt*16+r, t*64+c
						if row >= n {
							continue
						}
						code := adj(row, col, nibble(w, n, k, row, col))
						for b := 0; b < 4; b++ {
							if code>>b&1 != 0 {
								q |= 1 << e2m1Bit(v, b)
							}
						}
					}
					o := lane*16 + j*4
					tile[o] = byte(q)
					tile[o+1] = byte(q >> 8)
					tile[o+2] = byte(q >> 16)
					tile[o+3] = byte(q >> 24)
				}
			}
		}
	}
	return out
}

// nvfp4ScaleCode maps a positive finite E4M3 scale s to the 8-bit code C = (E+9)<<3 | f,
// s = 2^E·(1+f/8); the kernel expands it to the bf16 s·2^119 as C·16 + 0x7680.
func nvfp4ScaleCode(s float64) uint8 {
	e := math.Floor(math.Log2(s))
	f := s/math.Exp2(e) - 1
	return uint8(int(e+9)<<3 | int(math.Round(f*8)))
}

// e4m3Value decodes an E4M3 (fn) byte; NaN for 0x7f/0xff.
func e4m3Value(c uint8) float64 {
	s := 1.0
	if c&0x80 != 0 {
		s = -1
	}
	e := int(c>>3) & 0xf
	m := float64(c & 7)
	if e == 15 && c&7 == 7 {
		return math.NaN()
	}
	if e == 0 {
		return s * m / 8 * math.Exp2(-6)
	}
	return s * (1 + m/8) * math.Exp2(float64(e-7))
}

// PackNVFP4 packs an NVFP4 weight: w is [n][k/2] bytes (two E2M1 per byte, low nibble =
// even input), scales is [n][k/16] E4M3 bytes, global the F32 weight_scale_2.
// Zero scales zero their block; negative scales flip the block's signs; NaN scales and a
// non-finite global give ErrInvalidWeights.
func PackNVFP4(w, scales []byte, global float32, n, k int) (*Packed, error) {
	if err := checkShape(n, k, 16); err != nil {
		return nil, err
	}
	if len(w) != n*k/2 || len(scales) != n*k/16 {
		return nil, fmt.Errorf("%w: NVFP4 want %d weight and %d scale bytes, have %d and %d", ErrShape, n*k/2, n*k/16, len(w), len(scales))
	}
	if math.IsNaN(float64(global)) || math.IsInf(float64(global), 0) {
		return nil, fmt.Errorf("%w: global scale %v", ErrInvalidWeights, global)
	}
	for i, s := range scales {
		if s&0x7f == 0x7f {
			return nil, fmt.Errorf("%w: NaN E4M3 scale at %d", ErrInvalidWeights, i)
		}
	}
	npad := padN(n)
	sc := func(row, col int) uint8 { return scales[row*(k/16)+col/16] }
	data := packE2M1(w, n, k, npad, func(row, col int, c uint8) uint8 {
		s := sc(row, col)
		if s&0x7f == 0 {
			return 0
		}
		if s&0x80 != 0 {
			return c ^ 8
		}
		return c
	})
	// scales: per (row tile, 128-input chunk) 128 bytes; lane l = 4g+t owns bytes
	// [4l, 4l+4): for the chunk's two 64-input tiles h, rows g and g+8 of 16-block t.
	kc := k / 128
	out := make([]byte, npad/16*kc*128)
	for rt := 0; rt < npad/16; rt++ {
		for c := 0; c < kc; c++ {
			for lane := 0; lane < 32; lane++ {
				g, t := lane>>2, lane&3
				for h := 0; h < 2; h++ {
					for hi := 0; hi < 2; hi++ {
						row := rt*16 + g + 8*hi
						if row >= n {
							continue
						}
						s := sc(row, (c*2+h)*64+16*t)
						var code uint8
						if s&0x7f != 0 {
							code = nvfp4ScaleCode(math.Abs(e4m3Value(s)))
						}
						out[(rt*kc+c)*128+lane*4+h*2+hi] = code
					}
				}
			}
		}
	}
	return &Packed{Format: NVFP4, N: n, K: k, NPad: npad, Data: data, Scales: out,
		Alpha: global * 128}, nil
}

func ue8m0Range(scales []byte) (lo, hi int, err error) {
	lo, hi = 255, 0
	for i, s := range scales {
		if s == 0xff {
			return 0, 0, fmt.Errorf("%w: NaN UE8M0 scale at %d", ErrInvalidWeights, i)
		}
		lo, hi = min(lo, int(s)), max(hi, int(s))
	}
	return lo, hi, nil
}

// PackMXFP4 packs an MXFP4 weight: w is [n][k/2] bytes (low nibble = even input), scales is
// [n][k/32] UE8M0 bytes. Scales must span at most 124 binades (ErrInvalidWeights).
func PackMXFP4(w, scales []byte, n, k int) (*Packed, error) {
	if err := checkShape(n, k, 32); err != nil {
		return nil, err
	}
	if len(w) != n*k/2 || len(scales) != n*k/32 {
		return nil, fmt.Errorf("%w: MXFP4 want %d weight and %d scale bytes, have %d and %d", ErrShape, n*k/2, n*k/32, len(w), len(scales))
	}
	lo, hi, err := ue8m0Range(scales)
	if err != nil {
		return nil, err
	}
	if hi-lo > 124 {
		return nil, fmt.Errorf("%w: MXFP4 scales span %d binades (max 124)", ErrInvalidWeights, hi-lo)
	}
	off := 252 - hi
	npad := padN(n)
	data := packE2M1(w, n, k, npad, func(row, col int, c uint8) uint8 { return c })
	// scales: per (row tile, 128-input chunk) 64 bytes; lanes with g = l/4 read the word at
	// 8g + 4(t/2): for tiles h = 0, 1, rows g and g+8 of 32-block t/2.
	kc := k / 128
	out := make([]byte, npad/16*kc*64)
	for rt := 0; rt < npad/16; rt++ {
		for c := 0; c < kc; c++ {
			for g := 0; g < 8; g++ {
				for tt := 0; tt < 2; tt++ {
					for h := 0; h < 2; h++ {
						for hi := 0; hi < 2; hi++ {
							row := rt*16 + g + 8*hi
							if row >= n {
								continue
							}
							out[(rt*kc+c)*64+g*8+tt*4+h*2+hi] = byte(int(scales[row*(k/32)+((c*2+h)*64+32*tt)/32]) + off)
						}
					}
				}
			}
		}
	}
	return &Packed{Format: MXFP4, N: n, K: k, NPad: npad, Data: data, Scales: out,
		Alpha: float32(math.Exp2(float64(hi - 126)))}, nil
}

// PackFP8Block packs an FP8 block-scaled weight: w is [n][k] E4M3 bytes, scales is
// [ceil(n/128)][k/128] UE8M0 bytes. Scales must span at most 110 binades; NaN E4M3 values
// (0x7f, 0xff) give ErrInvalidWeights.
func PackFP8Block(w, scales []byte, n, k int) (*Packed, error) {
	if err := checkShape(n, k, 128); err != nil {
		return nil, err
	}
	nb := (n + 127) / 128
	if len(w) != n*k || len(scales) != nb*(k/128) {
		return nil, fmt.Errorf("%w: FP8-block want %d weight and %d scale bytes, have %d and %d", ErrShape, n*k, nb*(k/128), len(w), len(scales))
	}
	lo, hi, err := ue8m0Range(scales)
	if err != nil {
		return nil, err
	}
	if hi-lo > 110 {
		return nil, fmt.Errorf("%w: FP8 scales span %d binades (max 110)", ErrInvalidWeights, hi-lo)
	}
	for i, c := range w {
		if c&0x7f == 0x7f {
			return nil, fmt.Errorf("%w: NaN E4M3 weight at %d", ErrInvalidWeights, i)
		}
	}
	off := 240 - hi
	npad := padN(n)
	kt := k / 64
	data := make([]byte, npad/16*kt*1024)
	for rt := 0; rt < npad/16; rt++ {
		for t := 0; t < kt; t++ {
			tile := data[(rt*kt+t)*1024:]
			for lane := 0; lane < 32; lane++ {
				for j := 0; j < 4; j++ {
					for v := 0; v < 8; v++ {
						r, c := fragCoord(lane, j, v)
						row, col := rt*16+r, t*64+c
						if row >= n {
							continue
						}
						tile[lane*32+j*8+v] = w[row*k+col]
					}
				}
			}
		}
	}
	sc := make([]byte, len(scales))
	for i, s := range scales {
		sc[i] = byte(int(s) + off)
	}
	return &Packed{Format: FP8Block, N: n, K: k, NPad: npad, Data: data, Scales: sc,
		Alpha: float32(math.Exp2(float64(hi - 120)))}, nil
}

// CheckExpertIDs reports ErrShape unless every id is in [0, e).
func CheckExpertIDs(ids []int32, e int) error {
	for i, id := range ids {
		if id < 0 || int(id) >= e {
			return fmt.Errorf("%w: expert id %d at %d outside [0, %d)", ErrShape, id, i, e)
		}
	}
	return nil
}

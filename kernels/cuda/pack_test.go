package cuda

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dsv4go/dsv4go/internal/numfmt"
)

// The functions below emulate, bit for bit, what csrc/qgemm.cu does in registers, so the
// packing and the exact-dequantization argument are checked on every CI run (no GPU).

func bf16(b uint32) float64 { return float64(math.Float32frombits((b & 0xffff) << 16)) }

func emuScalePair(w uint32, i int, smul, sadd uint32) uint32 {
	b := (w >> (8 * uint(i))) & 0xff
	x := b | b<<16
	return x*smul + sadd*0x10001
}

func emuDecE2M1(q uint32) [4]uint32 {
	const m, mag, sg = 0x81C081C0, 0x01C001C0, 0x80008000
	return [4]uint32{
		q << 6 & m,
		q<<3&mag | q<<1&sg,
		q & m,
		q>>4&mag | q<<2&sg,
	}
}

func emuDecE4M3(w uint32, i int) uint32 {
	b0 := (w >> (8 * uint(i))) & 0xff
	b1 := (w >> (8 * uint(i+1))) & 0xff
	x := b0 | b1<<16
	return (x<<4)&0x07F007F0 | (x<<8)&0x80008000
}

// bmulExact multiplies two bf16 numbers; the test asserts the product is representable.
func bmulExact(t *testing.T, a, b float64) float64 {
	p := a * b
	if float64(numfmt.BF16ToF32(numfmt.F32ToBF16(float32(p)))) != p || (p != 0 && math.Abs(p) < 0x1p-126) {
		t.Fatalf("product %g * %g = %g is not an exact normal bf16", a, b, p)
	}
	return p
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// emulate returns the dequantized [N][K] matrix as the kernel sees it (times Alpha).
func emulate(t *testing.T, p *Packed) []float64 {
	n, k := p.N, p.K
	kt := k / 64
	out := make([]float64, n*k)
	for rt := 0; rt < p.NPad/16; rt++ {
		for tt := 0; tt < kt; tt++ {
			for lane := 0; lane < 32; lane++ {
				g := lane >> 2
				for j := 0; j < 4; j++ {
					var vals [8]float64
					switch p.Format {
					case NVFP4, MXFP4:
						q := le32(p.Data[(rt*kt+tt)*512+lane*16+j*4:])
						d := emuDecE2M1(q)
						var sg, sg8 uint32
						c, h, tq := tt/2, tt%2, lane&3
						var sw uint32
						if p.Format == NVFP4 {
							sw = le32(p.Scales[(rt*(k/128)+c)*128+lane*4:])
							sg = emuScalePair(sw, h*2, 16, 0x7680)
							sg8 = emuScalePair(sw, h*2+1, 16, 0x7680)
						} else {
							sw = le32(p.Scales[(rt*(k/128)+c)*64+g*8+(tq>>1)*4:])
							sg = emuScalePair(sw, h*2, 128, 0)
							sg8 = emuScalePair(sw, h*2+1, 128, 0)
						}
						sc := [4]uint32{sg, sg8, sg, sg8}
						for r := 0; r < 4; r++ {
							vals[2*r] = bmulExact(t, bf16(d[r]), bf16(sc[r]))
							vals[2*r+1] = bmulExact(t, bf16(d[r]>>16), bf16(sc[r]>>16))
						}
					case FP8Block:
						base := (rt*kt+tt)*1024 + lane*32 + j*8
						w0, w1 := le32(p.Data[base:]), le32(p.Data[base+4:])
						s := emuScalePair(uint32(p.Scales[(rt>>3)*(k/128)+tt/2]), 0, 128, 0)
						regs := [4]uint32{emuDecE4M3(w0, 0), emuDecE4M3(w0, 2), emuDecE4M3(w1, 0), emuDecE4M3(w1, 2)}
						for r := 0; r < 4; r++ {
							vals[2*r] = bmulExact(t, bf16(regs[r]), bf16(s))
							vals[2*r+1] = bmulExact(t, bf16(regs[r]>>16), bf16(s>>16))
						}
					}
					for v := 0; v < 8; v++ {
						r, c := fragCoord(lane, j, v)
						row, col := rt*16+r, tt*64+c
						if row >= n {
							if vals[v] != 0 {
								t.Fatalf("padding row %d not zero", row)
							}
							continue
						}
						out[row*k+col] = vals[v] * float64(p.Alpha)
					}
				}
			}
		}
	}
	return out
}

// emulateNat is emulate for csrc/qgemm_large.cu's XM 3 path (mirrored bit for bit: change
// both): lane (g, t) builds the A fragment of k16 step j in natural input order (registers 0 /
// 1: rows g / g + 8, inputs 16j + 2t + {0, 1}; registers 2 / 3: inputs 16j + 8 + 2t + {0, 1})
// from half t % 2 of the words of steps t / 2 and 2 + t / 2 of lane (g, j), with lane-uniform
// instructions (decode_a_nat). The ring stage is built as the producer's load_w builds it for
// a block of rowt row tiles (thread tid of pass q copies uint4 tid of row tile q * RSTEP +
// tid / PER to q * 128 + tid, XORed by wsw_of(tid); past the last row tile it copies the last
// one again), and read at the consumer's offsets; every read instruction must be free of
// shared-memory bank conflicts (the swizzle's purpose).
func emulateNat(t *testing.T, p *Packed, rowt int) []float64 {
	n, k := p.N, p.K
	kt, ntiles := k/64, p.NPad/16
	out := make([]float64, n*k)
	const m, mag, sg = 0x81C081C0, 0x01C001C0, 0x80008000
	wq := 1
	if p.Format == FP8Block {
		wq = 2
	}
	per := 64 * wq // uint4 per row tile and chunk
	rstep := 128 / per
	wsw := func(d int) int {
		if wq == 2 {
			return d >> 3 & 7
		}
		return d >> 3 & 3
	}
	// conflictFree checks one warp-wide 32-bit shared-memory read: lanes reading the same
	// word share it, different words must sit in different banks
	conflictFree := func(what string, addr [32]int) {
		bank := map[int]int{}
		for _, a := range addr {
			if w, ok := bank[a/4%32]; ok && w != a/4 {
				t.Fatalf("%s: bank conflict (words %d and %d)", what, w, a/4)
			}
			bank[a/4%32] = a / 4
		}
	}
	for brt0 := 0; brt0 < ntiles; brt0 += rowt {
		rlim := ntiles - 1 - brt0
		for c := 0; c < k/128; c++ {
			stage := make([]byte, rowt*per*16)
			for tid := 0; tid < 128; tid++ {
				r0, rem := tid/per, tid%per
				src := r0 // row tile of the block this thread copies from
				for q := 0; q < rowt/rstep; q++ {
					r := r0 + q*rstep
					from := p.Data[((brt0+src)*kt+2*c)*32*wq*16+rem*16:][:16]
					copy(stage[((q*128+tid)^wsw(tid))*16:][:16], from)
					if r+rstep <= rlim {
						src += rstep
					}
				}
			}
			for rl := 0; rl < rowt && brt0+rl < ntiles; rl++ {
				rt := brt0 + rl
				for h := 0; h < 2; h++ {
					tt := 2*c + h
					q := (rl*2 + h) * 32 * wq * 16 // the tile's first byte in the stage
					var ax, ay [4][32]int
					for lane := 0; lane < 32; lane++ {
						g, tq := lane>>2, lane&3
						for j := 0; j < 4; j++ {
							var regs, sc [4]uint32
							switch p.Format {
							case NVFP4, MXFP4:
								// words t / 2 and 2 + t / 2 of lane (g, j), swizzled
								at := q + (4*g+(j^(g>>1)))*16 + 4*(tq>>1)
								ax[j][lane], ay[j][lane] = at, at+8
								x, y := le32(stage[at:]), le32(stage[at+8:])
								mg, ms, sh := uint32(64), uint32(2), uint(0)
								if tq&1 != 0 {
									mg, ms, sh = 1, 4, 7
								}
								half := func(q uint32) (uint32, uint32) {
									return q * mg & m, (q*8)>>sh&mag | q*ms&sg
								}
								regs[0], regs[1] = half(x)
								regs[2], regs[3] = half(y)
								var sw uint32
								var smul, sadd uint32
								if p.Format == NVFP4 {
									sw = le32(p.Scales[(rt*(k/128)+c)*128+(4*g+j)*4:])
									smul, sadd = 16, 0x7680
								} else {
									sw = le32(p.Scales[(rt*(k/128)+c)*64+g*8+(j>>1)*4:])
									smul, sadd = 128, 0
								}
								sgv, sg8 := emuScalePair(sw, h*2, smul, sadd), emuScalePair(sw, h*2+1, smul, sadd)
								sc = [4]uint32{sgv, sg8, sgv, sg8}
							case FP8Block:
								ax[j][lane] = q + (8*g+((2*j)^g))*16 + 4*tq
								ay[j][lane] = q + (8*g+((2*j+1)^g))*16 + 4*tq
								x, y := le32(stage[ax[j][lane]:]), le32(stage[ay[j][lane]:])
								regs = [4]uint32{emuDecE4M3(x, 0), emuDecE4M3(x, 2), emuDecE4M3(y, 0), emuDecE4M3(y, 2)}
								s := emuScalePair(uint32(p.Scales[(rt>>3)*(k/128)+c]), 0, 128, 0)
								sc = [4]uint32{s, s, s, s}
							}
							for r := 0; r < 4; r++ {
								for e := 0; e < 2; e++ {
									v := bmulExact(t, bf16(regs[r]>>(16*e)), bf16(sc[r]>>(16*e)))
									row := rt*16 + g + 8*(r&1)
									col := tt*64 + 16*j + 8*(r>>1) + 2*tq + e
									if row >= n {
										if v != 0 {
											t.Fatalf("padding row %d not zero", row)
										}
										continue
									}
									out[row*k+col] = v * float64(p.Alpha)
								}
							}
						}
					}
					for j := 0; j < 4; j++ {
						conflictFree("first word", ax[j])
						conflictFree("second word", ay[j])
					}
				}
			}
		}
	}
	return out
}

// RandNVFP4 etc. are shared with the GPU conformance tests.
func randNVFP4(r *rand.Rand, n, k int) (w, s []byte, global float32) {
	w = make([]byte, n*k/2)
	for i := range w {
		w[i] = byte(r.IntN(256))
	}
	s = make([]byte, n*k/16)
	for i := range s {
		for {
			c := byte(r.IntN(256))
			if c&0x7f != 0x7f {
				s[i] = c
				break
			}
		}
	}
	return w, s, 0.75 / 448
}

func randMXFP4(r *rand.Rand, n, k int) (w, s []byte) {
	w = make([]byte, n*k/2)
	for i := range w {
		w[i] = byte(r.IntN(256))
	}
	s = make([]byte, n*k/32)
	for i := range s {
		s[i] = byte(118 + r.IntN(14))
	}
	return w, s
}

func randFP8(r *rand.Rand, n, k int) (w, s []byte) {
	w = make([]byte, n*k)
	for i := range w {
		for {
			c := byte(r.IntN(256))
			if c&0x7f != 0x7f {
				w[i] = c
				break
			}
		}
	}
	s = make([]byte, (n+127)/128*(k/128))
	for i := range s {
		s[i] = byte(115 + r.IntN(12))
	}
	return w, s
}

// refNVFP4 etc. dequantize with internal/numfmt (the reference decoders).
func refNVFP4(w, s []byte, global float32, n, k int) []float64 {
	out := make([]float64, n*k)
	for i := 0; i < n; i++ {
		for j := 0; j < k; j++ {
			b := w[i*(k/2)+j/2]
			c := b & 0xf
			if j&1 == 1 {
				c = b >> 4
			}
			out[i*k+j] = float64(numfmt.E2M1ToF32(c)) * float64(numfmt.E4M3ToF32(s[i*(k/16)+j/16])) * float64(global)
		}
	}
	return out
}

func refMXFP4(w, s []byte, n, k int) []float64 {
	out := make([]float64, n*k)
	for i := 0; i < n; i++ {
		for j := 0; j < k; j++ {
			b := w[i*(k/2)+j/2]
			c := b & 0xf
			if j&1 == 1 {
				c = b >> 4
			}
			out[i*k+j] = float64(numfmt.E2M1ToF32(c)) * float64(numfmt.UE8M0ToF32(s[i*(k/32)+j/32]))
		}
	}
	return out
}

func refFP8(w, s []byte, n, k int) []float64 {
	out := make([]float64, n*k)
	for i := 0; i < n; i++ {
		for j := 0; j < k; j++ {
			out[i*k+j] = float64(numfmt.E4M3ToF32(w[i*k+j])) * float64(numfmt.UE8M0ToF32(s[(i/128)*(k/128)+j/128]))
		}
	}
	return out
}

func TestPackEmulatedDequantExact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		name string
		n, k int
	}{
		{"square", 64, 128},
		{"ragged-rows", 200, 256},
		{"one-row", 1, 128},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, s, g := randNVFP4(r, c.n, c.k)
			p, err := PackNVFP4(w, s, g, c.n, c.k)
			if err != nil {
				t.Fatal(err)
			}
			cmpExact(t, "NVFP4", emulate(t, p), refNVFP4(w, s, g, c.n, c.k))
			for _, rowt := range []int{4, 8, 16} {
				cmpExact(t, "NVFP4 natural order", emulateNat(t, p, rowt), refNVFP4(w, s, g, c.n, c.k))
			}

			w, s = randMXFP4(r, c.n, c.k)
			p, err = PackMXFP4(w, s, c.n, c.k)
			if err != nil {
				t.Fatal(err)
			}
			cmpExact(t, "MXFP4", emulate(t, p), refMXFP4(w, s, c.n, c.k))
			for _, rowt := range []int{4, 8, 16} {
				cmpExact(t, "MXFP4 natural order", emulateNat(t, p, rowt), refMXFP4(w, s, c.n, c.k))
			}

			w, s = randFP8(r, c.n, c.k)
			p, err = PackFP8Block(w, s, c.n, c.k)
			if err != nil {
				t.Fatal(err)
			}
			cmpExact(t, "FP8", emulate(t, p), refFP8(w, s, c.n, c.k))
			for _, rowt := range []int{4, 8, 16} {
				cmpExact(t, "FP8 natural order", emulateNat(t, p, rowt), refFP8(w, s, c.n, c.k))
			}
		})
	}
}

func cmpExact(t *testing.T, what string, got, want []float64) {
	t.Helper()
	for i := range want {
		// float32 alpha products are exact here (powers of two and a 1-2 bit global)
		if got[i] != want[i] && !(got[i] == 0 && want[i] == 0) {
			t.Fatalf("%s: element %d: got %g, want %g", what, i, got[i], want[i])
		}
	}
}

func TestPackErrors(t *testing.T) {
	tests := []struct {
		name string
		err  error
		f    func() error
	}{
		{"K not multiple of 128", ErrShape, func() error { _, err := PackNVFP4(make([]byte, 32), make([]byte, 4), 1, 1, 64); return err }},
		{"short weights", ErrShape, func() error { _, err := PackMXFP4(make([]byte, 3), make([]byte, 4), 1, 128); return err }},
		{"NaN NVFP4 scale", ErrInvalidWeights, func() error {
			s := make([]byte, 8)
			s[3] = 0x7f
			_, err := PackNVFP4(make([]byte, 64), s, 1, 1, 128)
			return err
		}},
		{"NaN UE8M0", ErrInvalidWeights, func() error {
			s := []byte{127, 127, 127, 255}
			_, err := PackMXFP4(make([]byte, 64), s, 1, 128)
			return err
		}},
		{"scale range", ErrInvalidWeights, func() error {
			_, err := PackFP8Block(make([]byte, 256), []byte{0, 200}, 1, 256)
			return err
		}},
		{"NaN FP8 weight", ErrInvalidWeights, func() error {
			w := make([]byte, 128)
			w[5] = 0xff
			_, err := PackFP8Block(w, []byte{127}, 1, 128)
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.f(); !errors.Is(err, tc.err) {
				t.Fatalf("got %v, want %v", err, tc.err)
			}
		})
	}
}

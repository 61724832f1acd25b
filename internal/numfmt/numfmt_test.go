package numfmt

import (
	"encoding/json"
	"math"
	"os"
	"testing"
)

type goldens struct {
	BF16       [][2]uint32 `json:"bf16"`
	E4M3Decode []uint32    `json:"e4m3_decode_f32_bits"`
	E4M3Encode [][2]uint32 `json:"e4m3_encode"`
}

// loadGoldens reads testdata/goldens.json, written by
// tools/gen_checkpoints.py --numfmt from torch's casts.
func loadGoldens(t *testing.T) *goldens {
	t.Helper()
	b, err := os.ReadFile("testdata/goldens.json")
	if err != nil {
		t.Fatal(err)
	}
	var g goldens
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

func isNaN32(f float32) bool { return f != f }

func TestBF16RoundingMatchesTorch(t *testing.T) {
	g := loadGoldens(t)
	if len(g.BF16) < 1000 {
		t.Fatalf("only %d goldens", len(g.BF16))
	}
	for _, p := range g.BF16 {
		f := math.Float32frombits(p[0])
		got := F32ToBF16(f)
		if isNaN32(f) {
			if !isNaN32(BF16ToF32(got)) {
				t.Errorf("F32ToBF16(NaN %#08x) = %#04x, not NaN", p[0], got)
			}
			if got>>15 != uint16(p[0]>>31) {
				t.Errorf("F32ToBF16(NaN %#08x) lost the sign: %#04x", p[0], got)
			}
			continue
		}
		if uint32(got) != p[1] {
			t.Errorf("F32ToBF16(%#08x = %g) = %#04x, torch %#04x", p[0], f, got, p[1])
		}
	}
}

func TestBF16Exhaustive(t *testing.T) {
	// Every bfloat16 value widens exactly and narrows back to itself.
	for b := range 1 << 16 {
		f := BF16ToF32(uint16(b))
		back := F32ToBF16(f)
		if isNaN32(f) {
			if !isNaN32(BF16ToF32(back)) {
				t.Fatalf("NaN %#04x -> %#04x", b, back)
			}
			continue
		}
		if back != uint16(b) {
			t.Fatalf("bf16 %#04x -> %g -> %#04x", b, f, back)
		}
	}
}

func TestE4M3DecodeAll256(t *testing.T) {
	g := loadGoldens(t)
	if len(g.E4M3Decode) != 256 {
		t.Fatalf("%d codes", len(g.E4M3Decode))
	}
	for c := range 256 {
		got := E4M3ToF32(uint8(c))
		want := math.Float32frombits(g.E4M3Decode[c])
		if isNaN32(want) {
			if !isNaN32(got) {
				t.Errorf("code %#02x = %g, want NaN", c, got)
			}
			continue
		}
		if math.Float32bits(got) != g.E4M3Decode[c] {
			t.Errorf("code %#02x = %g, torch %g", c, got, want)
		}
	}
	// Spot checks from the OCP spec.
	for _, tc := range []struct {
		c    uint8
		want float32
	}{{0x7e, 448}, {0xfe, -448}, {0x08, 1.0 / 64}, {0x01, 1.0 / 512}, {0x38, 1}, {0x00, 0}} {
		if got := E4M3ToF32(tc.c); got != tc.want {
			t.Errorf("E4M3ToF32(%#02x) = %g, want %g", tc.c, got, tc.want)
		}
	}
}

func TestE4M3EncodeMatchesTorch(t *testing.T) {
	g := loadGoldens(t)
	for _, p := range g.E4M3Encode {
		f := math.Float32frombits(p[0])
		if got := F32ToE4M3(f); uint32(got) != p[1] {
			t.Errorf("F32ToE4M3(%g) = %#02x (%g), torch %#02x (%g)", f, got, E4M3ToF32(got), p[1], E4M3ToF32(uint8(p[1])))
		}
	}
	// Round trip of every finite code.
	for c := range 256 {
		f := E4M3ToF32(uint8(c))
		if isNaN32(f) {
			continue
		}
		if got := F32ToE4M3(f); got != uint8(c) {
			t.Errorf("code %#02x -> %g -> %#02x", c, f, got)
		}
	}
	if got := F32ToE4M3(1e6); got != 0x7e {
		t.Errorf("saturation: %#02x", got)
	}
	if got := F32ToE4M3(float32(math.Inf(-1))); got != 0xfe {
		t.Errorf("-Inf saturation: %#02x", got)
	}
	if got := F32ToE4M3(float32(math.NaN())); !isNaN32(E4M3ToF32(got)) {
		t.Errorf("NaN -> %#02x", got)
	}
}

func TestUE8M0All256(t *testing.T) {
	for b := range 256 {
		got := UE8M0ToF32(uint8(b))
		if b == 255 {
			if !isNaN32(got) {
				t.Errorf("255 = %g, want NaN", got)
			}
			continue
		}
		if want := float32(math.Ldexp(1, b-127)); got != want {
			t.Errorf("UE8M0ToF32(%d) = %g, want %g", b, got, want)
		}
		if b > 0 && b < 255 {
			if c := F32ToUE8M0Ceil(got); c != uint8(b) {
				t.Errorf("F32ToUE8M0Ceil(2^%d) = %d", b-127, c)
			}
			if c := F32ToUE8M0Ceil(got * 1.001); b < 254 && c != uint8(b+1) {
				t.Errorf("F32ToUE8M0Ceil(2^%d*1.001) = %d, want %d", b-127, c, b+1)
			}
		}
	}
}

func TestE2M1All16(t *testing.T) {
	want := []float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6}
	for c := range 16 {
		got := E2M1ToF32(uint8(c))
		if got != want[c] {
			t.Errorf("E2M1ToF32(%d) = %g, want %g", c, got, want[c])
		}
		if (c >= 8) != math.Signbit(float64(got)) {
			t.Errorf("E2M1ToF32(%d) sign bit wrong", c)
		}
		want := uint8(c)
		if c == 8 {
			want = 0 // -0 encodes to +0 (ModelOpt)
		}
		if back := F32ToE2M1(got); back != want {
			t.Errorf("F32ToE2M1(%g) = %d, want %d", got, back, want)
		}
	}
	// Ties round to the even code.
	for _, tc := range []struct {
		f    float32
		want uint8
	}{{0.25, 0}, {0.75, 2}, {1.25, 2}, {1.75, 4}, {2.5, 4}, {3.5, 6}, {5, 6}, {7, 7}, {100, 7}, {-0.76, 10}, {-0.1, 8}} {
		if got := F32ToE2M1(tc.f); got != tc.want {
			t.Errorf("F32ToE2M1(%g) = %d, want %d", tc.f, got, tc.want)
		}
	}
}

func TestE2M1PackedNibbleOrder(t *testing.T) {
	dst := make([]float32, 5)
	// byte 0x72: low nibble 2 (=1.0) is element 0, high nibble 7 (=6.0) element 1.
	if err := E2M1PackedToF32(dst, []byte{0x72, 0x9f, 0x05}); err != nil {
		t.Fatal(err)
	}
	want := []float32{1, 6, -6, -0.5, 3}
	for i := range want {
		if dst[i] != want[i] {
			t.Errorf("dst[%d] = %g, want %g", i, dst[i], want[i])
		}
	}
	if err := E2M1PackedToF32(dst, []byte{1}); err != ErrShortBuffer {
		t.Errorf("short buffer: %v", err)
	}
}

func TestBatchConverters(t *testing.T) {
	src := []float32{1, -2.5, 3.25, float32(math.Inf(1)), 0}
	b := make([]byte, 2*len(src))
	if err := F32ToBF16Bytes(b, src); err != nil {
		t.Fatal(err)
	}
	back := make([]float32, len(src))
	if err := BF16BytesToF32(back, b); err != nil {
		t.Fatal(err)
	}
	for i := range src {
		if back[i] != src[i] {
			t.Errorf("bf16 round trip %g -> %g", src[i], back[i])
		}
	}
	f4 := make([]byte, 4*len(src))
	if err := F32ToBytes(f4, src); err != nil {
		t.Fatal(err)
	}
	if err := F32BytesToF32(back, f4); err != nil || back[2] != 3.25 {
		t.Errorf("f32 round trip: %v %v", err, back)
	}
	h := []byte{0x00, 0x3c, 0x00, 0xc0} // f16 1.0, -2.0
	hf := make([]float32, 2)
	if err := F16BytesToF32(hf, h); err != nil || hf[0] != 1 || hf[1] != -2 {
		t.Errorf("f16: %v %v", err, hf)
	}
	if F32ToF16(1) != 0x3c00 || F16ToF32(0xc000) != -2 {
		t.Error("f16 scalar")
	}
	for _, fn := range []func() error{
		func() error { return BF16BytesToF32(make([]float32, 3), make([]byte, 5)) },
		func() error { return F32BytesToF32(make([]float32, 3), make([]byte, 11)) },
		func() error { return F16BytesToF32(make([]float32, 3), make([]byte, 5)) },
		func() error { return E4M3BytesToF32(make([]float32, 3), make([]byte, 2)) },
		func() error { return UE8M0BytesToF32(make([]float32, 3), make([]byte, 2)) },
		func() error { return F32ToBF16Bytes(make([]byte, 5), make([]float32, 3)) },
	} {
		if err := fn(); err != ErrShortBuffer {
			t.Errorf("want ErrShortBuffer, got %v", err)
		}
	}
}

func BenchmarkBF16BytesToF32(b *testing.B) {
	src := make([]byte, 2<<20)
	dst := make([]float32, 1<<20)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		_ = BF16BytesToF32(dst, src)
	}
}

func BenchmarkE4M3BytesToF32(b *testing.B) {
	src := make([]byte, 1<<20)
	dst := make([]float32, 1<<20)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		_ = E4M3BytesToF32(dst, src)
	}
}

func BenchmarkE2M1PackedToF32(b *testing.B) {
	src := make([]byte, 1<<20)
	dst := make([]float32, 2<<20)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		_ = E2M1PackedToF32(dst, src)
	}
}

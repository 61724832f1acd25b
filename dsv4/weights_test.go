package dsv4

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/dsv4go/dsv4go/internal/numfmt"
)

func TestDequantizeFP8Block(t *testing.T) {
	// 130x3 weight: two row blocks (128 + 2), one column block; scale [2,1].
	R, C := 130, 3
	w := make([]byte, R*C)
	for i := range w {
		w[i] = 0x38 // 1.0
	}
	w[0] = 0x40                   // 2.0
	w[129*C+2] = 0xb8             // -1.0
	s := []byte{127 + 3, 127 - 1} // 8, 0.5
	tn := &Tensor{Name: "w", DType: F8E4M3, Shape: []int{R, C}, Data: w, Format: FormatFP8Block, BlockRows: 128, BlockCols: 128,
		Scale: &Tensor{Name: "w.scale", DType: F8E8M0, Shape: []int{2, 1}, Data: s}}
	got, err := tn.Float32()
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != 16 || got[1] != 8 || got[127*C] != 8 || got[128*C] != 0.5 || got[129*C+2] != -0.5 {
		t.Errorf("got %v %v %v %v %v", got[0], got[1], got[127*C], got[128*C], got[129*C+2])
	}
	// F32 scales work the same.
	fs := make([]byte, 8)
	binary.LittleEndian.PutUint32(fs, math.Float32bits(8))
	binary.LittleEndian.PutUint32(fs[4:], math.Float32bits(0.5))
	tn.Scale = &Tensor{Name: "w.scale", DType: F32, Shape: []int{2, 1}, Data: fs}
	got2, _ := tn.Float32()
	for i := range got {
		if got[i] != got2[i] {
			t.Fatalf("F32 scale differs at %d", i)
		}
	}
	// Row slices on block boundaries only.
	if _, err := tn.SliceRows(1, 5); !errors.Is(err, ErrTensorShape) {
		t.Errorf("unaligned slice: %v", err)
	}
	v, err := tn.SliceRows(128, 130)
	if err != nil {
		t.Fatal(err)
	}
	vs, _ := v.Float32()
	if vs[0] != 0.5 || vs[5] != -0.5 {
		t.Errorf("slice %v", vs)
	}
}

func TestDequantizeFP4(t *testing.T) {
	// One row of 64 values: MXFP4 scale per 32, NVFP4 per 16.
	data := make([]byte, 32)
	for j := range data {
		data[j] = byte(j%16) | byte((15-j%16)<<4)
	}
	want := func(i int) float32 {
		j := i / 2
		if i%2 == 0 {
			return numfmt.E2M1ToF32(byte(j % 16))
		}
		return numfmt.E2M1ToF32(byte(15 - j%16))
	}
	mx := &Tensor{Name: "mx", DType: I8, Shape: []int{1, 64}, Data: data, Format: FormatMXFP4, BlockRows: 1, BlockCols: 32,
		Scale: &Tensor{Name: "mx.scale", DType: F8E8M0, Shape: []int{1, 2}, Data: []byte{127, 129}}}
	got, err := mx.Float32()
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		s := float32(1)
		if i >= 32 {
			s = 4
		}
		if g != want(i)*s {
			t.Fatalf("mxfp4[%d] = %g want %g", i, g, want(i)*s)
		}
	}
	sc := []byte{numfmt.F32ToE4M3(1), numfmt.F32ToE4M3(2), numfmt.F32ToE4M3(0.5), numfmt.F32ToE4M3(448)}
	nv := &Tensor{Name: "nv", DType: U8, Shape: []int{1, 64}, Data: data, Format: FormatNVFP4, BlockRows: 1, BlockCols: 16,
		GlobalScale: 0.1, Scale: &Tensor{Name: "nv.weight_scale", DType: F8E4M3, Shape: []int{1, 4}, Data: sc}}
	got, err = nv.Float32()
	if err != nil {
		t.Fatal(err)
	}
	blocks := []float32{1, 2, 0.5, 448}
	for i, g := range got {
		if w := want(i) * (blocks[i/16] * float32(0.1)); g != w {
			t.Fatalf("nvfp4[%d] = %g want %g", i, g, w)
		}
	}
	// Bad scale shape is a typed error, not a panic.
	nv.Scale.Shape = []int{1, 3}
	nv.Scale.Data = sc[:3]
	if _, err := nv.Float32(); !errors.Is(err, ErrTensorShape) {
		t.Errorf("bad scale: %v", err)
	}
	if err := mx.Dequantize(make([]float32, 3)); !errors.Is(err, ErrTensorShape) {
		t.Errorf("short dst: %v", err)
	}
	if err := mx.DequantizeRows(make([]float32, 64), 1, 2); !errors.Is(err, ErrTensorShape) {
		t.Errorf("bad rows: %v", err)
	}
}

func TestInt32s(t *testing.T) {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint64(b, 5)
	binary.LittleEndian.PutUint64(b[8:], uint64(1<<40))
	tn := &Tensor{Name: "tid2eid", DType: I64, Shape: []int{2}, Data: b, Format: FormatInt}
	if _, err := tn.Int32s(); err == nil {
		t.Error("overflow not reported")
	}
	binary.LittleEndian.PutUint64(b[8:], 7)
	v, err := tn.Int32s()
	if err != nil || v[0] != 5 || v[1] != 7 {
		t.Errorf("%v %v", v, err)
	}
	tn32 := &Tensor{Name: "t", DType: I32, Shape: []int{2}, Data: []byte{1, 0, 0, 0, 255, 255, 255, 255}, Format: FormatInt}
	v, err = tn32.Int32s()
	if err != nil || v[0] != 1 || v[1] != -1 {
		t.Errorf("%v %v", v, err)
	}
}

func BenchmarkDequantize(b *testing.B) {
	const R, C = 512, 2048
	cases := []struct {
		name string
		t    *Tensor
	}{
		{"bf16", &Tensor{Name: "w", DType: BF16, Shape: []int{R, C}, Data: make([]byte, 2*R*C)}},
		{"fp8-block", &Tensor{Name: "w", DType: F8E4M3, Shape: []int{R, C}, Data: make([]byte, R*C), Format: FormatFP8Block,
			BlockRows: 128, BlockCols: 128, Scale: &Tensor{DType: F8E8M0, Shape: []int{R / 128, C / 128}, Data: make([]byte, R*C/128/128)}}},
		{"mxfp4", &Tensor{Name: "w", DType: I8, Shape: []int{R, C}, Data: make([]byte, R*C/2), Format: FormatMXFP4,
			BlockRows: 1, BlockCols: 32, Scale: &Tensor{DType: F8E8M0, Shape: []int{R, C / 32}, Data: make([]byte, R*C/32)}}},
		{"nvfp4", &Tensor{Name: "w", DType: U8, Shape: []int{R, C}, Data: make([]byte, R*C/2), Format: FormatNVFP4, GlobalScale: 1,
			BlockRows: 1, BlockCols: 16, Scale: &Tensor{DType: F8E4M3, Shape: []int{R, C / 16}, Data: make([]byte, R*C/16)}}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			dst := make([]float32, R*C)
			// Throughput in output bytes (float32) per second; cpu-GB/s
			// divides by process CPU time instead of wall time.
			b.SetBytes(int64(4 * R * C))
			cpu0 := processCPU()
			for b.Loop() {
				if err := c.t.Dequantize(dst); err != nil {
					b.Fatal(err)
				}
			}
			if cpu := processCPU() - cpu0; cpu > 0 {
				b.ReportMetric(float64(4*R*C)*float64(b.N)/cpu.Seconds()/1e9, "cpu-GB/s")
			}
		})
	}
}

package safetensors

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
)

// TestReadTensorAt: ReadTensorAt copies a byte range of one tensor, in
// both the mapped and the read mode; a range outside the tensor is
// ErrOffsets, an unknown name ErrNotFound, a closed file ErrClosed.
func TestReadTensorAt(t *testing.T) {
	for _, mode := range []bool{false, true} {
		old := noMmap
		noMmap = mode
		path := filepath.Join(t.TempDir(), "x.safetensors")
		a, b := make([]byte, 64), make([]byte, 10)
		for i := range a {
			a[i] = byte(i)
		}
		for i := range b {
			b[i] = byte(200 + i)
		}
		err := WriteFile(path, []WriteTensor{{Name: "a", DType: U8, Shape: []int64{64}, Data: a}, {Name: "b", DType: U8, Shape: []int64{10}, Data: b}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		f, err := Open(path)
		noMmap = old
		if err != nil {
			t.Fatal(err)
		}
		p := make([]byte, 5)
		if err := f.ReadTensorAt("b", p, 5); err != nil || !bytes.Equal(p, b[5:]) {
			t.Fatalf("noMmap=%t: b[5:] = %v, %v", mode, p, err)
		}
		if err := f.ReadTensorAt("a", p, 59); err != nil || !bytes.Equal(p, a[59:]) {
			t.Fatalf("noMmap=%t: a[59:] = %v, %v", mode, p, err)
		}
		for _, off := range []int64{-1, 6, 1 << 62} {
			if err := f.ReadTensorAt("b", p, off); !errors.Is(err, ErrOffsets) {
				t.Fatalf("noMmap=%t: off %d: %v", mode, off, err)
			}
		}
		if err := f.ReadTensorAt("c", p, 0); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown name: %v", err)
		}
		f.Close()
		if err := f.ReadTensorAt("a", p, 0); !errors.Is(err, ErrClosed) {
			t.Fatalf("after Close: %v", err)
		}
	}
}

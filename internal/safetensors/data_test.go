package safetensors

import (
	"fmt"
	"path/filepath"
	"testing"
)

// manyTensors writes a file of n small tensors and returns its path and names.
func manyTensors(tb testing.TB, n int) (string, []string) {
	tb.Helper()
	in := make([]WriteTensor, n)
	names := make([]string, n)
	for i := range in {
		names[i] = fmt.Sprintf("layers.%d.weight", i)
		in[i] = WriteTensor{Name: names[i], DType: F32, Shape: []int64{4}, Data: make([]byte, 16)}
	}
	p := filepath.Join(tb.TempDir(), "many.safetensors")
	if err := WriteFile(p, in, nil); err != nil {
		tb.Fatal(err)
	}
	return p, names
}

// TestDataNoStatPerTensor: Open checks the file size once; Data, mapped or
// read, makes no fstat per tensor.
func TestDataNoStatPerTensor(t *testing.T) {
	p, names := manyTensors(t, 200)
	for _, tc := range []struct {
		name   string
		noMmap bool
	}{{"mapped", false}, {"read", true}} {
		t.Run(tc.name, func(t *testing.T) {
			noMmap = tc.noMmap
			defer func() { noMmap = false }()
			before := statCalls.Load()
			f, err := Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if got := statCalls.Load() - before; got != 1 {
				t.Errorf("Open made %d fstat calls, want 1", got)
			}
			before = statCalls.Load()
			for _, n := range names {
				if b, err := f.Data(n); err != nil || len(b) != 16 {
					t.Fatalf("Data(%s): %d bytes, %v", n, len(b), err)
				}
			}
			if got := statCalls.Load() - before; got != 0 {
				t.Errorf("%d Data calls made %d fstat calls, want 0", len(names), got)
			}
		})
	}
}

// BenchmarkData: the cost of one Data call on a mapped file (a map lookup
// and a bounds check; no system call).
func BenchmarkData(b *testing.B) {
	p, names := manyTensors(b, 256)
	f, err := Open(p)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := f.Data(names[i%len(names)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

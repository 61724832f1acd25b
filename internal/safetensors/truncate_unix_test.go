//go:build unix

package safetensors

import (
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestTruncatedWhileMapped: a file truncated after Open, while it is
// memory-mapped, gives ErrTruncated instead of a fatal SIGBUS: a view taken
// before the truncation read inside Guard fails with a typed error, after
// which Data (the File has re-checked its size) refuses the lost tensor; the
// process lives on and the goroutine's SetPanicOnFault setting is restored.
func TestTruncatedWhileMapped(t *testing.T) {
	p := filepath.Join(t.TempDir(), "t.safetensors")
	big := make([]byte, 256<<10) // 64 pages: most of them past the new end
	for i := range big {
		big[i] = byte(i)
	}
	if err := WriteFile(p, []WriteTensor{
		{Name: "small", DType: F32, Shape: []int64{2}, Data: []byte{0, 0, 128, 63, 0, 0, 0, 64}},
		{Name: "big", DType: U8, Shape: []int64{int64(len(big))}, Data: big},
	}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.Mapped() {
		t.Skip("not memory-mapped on this platform")
	}
	view, err := f.Data("big")
	if err != nil {
		t.Fatal(err)
	}
	small, err := f.Data("small")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, f.Header().DataOffset+8); err != nil { // keeps "small" only
		t.Fatal(err)
	}

	isTruncated := func(what string, err error) {
		t.Helper()
		var se *Error
		if !errors.Is(err, ErrTruncated) || !errors.As(err, &se) || se.File != p {
			t.Fatalf("%s: %v, want ErrTruncated naming %s", what, err, p)
		}
	}
	// A view taken before: copying it faults (SIGBUS), which Guard recovers.
	for i, prev := range []bool{false, true} {
		if i == 1 {
			// The first fault made the File re-check its size: Data now
			// refuses the tensor the file lost.
			_, err = f.Data("big")
			isTruncated("Data after truncation", err)
			if !strings.Contains(err.Error(), "tensor ends at") {
				t.Errorf("Data error: %v", err)
			}
		}
		debug.SetPanicOnFault(prev)
		dst := make([]byte, len(view))
		err := Guard(func() error { copy(dst, view); return nil })
		isTruncated("copy of an old view", err)
		if !strings.Contains(err.Error(), "memory fault at") { // the copy did fault
			t.Errorf("copy error: %v", err)
		}
		if got := debug.SetPanicOnFault(false); got != prev {
			t.Errorf("SetPanicOnFault after Guard = %v, want the previous %v", got, prev)
		}
	}
	// Writing an old view to a new file (what dsv4/convert does with
	// tensors it keeps as stored).
	w, err := Create(filepath.Join(t.TempDir(), "out.safetensors"), []TensorInfo{{Name: "big", DType: U8, Shape: []int64{int64(len(view))}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	isTruncated("Writer.Write of an old view", w.Write("big", view))
	w.Abort()
	var sum byte
	err = Guard(func() error {
		for _, b := range view[len(view)-10:] {
			sum += b
		}
		return nil
	})
	isTruncated("reading an old view byte by byte", err)
	// What is still inside the file reads normally, under Guard or not.
	if err := Guard(func() error {
		if small[2] != 128 || small[7] != 64 {
			return errors.New("bad bytes")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if b, err := f.Data("small"); err != nil || b[3] != 63 {
		t.Fatalf("small tensor: %v", err)
	}
	// fn's own error passes through.
	errMine := errors.New("mine")
	if err := Guard(func() error { return errMine }); err != errMine {
		t.Errorf("Guard returned %v, want fn's error", err)
	}
}

// TestGuardPropagatesOtherPanics: a panic that is not a fault in a mapping
// (a plain panic, a nil dereference) is not turned into an error.
func TestGuardPropagatesOtherPanics(t *testing.T) {
	for name, fn := range map[string]func() error{
		"panic": func() error { panic("boom") },
		"nil":   func() error { var p *int; return errors.New(string(rune(*p))) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			err := Guard(fn)
			t.Errorf("%s: Guard returned %v", name, err)
		}()
	}
}

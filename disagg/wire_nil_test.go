package disagg

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// TestWireNilArguments: the wire functions called with nil or zero
// arguments, as an SDK user might, return errors instead of panicking, and a
// zero Encoder encodes (with DefaultChunkBytes) instead of looping for ever
// on zero-byte data frames, as it did.
func TestWireNilArguments(t *testing.T) {
	id, h, _ := testFrames(t, 0)
	nop := func([]byte) error { return nil }
	cases := []struct {
		name string
		want error // nil: any non-nil error
		call func() error
	}{
		{"ReadStream nil reader", ErrTruncated, func() error { _, err := ReadStream(nil, id, Limits{}); return err }},
		{"WriteStream nil writer", nil, func() error { return WriteStream(nil, h, id, 0) }},
		{"WriteStream nil handoff", ErrMalformed, func() error { return WriteStream(&bytes.Buffer{}, nil, id, 0) }},
		{"WriteStream nil state", ErrMalformed, func() error { return WriteStream(&bytes.Buffer{}, &Handoff{}, id, 0) }},
		{"Encode nil emit", nil, func() error { return NewEncoder(id, 0).Encode(h, nil) }},
		{"EncodeParts nil emit", nil, func() error { return NewEncoder(id, 0).EncodeParts(h, nil) }},
		{"nil Encoder", nil, func() error { return (*Encoder)(nil).Encode(h, nop) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("panic: %v", r)
				}
			}()
			err := tc.call()
			if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("zero Encoder", func(t *testing.T) {
		done := make(chan error, 1)
		var frames [][]byte
		go func() {
			var e Encoder
			done <- e.Encode(h, func(f []byte) error {
				frames = append(frames, bytes.Clone(f))
				if len(frames) > 1000 {
					return errors.New("too many frames")
				}
				return nil
			})
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("zero Encoder did not return")
		}
		// Its frames carry a zero identity: refused as incompatible.
		_, err := ReadStream(bytes.NewReader(bytes.Join(frames, nil)), id, Limits{})
		if !errors.Is(err, ErrIncompatible) {
			t.Fatalf("zero-identity stream: %v, want ErrIncompatible", err)
		}
	})
}

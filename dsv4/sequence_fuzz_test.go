package dsv4

import (
	"context"
	"path/filepath"
	"testing"
)

// FuzzRestore corrupts a valid SequenceState (position, any layer's window, buffers,
// overlap or entries, widths, rates, types) and checks that Restore either rejects it
// with ErrSequence or returns a sequence that decodes without panicking.
func FuzzRestore(f *testing.F) {
	m, err := Load(context.Background(), filepath.Join("testdata", "forward", "mixed-hc4-yarn"))
	if err != nil {
		f.Fatal(err)
	}
	seq := m.NewSequence()
	if _, err := m.Prefill(context.Background(), seq, []int32{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9}); err != nil {
		f.Fatal(err)
	}
	base, err := seq.Snapshot()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint8(0), uint8(0), int16(0))
	f.Add(uint8(1), uint8(2), int16(-1))
	f.Add(uint8(3), uint8(4), int16(16))
	f.Add(uint8(1), uint8(7), int16(1))
	f.Fuzz(func(t *testing.T, layer, field uint8, delta int16) {
		st := base.clone()
		l := &st.Layers[int(layer)%len(st.Layers)]
		resize := func(s []float32) []float32 {
			n := max(0, len(s)+int(delta))
			out := make([]float32, n)
			copy(out, s)
			return out
		}
		c := l.Compressor
		if field%2 == 1 && l.Indexer != nil {
			c = l.Indexer
		}
		switch field % 10 {
		case 0:
			st.Position += int(delta)
		case 1:
			l.Window = resize(l.Window)
		case 2, 3:
			if c != nil {
				c.BufferKV = resize(c.BufferKV)
			}
		case 4, 5:
			if c != nil {
				c.OverlapGate = resize(c.OverlapGate)
			}
		case 6, 7:
			if c != nil {
				c.Entries = resize(c.Entries)
			}
		case 8:
			if c != nil {
				c.Width += int(delta)
				c.Rate -= int(delta)
			}
		case 9:
			l.Type = LayerType(rune(delta))
		}
		s, err := m.Restore(st)
		if err != nil {
			return
		}
		if _, err := m.Decode(context.Background(), []*Sequence{s}, []int32{7}); err != nil {
			t.Fatalf("restored sequence cannot decode: %v", err)
		}
	})
}

package dsv4

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

func loadGoldenModel(t *testing.T, name string) (*Model, *goldenFile) {
	t.Helper()
	dir := filepath.Join("testdata", "forward", name)
	m, err := Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, readGolden(t, dir)
}

// TestModelGolden runs the public API (Load, PrefillAll, Prefill, Decode) on every
// golden config: full, incremental (prefill then Decode) and chunked modes.
func TestModelGolden(t *testing.T) {
	ctx := context.Background()
	for _, name := range goldenConfigs {
		t.Run(name, func(t *testing.T) {
			m, g := loadGoldenModel(t, name)
			seq := m.NewSequence()
			full, err := m.PrefillAll(ctx, seq, g.Tokens)
			if err != nil {
				t.Fatal(err)
			}
			dFull := maxDiff(t, full, g.Full)

			seq = m.NewSequence()
			last, err := m.Prefill(ctx, seq, g.Tokens[:g.Prefill])
			if err != nil {
				t.Fatal(err)
			}
			inc := [][]float32{last}
			for _, id := range g.Tokens[g.Prefill:] {
				lg, err := m.Decode(ctx, []*Sequence{seq}, []int32{id})
				if err != nil {
					t.Fatal(err)
				}
				inc = append(inc, lg[0])
			}
			// the last decode row is the logits after the final token; the golden's
			// incremental rows are positions prefill-1 .. L-1
			dInc := maxDiff(t, inc, g.Incremental)

			seq = m.NewSequence()
			var ch [][]float32
			pos := 0
			for _, c := range g.Chunks {
				lg, err := m.PrefillAll(ctx, seq, g.Tokens[pos:pos+c])
				if err != nil {
					t.Fatal(err)
				}
				ch = append(ch, lg...)
				pos += c
			}
			dCh := maxDiff(t, ch, g.Chunked)
			t.Logf("max |Go - float64 oracle|: full %.2g, incremental %.2g, chunked %.2g", dFull, dInc, dCh)
			for _, d := range []float64{dFull, dInc, dCh} {
				if d > goldenTol {
					t.Fatalf("max |Δ| %g > %g", d, goldenTol)
				}
			}
			if seq.Len() != len(g.Tokens) || seq.Bytes() != m.SequenceBytes(len(g.Tokens)) {
				t.Fatalf("Len %d Bytes %d, want %d, %d", seq.Len(), seq.Bytes(), len(g.Tokens), m.SequenceBytes(len(g.Tokens)))
			}
		})
	}
}

func TestModelErrorsAndRestore(t *testing.T) {
	ctx := context.Background()
	m, g := loadGoldenModel(t, "hc2-yarn")
	m2, _ := loadGoldenModel(t, "hc2-yarn")
	a, b := m.NewSequence(), m.NewSequence()
	if _, err := m.Prefill(ctx, a, g.Tokens[:9]); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Prefill(ctx, b, g.Tokens[:4]); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		err  error
		call func() error
	}{
		{"empty prefill", ErrSequence, func() error { _, err := m.Prefill(ctx, a, nil); return err }},
		{"nil seq", ErrSequence, func() error { _, err := m.Prefill(ctx, nil, []int32{1}); return err }},
		{"bad id", ErrTokenID, func() error { _, err := m.Prefill(ctx, a, []int32{2, 96}); return err }},
		{"negative id", ErrTokenID, func() error { _, err := m.Decode(ctx, []*Sequence{a}, []int32{-1}); return err }},
		{"len mismatch", ErrSequence, func() error { _, err := m.Decode(ctx, []*Sequence{a, b}, []int32{1}); return err }},
		{"duplicate", ErrSequence, func() error { _, err := m.Decode(ctx, []*Sequence{a, a}, []int32{1, 2}); return err }},
		{"foreign", ErrSequence, func() error { _, err := m2.Decode(ctx, []*Sequence{a}, []int32{1}); return err }},
		{"never prefilled", ErrEmptySequence, func() error { _, err := m.Decode(ctx, []*Sequence{a, m.NewSequence()}, []int32{1, 1}); return err }},
		{"never prefilled is ErrSequence", ErrSequence, func() error { _, err := m.Decode(ctx, []*Sequence{m.NewSequence()}, []int32{1}); return err }},
		{"too long", ErrContextLength, func() error {
			_, err := m.Prefill(ctx, a, make([]int32, m.Config().MaxPositionEmbeddings))
			return err
		}},
	}
	for _, c := range cases {
		if err := c.call(); !errors.Is(err, c.err) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.err)
		}
	}
	if a.Len() != 9 || b.Len() != 4 {
		t.Fatalf("failed calls changed the sequences: %d %d", a.Len(), b.Len())
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.Decode(cctx, []*Sequence{a}, []int32{3}); !errors.Is(err, context.Canceled) || a.Len() != 9 {
		t.Fatalf("cancelled decode: %v, len %d", err, a.Len())
	}

	// Snapshot on one model, Restore on another engine's model: same continuation.
	st, err := a.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	r, err := m2.Restore(st)
	if err != nil {
		t.Fatal(err)
	}
	x, err := m.Decode(ctx, []*Sequence{a, b}, []int32{g.Tokens[9], g.Tokens[4]})
	if err != nil {
		t.Fatal(err)
	}
	y, err := m2.Decode(ctx, []*Sequence{r}, []int32{g.Tokens[9]})
	if err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(t, y, [][]float64{toF64(x[0])}); d != 0 {
		t.Fatalf("restored sequence differs by %g", d)
	}
	if d := maxDiff(t, x, [][]float64{g.Full[9], g.Full[4]}); d > goldenTol {
		t.Fatalf("batched decode vs oracle: %g", d)
	}
	st.Layers[0].Compressor.Entries = append(st.Layers[0].Compressor.Entries, 1)
	if _, err := m.Restore(st); !errors.Is(err, ErrSequence) {
		t.Fatalf("corrupt restore: %v", err)
	}
	a.Release()
	a.Release()
	if _, err := m.Decode(ctx, []*Sequence{a}, []int32{1}); !errors.Is(err, ErrSequence) || a.Len() != 0 || a.Bytes() != 0 {
		t.Fatalf("released: %v", err)
	}
	if _, err := a.Snapshot(); !errors.Is(err, ErrSequence) {
		t.Fatalf("snapshot of released: %v", err)
	}
}

func toF64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// TestPrefillInternalSteps: a Prefill longer than the internal step runs as several
// steps with the same result (bit-identical, by batch invariance); a cancelled context
// stops it between steps and leaves the sequence at a step boundary, still usable.
func TestPrefillInternalSteps(t *testing.T) {
	ctx := context.Background()
	m, g := loadGoldenModel(t, "mixed-hc4-yarn")
	want, err := m.PrefillAll(ctx, m.NewSequence(), g.Tokens)
	if err != nil {
		t.Fatal(err)
	}
	defer func(n int) { prefillChunk = n }(prefillChunk)
	prefillChunk = 7
	seq := m.NewSequence()
	got, err := m.PrefillAll(ctx, seq, g.Tokens)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("row %d: stepped prefill differs", i)
			}
		}
	}
	last, err := m.Prefill(ctx, m.NewSequence(), g.Tokens)
	if err != nil || len(last) != len(want[len(want)-1]) || last[3] != want[len(want)-1][3] {
		t.Fatalf("Prefill last row: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	seq = m.NewSequence()
	if _, err := m.Prefill(cctx, seq, g.Tokens); !errors.Is(err, context.Canceled) || seq.Len()%7 != 0 {
		t.Fatalf("cancelled prefill: %v, len %d", err, seq.Len())
	}
	if _, err := m.Prefill(ctx, seq, g.Tokens[seq.Len():]); err != nil {
		t.Fatal(err)
	}
}

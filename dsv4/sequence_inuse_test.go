package dsv4

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestSequenceInUse: a call on a Sequence that another call holds fails at once with
// ErrSequence ("in use") and changes nothing; a released one with ErrSequence
// ("released"); a Release while a call holds the sequence takes effect when it ends.
func TestSequenceInUse(t *testing.T) {
	ctx := context.Background()
	m, g := loadGoldenModel(t, "hc2-yarn")
	tok := g.Tokens[:5]
	cases := []struct {
		name string
		// call runs while busy (held by a simulated running call) is held.
		call    func(busy, other *Sequence) error
		wantMsg string
	}{
		{"prefill", func(b, _ *Sequence) error { _, err := m.Prefill(ctx, b, tok); return err }, "in use"},
		{"prefill all", func(b, _ *Sequence) error { _, err := m.PrefillAll(ctx, b, tok); return err }, "in use"},
		{"decode", func(b, _ *Sequence) error { _, err := m.Decode(ctx, []*Sequence{b}, []int32{1}); return err }, "in use"},
		{"decode batch, busy second", func(b, o *Sequence) error {
			_, err := m.Decode(ctx, []*Sequence{o, b}, []int32{1, 2})
			return err
		}, "in use"},
		{"decode duplicate", func(_, o *Sequence) error {
			_, err := m.Decode(ctx, []*Sequence{o, o}, []int32{1, 2})
			return err
		}, "twice"},
		{"snapshot", func(b, _ *Sequence) error { _, err := b.Snapshot(); return err }, "in use"},
		{"released during call", func(b, _ *Sequence) error {
			b.Release()
			_, err := m.Prefill(ctx, b, tok)
			return err
		}, "released"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			busy, other := m.NewSequence(), m.NewSequence()
			for _, s := range []*Sequence{busy, other} {
				if _, err := m.Prefill(ctx, s, tok); err != nil {
					t.Fatal(err)
				}
			}
			if err := m.acquire(busy); err != nil {
				t.Fatal(err)
			}
			err := c.call(busy, other)
			if !errors.Is(err, ErrSequence) || !strings.Contains(err.Error(), c.wantMsg) {
				t.Fatalf("err = %v, want ErrSequence %q", err, c.wantMsg)
			}
			if busy.Len() != 5 || other.Len() != 5 {
				t.Fatalf("lengths %d, %d changed", busy.Len(), other.Len())
			}
			released := busy.done()
			if released != (c.name == "released during call") {
				t.Fatalf("done reported released = %v", released)
			}
			if released {
				if busy.Len() != 0 || busy.Bytes() != 0 || busy.st.Layers != nil {
					t.Fatalf("state not freed: len %d bytes %d", busy.Len(), busy.Bytes())
				}
				return
			}
			// the other sequence was not left held by the failed Decode
			if _, err := m.Decode(ctx, []*Sequence{busy, other}, []int32{3, 4}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// releaseCtx is a context whose Err calls release on its n-th call: a Release landing
// at a chosen point of a running call (Prefill checks ctx before every internal step,
// and the forward step once more).
type releaseCtx struct {
	context.Context
	n       atomic.Int32
	at      int32
	release func()
}

func (c *releaseCtx) Err() error {
	if c.n.Add(1) == c.at {
		c.release()
	}
	return c.Context.Err()
}

// TestSequenceReleaseDuringCall: Release from another goroutine's point of view while
// a Prefill or Decode runs (simulated at every ctx check): no panic; Prefill stops at
// the next step and returns ErrSequence (or its logits if its last step had begun);
// Decode completes; afterwards the state is freed and every call fails.
func TestSequenceReleaseDuringCall(t *testing.T) {
	defer func(n int) { prefillChunk = n }(prefillChunk)
	prefillChunk = 4
	m, g := loadGoldenModel(t, "hc2-yarn")
	tok := g.Tokens[:14] // 4 internal steps: ctx checks 1-8
	cases := []struct {
		name    string
		at      int32
		decode  bool
		wantErr bool
	}{
		{"prefill before step 1", 1, false, true},
		{"prefill in step 1", 2, false, true},
		{"prefill before step 3", 5, false, true},
		{"prefill before last step", 7, false, true},
		{"prefill in last step", 8, false, false},
		{"decode", 1, true, false},
		{"decode in step", 2, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := m.NewSequence()
			var err error
			if c.decode {
				if _, err := m.Prefill(context.Background(), s, tok[:3]); err != nil {
					t.Fatal(err)
				}
				ctx := &releaseCtx{Context: context.Background(), at: c.at, release: s.Release}
				var lg [][]float32
				lg, err = m.Decode(ctx, []*Sequence{s}, []int32{tok[3]})
				if err == nil && len(lg) != 1 {
					t.Fatalf("%d logits", len(lg))
				}
			} else {
				ctx := &releaseCtx{Context: context.Background(), at: c.at, release: s.Release}
				_, err = m.Prefill(ctx, s, tok)
			}
			if (err != nil) != c.wantErr || (err != nil && !errors.Is(err, ErrSequence)) {
				t.Fatalf("err = %v, want error %v (ErrSequence)", err, c.wantErr)
			}
			if s.Len() != 0 || s.Bytes() != 0 || s.st.Layers != nil {
				t.Fatalf("not freed: len %d bytes %d", s.Len(), s.Bytes())
			}
			if _, err := m.Prefill(context.Background(), s, tok[:1]); !errors.Is(err, ErrSequence) || !strings.Contains(err.Error(), "released") {
				t.Fatalf("prefill after release: %v", err)
			}
			if _, err := s.Snapshot(); !errors.Is(err, ErrSequence) {
				t.Fatalf("snapshot after release: %v", err)
			}
			s.Release() // idempotent
		})
	}
}

// TestSequenceConcurrentMisuse races Prefill, Decode, Snapshot, Len, Bytes and Release
// of one Sequence from many goroutines (run with -race): every call either succeeds
// or fails with ErrSequence, and nothing panics.
func TestSequenceConcurrentMisuse(t *testing.T) {
	ctx := context.Background()
	m, g := loadGoldenModel(t, "hc2-yarn")
	tok := g.Tokens[:3]
	for round := range 4 {
		s := m.NewSequence()
		if _, err := m.Prefill(ctx, s, tok[:1]); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for i := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				switch i % 6 {
				case 0:
					_, err = m.Decode(ctx, []*Sequence{s}, []int32{tok[1]})
				case 1:
					_, err = m.Prefill(ctx, s, tok)
				case 2:
					_, err = s.Snapshot()
				case 3:
					_ = s.Len() + int(s.Bytes())
				case 4:
					if i/6 == round%2 {
						s.Release()
					}
				case 5:
					other := m.NewSequence()
					_, _ = m.Prefill(ctx, other, tok[:1])
					_, err = m.Decode(ctx, []*Sequence{other, s}, []int32{1, 2})
					other.Release()
				}
				if err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if !errors.Is(err, ErrSequence) {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		s.Release()
		if s.Len() != 0 || s.Bytes() != 0 {
			t.Fatalf("round %d: released sequence len %d bytes %d", round, s.Len(), s.Bytes())
		}
	}
}

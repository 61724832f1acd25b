package disagg

import (
	"context"
	"errors"
	"hash/maphash"
	"io/fs"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/tokenizer"
)

// decodeBackend is a dsv4.Backend over a Model that admits prefilled
// requests: when the engine prefills a fresh sequence with exactly the
// prompt of a registered handoff, the sequence restored from the handoff
// (before, outside the engine loop) takes its place instead of a prefill, and its logits are returned, so the engine samples the first
// token itself with the request's sampling state, exactly as a co-located
// engine would. Any other prompt is prefilled locally (decode-only
// fallback). The engine must give each prompt in one Prefill call
// (EngineOptions.StepTokens ≥ the longest prompt): newDecodeEngine sets it.
type decodeBackend struct {
	m      *dsv4.Model
	ctxLen int // served context length (MaxContext)
	seed   maphash.Seed

	mu      sync.Mutex
	pending map[uint64][]*pendingHandoff
	nPend   atomic.Int64
	// restored counts prompts served from a handoff (tests, metrics).
	restored, local atomic.Int64
}

// pendingHandoff is a transferred request waiting for the engine to admit
// it: its state already restored into a Sequence (outside the engine loop).
type pendingHandoff struct {
	prompt []int32
	seq    *dsv4.Sequence
	logits []float32
}

func newDecodeBackend(m *dsv4.Model, ctxLen int) *decodeBackend {
	return &decodeBackend{m: m, ctxLen: contextLength(m, ctxLen), seed: maphash.MakeSeed(), pending: map[uint64][]*pendingHandoff{}}
}

func (b *decodeBackend) key(ids []int32) uint64 {
	if len(ids) == 0 {
		return 0
	}
	return maphash.Bytes(b.seed, unsafe.Slice((*byte)(unsafe.Pointer(&ids[0])), 4*len(ids)))
}

// register makes h available to the next n prefills of h.Prompt, as n
// sequences restored now (the last one adopts h's buffers: h must not be
// used afterwards); release frees what was not claimed (idempotent).
// Errors: the state does not fit the model (dsv4.ErrSequence).
func (b *decodeBackend) register(h *Handoff, n int) (release func(), err error) {
	k := b.key(h.Prompt)
	ps := make([]*pendingHandoff, n)
	for i := n - 1; i >= 0; i-- {
		var seq *dsv4.Sequence
		if i > 0 {
			seq, err = b.m.Restore(h.State)
		} else {
			seq, err = b.m.Adopt(h.State)
		}
		if err != nil {
			for _, p := range ps[i+1:] {
				p.seq.Release()
			}
			return nil, err
		}
		ps[i] = &pendingHandoff{prompt: h.Prompt, seq: seq, logits: h.Logits}
	}
	b.mu.Lock()
	b.pending[k] = append(b.pending[k], ps...)
	b.mu.Unlock()
	b.nPend.Add(int64(n))
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			q := slices.DeleteFunc(b.pending[k], func(p *pendingHandoff) bool {
				if slices.Contains(ps, p) {
					p.seq.Release()
					b.nPend.Add(-1)
					return true
				}
				return false
			})
			if len(q) == 0 {
				delete(b.pending, k)
			} else {
				b.pending[k] = q
			}
		})
	}, nil
}

// claim returns a registered handoff for ids, removing it from the table.
func (b *decodeBackend) claim(ids []int32) *pendingHandoff {
	k := b.key(ids)
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.pending[k]
	for i, p := range q {
		if slices.Equal(p.prompt, ids) {
			b.pending[k] = slices.Delete(q, i, i+1)
			if len(b.pending[k]) == 0 {
				delete(b.pending, k)
			}
			b.nPend.Add(-1)
			return p
		}
	}
	return nil
}

type backendSeq struct{ s *dsv4.Sequence }

func (q *backendSeq) Release() { q.s.Release() }

func (b *decodeBackend) NewSequence() dsv4.BackendSequence {
	return &backendSeq{s: b.m.NewSequence()}
}

func (b *decodeBackend) Prefill(ctx context.Context, s dsv4.BackendSequence, ids []int32) ([]float32, error) {
	q := s.(*backendSeq)
	if q.s.Len() == 0 {
		if p := b.claim(ids); p != nil {
			q.s.Release()
			q.s = p.seq
			b.restored.Add(1)
			return p.logits, nil // read-only for the sampler
		}
	}
	b.local.Add(1)
	return b.m.Prefill(ctx, q.s, ids)
}

func (b *decodeBackend) Decode(ctx context.Context, seqs []dsv4.BackendSequence, ids []int32) ([][]float32, error) {
	ss := make([]*dsv4.Sequence, len(seqs))
	for i, s := range seqs {
		ss[i] = s.(*backendSeq).s
	}
	return b.m.Decode(ctx, ss, ids)
}

// StateBytes is the most state a sequence holds at any length up to n (the
// state shrinks when a compressor window closes).
func (b *decodeBackend) StateBytes(n int) int64 {
	best := b.m.SequenceBytes(n)
	for j := max(n-512, 0); j < n; j++ {
		best = max(best, b.m.SequenceBytes(j))
	}
	return best
}

func (b *decodeBackend) VocabSize() int  { return b.m.Config().VocabSize }
func (b *decodeBackend) MaxContext() int { return b.ctxLen }

func (b *decodeBackend) EOS() []int32 {
	var out []int32
	for _, id := range b.m.Config().EOSTokenIDs {
		out = append(out, int32(id))
	}
	return out
}

// newDecodeEngine starts an Engine over a decodeBackend of m, with the
// tokenizer of the model's directory unless opts has one, serving ctxLen
// tokens of context (contextLength).
func newDecodeEngine(m *dsv4.Model, ctxLen int, opts dsv4.EngineOptions) (*dsv4.Engine, *decodeBackend, error) {
	if opts.Tokenizer == nil {
		t, err := tokenizer.Load(m.Checkpoint().Dir())
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, err
		}
		opts.Tokenizer = t
	}
	if opts.Tokenizer == nil {
		return nil, nil, dsv4.ErrNoChat
	}
	if opts.Encoding == "" && m.Config().ModelType == "deepseek_v32" {
		opts.Encoding = dsv4.EncodingV32
	}
	opts.StepTokens = 1 << 30 // a prompt must reach Prefill in one call
	b := newDecodeBackend(m, ctxLen)
	e, err := dsv4.NewEngineWithBackend(b, opts)
	if err != nil {
		return nil, nil, err
	}
	return e, b, nil
}

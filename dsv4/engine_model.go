package dsv4

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"sync"

	"github.com/dsv4go/dsv4go/tokenizer"
)

// modelBackend adapts *Model to Backend.
type modelBackend struct{ m *Model }

func (b modelBackend) NewSequence() BackendSequence { return b.m.NewSequence() }

func (b modelBackend) Prefill(ctx context.Context, s BackendSequence, ids []int32) ([]float32, error) {
	return b.m.Prefill(ctx, s.(*Sequence), ids)
}

// PrefillAll makes modelBackend an AllLogitsBackend (prompt logprobs).
func (b modelBackend) PrefillAll(ctx context.Context, s BackendSequence, ids []int32) ([][]float32, error) {
	return b.m.PrefillAll(ctx, s.(*Sequence), ids)
}

func (b modelBackend) Decode(ctx context.Context, seqs []BackendSequence, ids []int32) ([][]float32, error) {
	ss := make([]*Sequence, len(seqs))
	for i, s := range seqs {
		ss[i] = s.(*Sequence)
	}
	return b.m.Decode(ctx, ss, ids)
}

// Snapshot copies the sequence's state (Sequence.Snapshot): the prefix
// cache's save.
func (b modelBackend) Snapshot(s BackendSequence) (BackendState, error) {
	return s.(*Sequence).Snapshot()
}

// Restore makes a new sequence from a copy of a state that Snapshot took
// (Model.Restore, which validates and deep-copies it): the prefix cache's
// restore. Another BackendState gives ErrSequence.
func (b modelBackend) Restore(st BackendState) (BackendSequence, error) {
	ss, ok := st.(*SequenceState)
	if !ok {
		return nil, fmt.Errorf("%w: restore of a %T, not a *SequenceState", ErrSequence, st)
	}
	return b.m.Restore(ss)
}

// StateBytes is the most state a sequence holds at any length up to n:
// Model.SequenceBytes is not monotonic (a compressor's open window empties
// when it closes), so the maximum over the last windows is taken.
func (b modelBackend) StateBytes(n int) int64 {
	best := b.m.SequenceBytes(n)
	for j := max(n-512, 0); j < n; j++ {
		best = max(best, b.m.SequenceBytes(j))
	}
	return best
}

func (b modelBackend) VocabSize() int  { return b.m.Config().VocabSize }
func (b modelBackend) MaxContext() int { return b.m.Config().MaxPositionEmbeddings }

func (b modelBackend) EOS() []int32 {
	ids := b.m.Config().EOSTokenIDs
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

// NewEngine starts an Engine on m. Unless opts.Tokenizer is set, the
// tokenizer is loaded from the model's directory (tokenizer.json and
// tokenizer_config.json); a directory without one gives a token-only
// engine (Generate works, Chat and Complete return ErrNoChat). The chat
// encoding defaults to the model type's (deepseek_v4: EncodingV4,
// deepseek_v32: EncodingV32). Close the Engine before the Model.
//
// A nil m gives an error wrapping ErrInvalidParams.
func NewEngine(m *Model, opts EngineOptions) (*Engine, error) {
	if m == nil || m.net == nil {
		return nil, errNilModel
	}
	if opts.Tokenizer == nil {
		t, err := tokenizer.Load(m.Checkpoint().Dir())
		switch {
		case err == nil:
			opts.Tokenizer = t
		case errors.Is(err, fs.ErrNotExist):
		default:
			return nil, err
		}
	}
	if opts.Encoding == "" && m.Config().ModelType == "deepseek_v32" {
		opts.Encoding = EncodingV32
	}
	return NewEngineWithBackend(modelBackend{m}, opts)
}

var defaultEngines sync.Map // *Model → *Engine

// DefaultEngine returns the Engine that Model.Chat uses: started on first
// use with default EngineOptions, shared by every caller, and closed by
// Model.Close (use NewEngine to control an engine's lifetime yourself).
//
// A nil m gives an error wrapping ErrInvalidParams (so do Chat and ChatStream).
func (m *Model) DefaultEngine() (*Engine, error) {
	if m == nil || m.net == nil {
		return nil, errNilModel
	}
	if e, ok := defaultEngines.Load(m); ok {
		return e.(*Engine), nil
	}
	e, err := NewEngine(m, EngineOptions{})
	if err != nil {
		return nil, err
	}
	if prev, loaded := defaultEngines.LoadOrStore(m, e); loaded {
		_ = e.Close(context.Background())
		return prev.(*Engine), nil
	}
	return e, nil
}

// Chat is DefaultEngine().Chat: the one-call way to chat with a loaded
// model. See Engine.Chat.
func (m *Model) Chat(ctx context.Context, req *ChatRequest) (*ChatResponse, error) {
	e, err := m.DefaultEngine()
	if err != nil {
		return nil, err
	}
	return e.Chat(ctx, req)
}

// ChatStream is DefaultEngine().ChatStream. See Engine.ChatStream.
func (m *Model) ChatStream(ctx context.Context, req *ChatRequest) (iter.Seq2[*ChatChunk, error], error) {
	e, err := m.DefaultEngine()
	if err != nil {
		return nil, err
	}
	return e.ChatStream(ctx, req)
}

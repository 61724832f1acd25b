package dsv4

import (
	"context"
	"sync"
)

// Model is a loaded DeepSeek-V4 model: its Config and typed Weights over the
// memory-mapped checkpoint. Create it with Load; release it with Close.
type Model struct {
	cfg       *Config
	weights   *Weights
	ck        *Checkpoint
	closeOnce sync.Once
	closeErr  error
}

// newModel builds a Model over an opened, validated checkpoint. (The forward
// pass state is set up here.)
func newModel(ctx context.Context, ck *Checkpoint, o *loadOptions) (*Model, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &Model{cfg: ck.Config(), weights: ck.Weights(), ck: ck}, nil
}

// Config returns the model's configuration (read-only).
func (m *Model) Config() *Config { return m.cfg }

// Weights returns the model's typed weights (read-only; valid until Close).
func (m *Model) Weights() *Weights { return m.weights }

// Checkpoint returns the opened checkpoint the model reads from.
func (m *Model) Checkpoint() *Checkpoint { return m.ck }

// Close releases the model's memory mappings. Idempotent.
func (m *Model) Close() error {
	m.closeOnce.Do(func() { m.closeErr = m.ck.Close() })
	return m.closeErr
}

package dsv4

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
)

// Model is a loaded DeepSeek-V4 model: its Config, its typed Weights over the
// memory-mapped checkpoint, and the float32 CPU form of those weights that the
// forward pass runs (dequantized once at load: 4 bytes per parameter; see package
// kernels). Create it with Load; release it with Close. A Model is safe for concurrent
// use by several goroutines as long as each Sequence is used by one at a time.
type Model struct {
	cfg       *Config
	weights   *Weights
	ck        *Checkpoint
	net       *network
	weightsFP string // WeightsFingerprint, computed by Load
	closeOnce sync.Once
	closeErr  error
}

// newModel builds a Model over an opened, validated checkpoint: it dequantizes every
// weight the forward pass reads to float32 (kernels' CPU backend reads only float32).
func newModel(ctx context.Context, ck *Checkpoint, o *loadOptions) (*Model, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m := &Model{cfg: ck.Config(), weights: ck.Weights(), ck: ck, weightsFP: weightsFingerprint(ck)}
	src, err := newWeightsSource(ctx, m.weights)
	if err != nil {
		return nil, err
	}
	if m.net, err = build(m.cfg, src); err != nil {
		return nil, err
	}
	return m, nil
}

// WeightsFingerprint identifies the checkpoint's weights: the hex SHA-256 of
// its tensor list (canonical name, dtype, shape and byte size of each, in
// TensorInfos order) and of the float32 values (little-endian) of its norm
// weights of at most 64 KiB, which differ between any two trainings. Load
// computes it, so it stays the same after Close (it was recomputed from the
// mapped norms, which Close unmaps). Package disagg's Identity carries it.
// "" for a nil Model.
func (m *Model) WeightsFingerprint() string {
	if m == nil {
		return ""
	}
	return m.weightsFP
}

// weightsFingerprint computes WeightsFingerprint from an open checkpoint.
func weightsFingerprint(ck *Checkpoint) string {
	h := sha256.New()
	var b []byte
	for _, ti := range ck.TensorInfos() {
		fmt.Fprintf(h, "%s|%s|%v|%d\n", ti.Canonical, ti.DType, ti.Shape, ti.Bytes)
		if strings.HasSuffix(ti.Canonical, "norm.weight") && ti.Bytes <= 1<<16 {
			if t, err := ck.Raw(ti.Name); err == nil {
				if v, err := t.Float32(); err == nil {
					b = b[:0]
					for _, x := range v {
						b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
					}
					h.Write(b)
				}
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// weightsSource serves the typed Weights to the network builder by canonical name,
// dequantizing each tensor to float32 on request.
type weightsSource struct {
	ctx     context.Context
	tensors map[string]*Tensor
}

func newWeightsSource(ctx context.Context, w *Weights) (*weightsSource, error) {
	s := &weightsSource{ctx: ctx, tensors: map[string]*Tensor{}}
	err := w.Tensors(func(name string, t *Tensor) error {
		s.tensors[name] = t
		return nil
	})
	return s, err
}

func (s *weightsSource) lookup(name string, shape []int) (*Tensor, error) {
	if err := s.ctx.Err(); err != nil {
		return nil, err
	}
	t, ok := s.tensors[name]
	if !ok || t == nil {
		return nil, &TensorError{Kind: ErrMissingTensor, Name: name}
	}
	if !slices.Equal(t.Shape, shape) {
		return nil, &TensorError{Kind: ErrTensorShape, Name: t.Name, File: t.File, Detail: fmt.Sprintf("shape %v, want %v", t.Shape, shape)}
	}
	return t, nil
}

func (s *weightsSource) float32s(name string, shape ...int) ([]float32, error) {
	t, err := s.lookup(name, shape)
	if err != nil {
		return nil, err
	}
	return t.Float32()
}

func (s *weightsSource) int32s(name string, shape ...int) ([]int32, error) {
	t, err := s.lookup(name, shape)
	if err != nil {
		return nil, err
	}
	return t.Int32s()
}

// Config returns the model's configuration (read-only); nil for a nil Model.
func (m *Model) Config() *Config {
	if m == nil {
		return nil
	}
	return m.cfg
}

// Weights returns the model's typed weights (read-only; valid until Close); nil for a
// nil Model.
func (m *Model) Weights() *Weights {
	if m == nil {
		return nil
	}
	return m.weights
}

// Checkpoint returns the opened checkpoint the model reads from; nil for a nil Model.
func (m *Model) Checkpoint() *Checkpoint {
	if m == nil {
		return nil
	}
	return m.ck
}

// Close releases the model's memory mappings and closes its default engine (the one
// Model.Chat uses, if it was started) at once: requests queued on it fail with
// ErrEngineClosed and running ones are cancelled (waiting for them could block Close on
// a stream nobody reads). Idempotent. The float32 weights of the forward pass stay valid
// (they are copies), so open Sequences keep working, and a later Model.Chat starts a new
// default engine (which the next Close closes). A nil Model's Close does nothing.
func (m *Model) Close() error {
	if m == nil {
		return nil
	}
	if e, ok := defaultEngines.LoadAndDelete(m); ok {
		now, cancel := context.WithCancel(context.Background())
		cancel()
		_ = e.(*Engine).Close(now)
	}
	if m.ck == nil {
		return nil
	}
	m.closeOnce.Do(func() { m.closeErr = m.ck.Close() })
	return m.closeErr
}

package dsv4

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"path/filepath"
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
	fp, err := weightsFingerprint(ctx, ck)
	if err != nil {
		return nil, err
	}
	m := &Model{cfg: ck.Config(), weights: ck.Weights(), ck: ck, weightsFP: fp}
	src, err := newWeightsSource(ctx, m.weights)
	if err != nil {
		return nil, err
	}
	if m.net, err = build(m.cfg, src); err != nil {
		return nil, err
	}
	return m, nil
}

// WeightsFingerprint identifies the checkpoint's weights: the hex SHA-256,
// over its tensors in canonical-name order, of each tensor's canonical name,
// storage dtype, stored shape and byte length, and of a fixed sample of its
// stored bytes: all of them for a tensor of at most fpWholeBytes (24 KiB:
// every norm, bias and scale of small models), otherwise fpBlocks (6) blocks
// of fpBlock (4 KiB) bytes: the first, the last, and 4 evenly strided between
// them. So it covers every tensor, scales included, and tells apart two
// checkpoints that differ in their tensor list, a dtype or shape (a different
// quantization), or any sampled byte: a fine-tuned or re-quantized checkpoint
// changes practically every block. It does not see a difference confined to
// unsampled bytes of a large tensor (e.g. one edited weight outside the
// sampled blocks). Load reads at most 24 KiB per tensor for it, with pread
// (safetensors.File.ReadTensorAt), not the whole checkpoint: 1.4 MB of the
// tiny model's 30 MB (172 tensors); for V4-Flash's ~70,000 tensors at most
// ~1.7 GB, about 1% of its bytes.
// It depends only on the tensors, not on how they are split into shard files
// or named (upstream or Hugging Face naming). Load computes it, so it stays
// the same after Close. Package disagg's Identity carries it. "" for a nil
// Model.
func (m *Model) WeightsFingerprint() string {
	if m == nil {
		return ""
	}
	return m.weightsFP
}

// Sampling of weightsFingerprint (see WeightsFingerprint).
const (
	fpBlock      = 4 << 10
	fpBlocks     = 6
	fpWholeBytes = fpBlocks * fpBlock
)

// fpOffsets returns the byte offsets of the fpBlock-byte blocks that
// weightsFingerprint hashes of a tensor of n > fpWholeBytes bytes: the first,
// the last, and fpBlocks-2 evenly strided between them.
func fpOffsets(n int64) []int64 {
	out := make([]int64, fpBlocks)
	for k := range int64(fpBlocks) {
		out[k] = k * (n - fpBlock) / (fpBlocks - 1)
	}
	return out
}

// weightsFingerprint computes WeightsFingerprint from an open checkpoint.
// Errors: ctx's, or a *TensorError of kind ErrCheckpoint when a sampled
// block cannot be read (a shard truncated after it was opened).
func weightsFingerprint(ctx context.Context, ck *Checkpoint) (string, error) {
	es := make([]*entry, 0, len(ck.entries))
	for _, e := range ck.entries {
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b *entry) int { return strings.Compare(a.canonical, b.canonical) })
	h := sha256.New()
	buf := make([]byte, fpWholeBytes)
	var num [8]byte
	for _, e := range es {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		n := e.info.End - e.info.Begin
		fmt.Fprintf(h, "%s|%s|%v|%d\n", e.canonical, e.info.DType, e.info.Shape, n)
		offs := []int64{0}
		size := int64(fpBlock)
		if n <= fpWholeBytes {
			size = n
		} else {
			offs = fpOffsets(n)
		}
		for _, off := range offs {
			p := buf[:size]
			if err := e.file.ReadTensorAt(e.info.Name, p, off); err != nil {
				return "", &TensorError{Kind: ErrCheckpoint, Name: e.info.Name, File: filepath.Base(e.file.Path()),
					Detail: "reading its bytes for WeightsFingerprint", Err: err}
			}
			binary.LittleEndian.PutUint64(num[:], uint64(off))
			h.Write(num[:])
			h.Write(p)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
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

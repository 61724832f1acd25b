package dsv4

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"math"
)

// ErrIncompatible reports that two models cannot exchange sequence state: their
// KV layouts differ (layer count or types, head or indexer widths, compression
// rates, sliding window) or, for TransferKV, their configurations differ at all.
var ErrIncompatible = errors.New("dsv4: incompatible models for KV transfer")

// TransferKV moves seq's whole state (every layer's sliding-window ring,
// compressor and lightning-indexer state, and the position) to dst, a model in the
// same process, and returns the Sequence that now owns it on dst. Nothing is
// serialized or copied: the state's buffers change owner, and seq is released
// (Len reports 0 afterwards). Use it to hand a prefilled request from a prefill
// engine to a decode engine in one process; across processes or hosts the state
// travels through package disagg (Snapshot, its wire format, then Restore).
//
// Errors: ErrSequence (nil or released seq, dst nil), ErrIncompatible (dst's
// Config fingerprint differs from seq's model's: see ConfigFingerprint), or
// ctx.Err(); seq is unchanged by any error.
func TransferKV(ctx context.Context, seq *Sequence, dst *Model) (*Sequence, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if dst == nil || dst.net == nil {
		return nil, fmt.Errorf("%w: nil destination model", ErrSequence)
	}
	// Hold seq against a concurrent Prefill, Decode or Release for the move.
	if err := seq.acquire(); err != nil {
		return nil, fmt.Errorf("%w (transfer)", err)
	}
	if seq.net != dst.net {
		if a, b := ConfigFingerprint(seq.net.cfg), ConfigFingerprint(dst.cfg); a != b {
			seq.done()
			return nil, fmt.Errorf("%w: source config %s, destination %s", ErrIncompatible, a[:12], b[:12])
		}
		if err := dst.net.validate(&seq.st); err != nil {
			seq.done()
			return nil, fmt.Errorf("%w: %w", ErrIncompatible, err)
		}
	}
	out := &Sequence{net: dst.net, st: seq.st}
	out.sync()
	seq.st = SequenceState{} // the buffers now belong to out
	seq.free()
	seq.use.Store(useReleased)
	return out, nil
}

// Adopt is Restore without the copy: the returned Sequence takes ownership of
// st's buffers (the caller must not use st afterwards). Disaggregated decode
// servers adopt the state they just decoded off the wire. Errors: ErrSequence
// when st does not fit the model (as Restore).
func (m *Model) Adopt(st *SequenceState) (*Sequence, error) {
	if m == nil || m.net == nil {
		return nil, fmt.Errorf("%w: Adopt on a nil model", ErrInvalidParams)
	}
	if st == nil {
		return nil, fmt.Errorf("%w: Adopt of a nil state", ErrSequence)
	}
	if err := m.net.validate(st); err != nil {
		return nil, err
	}
	out := &Sequence{net: m.net, st: *st}
	out.sync()
	return out, nil
}

// ChatPrompt renders and tokenizes req exactly as Chat and ChatStream would
// (chat encoding or template, tools, thinking mode, a forced tool-call opening)
// and returns the prompt ids that the engine would prefill for each choice.
// Disaggregated serving uses it: the prefill side prefills these ids and the
// decode side checks that a transferred state was made from the same ids.
// Errors: ErrNoChat, and the validation errors of Chat (ErrInvalidParams,
// ErrContextLength).
func (e *Engine) ChatPrompt(req *ChatRequest) ([]int32, error) {
	run, err := e.prepareChat(req)
	if err != nil {
		return nil, err
	}
	return run.prompt, nil
}

// KVLayoutFingerprint returns a hex SHA-256 of the fields of cfg that fix the
// shape of a SequenceState: layer count and types, head_dim, index_head_dim,
// sliding_window and the CSA/HCA compression rates, with the float32 row-major
// layout of this package's SequenceState. Two models with equal fingerprints
// can exchange states without a shape error (the values only make sense if the
// weights are equal too: see ConfigFingerprint). A nil cfg gives "".
func KVLayoutFingerprint(cfg *Config) string {
	if cfg == nil {
		return ""
	}
	h := sha256.New()
	putS(h, "dsv4-kv-layout/1 float32 row-major")
	putI(h, cfg.NumHiddenLayers, cfg.HeadDim, cfg.IndexHeadDim, cfg.SlidingWindow, cfg.CompressRateCSA, cfg.CompressRateHCA)
	for _, t := range cfg.LayerTypes {
		putS(h, string(t))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ConfigFingerprint returns a hex SHA-256 of every field of cfg that changes
// the forward pass (all of Config except the architecture names and the stored
// dtypes), so that two engines with equal fingerprints compute the same
// function of the same weights. TransferKV and the disagg handshake refuse
// pairs whose fingerprints differ. A nil cfg gives "".
func ConfigFingerprint(cfg *Config) string {
	if cfg == nil {
		return ""
	}
	h := sha256.New()
	putS(h, KVLayoutFingerprint(cfg), cfg.ModelType, cfg.HiddenAct, cfg.ScoringFunc)
	putI(h, cfg.VocabSize, cfg.HiddenSize, cfg.NumAttentionHeads, cfg.NumKeyValueHeads,
		cfg.QKRopeHeadDim, cfg.QLoraRank, cfg.OGroups, cfg.OLoraRank, cfg.MaxPositionEmbeddings,
		cfg.IndexNHeads, cfg.IndexTopK, cfg.HCMult, cfg.HCSinkhornIters, cfg.MoEIntermediateSize,
		cfg.NRoutedExperts, cfg.NSharedExperts, cfg.NumExpertsPerTok, b2i(cfg.NormTopKProb),
		b2i(cfg.TieWordEmbeddings), cfg.BOSTokenID, cfg.PadTokenID)
	putI(h, cfg.EOSTokenIDs...)
	putF(h, cfg.PartialRotaryFactor, cfg.RMSNormEps, cfg.HCEps, cfg.RoutedScalingFactor,
		cfg.SwigluLimit, cfg.RopeTheta, cfg.CompressRopeTheta)
	putS(h, fmt.Sprintf("%+v|%+v", cfg.RopeMain, cfg.RopeCompress))
	for _, t := range cfg.MLPLayerTypes {
		putS(h, string(t))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func putS(h hash.Hash, ss ...string) {
	for _, s := range ss {
		putI(h, len(s))
		h.Write([]byte(s))
	}
}

func putI(h hash.Hash, vs ...int) {
	var b [8]byte
	putLen := func(v int) {
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		h.Write(b[:])
	}
	putLen(len(vs))
	for _, v := range vs {
		putLen(v)
	}
}

func putF(h hash.Hash, vs ...float64) {
	var b [8]byte
	for _, v := range vs {
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
		h.Write(b[:])
	}
}

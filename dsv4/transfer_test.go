package dsv4

import (
	"context"
	"errors"
	"slices"
	"testing"
)

func loadTestModel(t testing.TB, dir string) *Model {
	t.Helper()
	m, err := Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestTransferKV: decode after an in-process transfer gives bit-identical logits
// to decode in place; a model with another config is refused.
func TestTransferKV(t *testing.T) {
	ctx := context.Background()
	a := loadTestModel(t, "testdata/ckpt_hf_bf16")
	b := loadTestModel(t, "testdata/ckpt_hf_bf16")
	prompt := make([]int32, 21) // crosses CSA/HCA windows and the sliding window
	for i := range prompt {
		prompt[i] = int32(i*7+3) % 128
	}
	ref := a.NewSequence()
	src := a.NewSequence()
	for _, s := range []*Sequence{ref, src} {
		if _, err := a.Prefill(ctx, s, prompt); err != nil {
			t.Fatal(err)
		}
	}
	moved, err := TransferKV(ctx, src, b)
	if err != nil {
		t.Fatal(err)
	}
	if src.Len() != 0 || moved.Len() != len(prompt) {
		t.Fatalf("after transfer: src.Len %d moved.Len %d", src.Len(), moved.Len())
	}
	for step := range 6 {
		id := int32(step*11+5) % 128
		want, err := a.Decode(ctx, []*Sequence{ref}, []int32{id})
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.Decode(ctx, []*Sequence{moved}, []int32{id})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got[0], want[0]) {
			t.Fatalf("step %d: logits differ after transfer", step)
		}
	}
	if _, err := TransferKV(ctx, src, b); !errors.Is(err, ErrSequence) {
		t.Fatalf("transfer of released sequence: %v, want ErrSequence", err)
	}
	other := loadTestModel(t, "testdata/ckpt_hf_saved")
	if _, err := TransferKV(ctx, moved, other); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("transfer to another config: %v, want ErrIncompatible", err)
	}
	if moved.Len() == 0 {
		t.Fatal("refused transfer released the sequence")
	}
	if ConfigFingerprint(a.Config()) == ConfigFingerprint(other.Config()) {
		t.Fatal("different configs, same fingerprint")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := TransferKV(cctx, moved, b); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: %v", err)
	}
}

// TestAdopt: a sequence adopted from a snapshot decodes like the original;
// a state that does not fit is refused.
func TestAdopt(t *testing.T) {
	ctx := context.Background()
	a := loadTestModel(t, "testdata/ckpt_hf_bf16")
	seq := a.NewSequence()
	if _, err := a.Prefill(ctx, seq, []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}); err != nil {
		t.Fatal(err)
	}
	st, err := seq.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	adopted, err := a.Adopt(st)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := a.Decode(ctx, []*Sequence{seq}, []int32{10})
	got, _ := a.Decode(ctx, []*Sequence{adopted}, []int32{10})
	if !slices.Equal(got[0], want[0]) {
		t.Fatal("adopted sequence decodes differently")
	}
	st2, _ := seq.Snapshot()
	st2.Layers[0].Window = st2.Layers[0].Window[:1]
	if _, err := a.Adopt(st2); !errors.Is(err, ErrSequence) {
		t.Fatalf("malformed state adopted: %v", err)
	}
}

// TestTransferKVMisuse: a transfer never races a call on the same sequence: a busy
// sequence is refused with ErrSequence and left intact; nil models and states give
// typed errors.
func TestTransferKVMisuse(t *testing.T) {
	ctx := context.Background()
	a := loadTestModel(t, "testdata/ckpt_hf_bf16")
	seq := a.NewSequence()
	if _, err := a.Prefill(ctx, seq, []int32{1, 2, 3, 4, 5}); err != nil {
		t.Fatal(err)
	}
	// Hold the sequence as a running Prefill or Decode would.
	if err := seq.acquire(); err != nil {
		t.Fatal(err)
	}
	if _, err := TransferKV(ctx, seq, a); !errors.Is(err, ErrSequence) {
		t.Fatalf("transfer of a busy sequence: %v, want ErrSequence", err)
	}
	seq.done()
	if seq.Len() != 5 {
		t.Fatalf("refused transfer changed the sequence: Len %d", seq.Len())
	}
	moved, err := TransferKV(ctx, seq, a)
	if err != nil {
		t.Fatal(err)
	}
	if moved.Len() != 5 || seq.Len() != 0 {
		t.Fatalf("after transfer: moved.Len %d seq.Len %d", moved.Len(), seq.Len())
	}
	if _, err := a.Prefill(ctx, seq, []int32{6}); !errors.Is(err, ErrSequence) {
		t.Fatalf("prefill of a transferred sequence: %v, want ErrSequence", err)
	}
	if _, err := TransferKV(ctx, nil, a); !errors.Is(err, ErrSequence) {
		t.Fatalf("nil sequence: %v", err)
	}
	if _, err := TransferKV(ctx, moved, nil); !errors.Is(err, ErrSequence) {
		t.Fatalf("nil destination: %v", err)
	}
	var nilModel *Model
	if _, err := nilModel.Adopt(&SequenceState{}); !errors.Is(err, ErrInvalidParams) {
		t.Fatalf("Adopt on nil model: %v", err)
	}
	if _, err := a.Adopt(nil); !errors.Is(err, ErrSequence) {
		t.Fatalf("Adopt of nil state: %v", err)
	}
}

package dsv4

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

// TestTensorAfterClose: after Model.Close a weight Tensor's methods return
// ErrClosed, not a panic: Float32 on the unmapped bytes used to fault,
// which safetensors.Guard (faults in live mappings only) re-panicked as a
// nil-pointer dereference; code without the guard would have read whatever
// was mapped there since. Checkpoint.Raw after Close is ErrClosed too (it was
// ErrCheckpoint), and the forward pass still runs on its float32 copies.
func TestTensorAfterClose(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"hc2-yarn", "quant-fp8-mxfp4"} {
		t.Run(name, func(t *testing.T) {
			m, err := Load(ctx, filepath.Join("testdata", "forward", name))
			if err != nil {
				t.Fatal(err)
			}
			w := m.Weights()
			var tid, expert *Tensor
			for _, l := range w.Layers {
				if l.MLP.Router.Tid2Eid != nil && tid == nil {
					tid = l.MLP.Router.Tid2Eid
				}
				if len(l.MLP.Experts) > 0 && expert == nil {
					expert = l.MLP.Experts[0].Down
				}
			}
			if tid == nil || expert == nil {
				t.Fatal("no tid2eid or expert weight in the test model")
			}
			norm := w.Layers[0].InputNorm
			if _, err := norm.Float32(); err != nil {
				t.Fatal(err)
			}
			seq := m.NewSequence()
			defer seq.Release()
			if _, err := m.Prefill(ctx, seq, []int32{1, 2, 3}); err != nil {
				t.Fatal(err)
			}
			fp := m.WeightsFingerprint()
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			if fp == "" || m.WeightsFingerprint() != fp {
				t.Fatalf("WeightsFingerprint %q before Close, %q after", fp, m.WeightsFingerprint())
			}
			cases := []struct {
				name string
				call func() error
			}{
				{"Float32", func() error { _, err := norm.Float32(); return err }},
				{"Dequantize expert", func() error { return expert.Dequantize(make([]float32, expert.NumElements())) }},
				{"DequantizeRows", func() error { return expert.DequantizeRows(make([]float32, expert.Cols()), 0, 1) }},
				{"Int32s", func() error { _, err := tid.Int32s(); return err }},
				{"Checkpoint.Raw", func() error { _, err := m.Checkpoint().Raw(norm.Name); return err }},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					defer func() {
						if r := recover(); r != nil {
							t.Fatalf("panic: %v", r)
						}
					}()
					err := tc.call()
					var te *TensorError
					if !errors.Is(err, ErrClosed) || !errors.As(err, &te) {
						t.Fatalf("err = %v, want a *TensorError wrapping ErrClosed", err)
					}
				})
			}
			if _, err := m.Decode(ctx, []*Sequence{seq}, []int32{4}); err != nil {
				t.Fatalf("Decode after Close: %v", err)
			}
		})
	}
}

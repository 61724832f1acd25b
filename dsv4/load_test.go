package dsv4

import (
	"context"
	"errors"
	"testing"
)

func TestLoadTinyHF(t *testing.T) {
	for _, dir := range []string{"testdata/ckpt_hf_bf16", "testdata/ckpt_hf_sharded"} {
		t.Run(dir, func(t *testing.T) {
			var reports []Progress
			m, err := Load(context.Background(), dir, WithProgress(func(p Progress) { reports = append(reports, p) }))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			c := m.Config()
			if got := len(m.Weights().Layers); got != c.NumHiddenLayers {
				t.Fatalf("layers = %d", got)
			}
			want := []LayerType{LayerSliding, LayerCSA, LayerHCA}
			for i, l := range m.Weights().Layers {
				if l.Type != want[i] {
					t.Errorf("layer %d type %s want %s", i, l.Type, want[i])
				}
				if (l.Attn.Compressor != nil) != (l.Type != LayerSliding) {
					t.Errorf("layer %d compressor presence wrong", i)
				}
				if l.Type == LayerCSA && l.Attn.Compressor.Indexer == nil {
					t.Errorf("layer %d: CSA without indexer", i)
				}
				if (l.MLP.Router.Tid2Eid != nil) != (l.MLPType == MLPHashMoE) {
					t.Errorf("layer %d: tid2eid presence wrong", i)
				}
			}
			if len(reports) == 0 || reports[len(reports)-1].Done != reports[len(reports)-1].Total {
				t.Errorf("progress reports %v", reports)
			}
			g, err := m.Weights().Layers[1].MLP.Experts[3].Up.Float32()
			if err != nil || len(g) != c.MoEIntermediateSize*c.HiddenSize {
				t.Fatalf("expert up: %v (%d)", err, len(g))
			}
		})
	}
}

func TestLoadCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Load(ctx, "testdata/ckpt_hf_bf16")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

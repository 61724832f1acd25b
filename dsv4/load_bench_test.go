package dsv4

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/dsv4go/dsv4go/internal/safetensors"
)

type tensorSpec struct {
	name  string
	dtype safetensors.DType
	shape []int64
}

// flashSpecs lists V4-Flash's tensors in upstream naming with their published
// dtypes and shapes (as in the DeepSeek-V4 HF release): FP8 E4M3 dense weights
// with 128x128 UE8M0 scales, MXFP4 routed experts, BF16/F32 elsewhere.
func flashSpecs(c *Config) []tensorSpec {
	D, H, hd := int64(c.HiddenSize), int64(c.NumAttentionHeads), int64(c.HeadDim)
	var out []tensorSpec
	add := func(name string, dt safetensors.DType, shape ...int64) {
		out = append(out, tensorSpec{name, dt, shape})
	}
	fp8 := func(name string, r, cols int64) {
		add(name+".weight", safetensors.F8E4M3, r, cols)
		add(name+".scale", safetensors.F8E8M0, (r+127)/128, (cols+127)/128)
	}
	mx := func(name string, r, cols int64) {
		add(name+".weight", safetensors.I8, r, cols/2)
		add(name+".scale", safetensors.F8E8M0, r, cols/32)
	}
	mix := int64(c.HCMixDim())
	hcD := int64(c.HCMult) * D
	block := func(p string, typ LayerType, ratio int64, hash bool) {
		add(p+"attn_norm.weight", safetensors.BF16, D)
		add(p+"ffn_norm.weight", safetensors.BF16, D)
		for _, s := range []string{"hc_attn_", "hc_ffn_"} {
			add(p+s+"fn", safetensors.F32, mix, hcD)
			add(p+s+"base", safetensors.F32, mix)
			add(p+s+"scale", safetensors.F32, 3)
		}
		add(p+"attn.attn_sink", safetensors.F32, H)
		fp8(p+"attn.wq_a", int64(c.QLoraRank), D)
		add(p+"attn.q_norm.weight", safetensors.BF16, int64(c.QLoraRank))
		fp8(p+"attn.wq_b", H*hd, int64(c.QLoraRank))
		fp8(p+"attn.wkv", hd, D)
		add(p+"attn.kv_norm.weight", safetensors.BF16, hd)
		og := int64(c.OGroups * c.OLoraRank)
		fp8(p+"attn.wo_a", og, H*hd/int64(c.OGroups))
		fp8(p+"attn.wo_b", D, og)
		if typ != LayerSliding {
			coff := int64(1)
			if typ == LayerCSA {
				coff = 2
			}
			add(p+"attn.compressor.wkv.weight", safetensors.BF16, coff*hd, D)
			add(p+"attn.compressor.wgate.weight", safetensors.BF16, coff*hd, D)
			add(p+"attn.compressor.norm.weight", safetensors.BF16, hd)
			add(p+"attn.compressor.ape", safetensors.F32, ratio, coff*hd)
			if typ == LayerCSA {
				ihd, nI := int64(c.IndexHeadDim), int64(c.IndexNHeads)
				fp8(p+"attn.indexer.wq_b", nI*ihd, int64(c.QLoraRank))
				add(p+"attn.indexer.weights_proj.weight", safetensors.BF16, nI, D)
				add(p+"attn.indexer.compressor.wkv.weight", safetensors.BF16, 2*ihd, D)
				add(p+"attn.indexer.compressor.wgate.weight", safetensors.BF16, 2*ihd, D)
				add(p+"attn.indexer.compressor.norm.weight", safetensors.BF16, ihd)
				add(p+"attn.indexer.compressor.ape", safetensors.F32, ratio, 2*ihd)
			}
		}
		E, I := int64(c.NRoutedExperts), int64(c.MoEIntermediateSize)
		add(p+"ffn.gate.weight", safetensors.BF16, E, D)
		if hash {
			add(p+"ffn.gate.tid2eid", safetensors.I64, int64(c.VocabSize), int64(c.NumExpertsPerTok))
		} else {
			add(p+"ffn.gate.bias", safetensors.F32, E)
		}
		for e := range E {
			q := fmt.Sprintf("%sffn.experts.%d.", p, e)
			mx(q+"w1", I, D)
			mx(q+"w2", D, I)
			mx(q+"w3", I, D)
		}
		fp8(p+"ffn.shared_experts.w1", I, D)
		fp8(p+"ffn.shared_experts.w2", D, I)
		fp8(p+"ffn.shared_experts.w3", I, D)
	}
	add("embed.weight", safetensors.BF16, int64(c.VocabSize), D)
	add("head.weight", safetensors.BF16, int64(c.VocabSize), D)
	add("norm.weight", safetensors.BF16, D)
	add("hc_head_fn", safetensors.F32, int64(c.HCMult), hcD)
	add("hc_head_base", safetensors.F32, int64(c.HCMult))
	add("hc_head_scale", safetensors.F32, 1)
	for i := range c.NumHiddenLayers {
		block(fmt.Sprintf("layers.%d.", i), c.LayerTypes[i], int64(c.CompressRate(i)), c.MLPLayerTypes[i] == MLPHashMoE)
	}
	fp8("mtp.0.e_proj", D, D)
	fp8("mtp.0.h_proj", D, D)
	for _, n := range []string{"enorm", "hnorm", "norm"} {
		add("mtp.0."+n+".weight", safetensors.BF16, D)
	}
	add("mtp.0.hc_head_fn", safetensors.F32, int64(c.HCMult), hcD)
	add("mtp.0.hc_head_base", safetensors.F32, int64(c.HCMult))
	add("mtp.0.hc_head_scale", safetensors.F32, 1)
	block("mtp.0.", LayerSliding, 0, false)
	return out
}

// writeSparseCheckpoint writes config.json, nShards safetensors files whose
// data sections are holes (sparse files: no data is materialised) and the
// index. It returns the total logical size in bytes and the tensor count.
func writeSparseCheckpoint(tb testing.TB, dir, config string, nShards int) (int64, int) {
	tb.Helper()
	c, err := ParseConfig([]byte(config))
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o644); err != nil {
		tb.Fatal(err)
	}
	specs := flashSpecs(c)
	sizes := make([]int64, len(specs))
	var total int64
	for i, s := range specs {
		n := int64(s.dtype.Size())
		for _, d := range s.shape {
			n *= d
		}
		sizes[i] = n
		total += n
	}
	weightMap := map[string]string{}
	per := total/int64(nShards) + 1
	start := 0
	for sh := range nShards {
		var acc int64
		end := start
		for end < len(specs) && (acc < per || sh == nShards-1) {
			acc += sizes[end]
			end++
		}
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", sh+1, nShards)
		infos := make([]safetensors.TensorInfo, 0, end-start)
		for _, s := range specs[start:end] {
			infos = append(infos, safetensors.TensorInfo{Name: s.name, DType: s.dtype, Shape: s.shape})
			weightMap[s.name] = name
		}
		hdr, dataSize, err := safetensors.EncodeHeader(infos, map[string]string{"format": "pt"})
		if err != nil {
			tb.Fatal(err)
		}
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := f.Write(hdr); err != nil {
			tb.Fatal(err)
		}
		if err := f.Truncate(int64(len(hdr)) + dataSize); err != nil {
			tb.Fatal(err)
		}
		f.Close()
		start = end
	}
	ix, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": weightMap})
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), ix, 0o644); err != nil {
		tb.Fatal(err)
	}
	return total, len(specs)
}

// TestFlashMetadataLoad checks that a V4-Flash-shaped checkpoint (upstream
// names, FP8 + MXFP4, 46 sparse shards) binds completely: every layer typed,
// every routed expert MXFP4, every dense projection FP8-block.
func TestFlashMetadataLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("writes ~70k tensor headers")
	}
	dir := t.TempDir()
	total, n := writeSparseCheckpoint(t, dir, flashConfig, 46)
	ck, err := OpenCheckpoint(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	w := ck.Weights()
	if len(w.Layers) != 43 || len(w.MTP) == 0 {
		t.Fatalf("layers %d, mtp %d", len(w.Layers), len(w.MTP))
	}
	l := w.Layers[2]
	if l.Type != LayerCSA || l.Attn.Compressor.Indexer == nil || l.MLP.Router.Tid2Eid == nil {
		t.Errorf("layer 2: %+v", l)
	}
	if f := l.MLP.Experts[255].Down.Format; f != FormatMXFP4 {
		t.Errorf("expert format %v", f)
	}
	if f := l.Attn.QBProj.Format; f != FormatFP8Block {
		t.Errorf("wq_b format %v", f)
	}
	if s := l.MLP.Experts[0].Gate.Shape; s[0] != 2048 || s[1] != 4096 {
		t.Errorf("expert logical shape %v", s)
	}
	t.Logf("%d tensors, %.1f GB logical", n, float64(total)/1e9)
}

// BenchmarkLoadMetadataFlash46 measures OpenCheckpoint (config, 46 shard
// headers, index cross-check, binding and validation of ~70k tensors) on a
// synthetic V4-Flash checkpoint whose data is never materialised.
func BenchmarkLoadMetadataFlash46(b *testing.B) {
	dir := b.TempDir()
	total, n := writeSparseCheckpoint(b, dir, flashConfig, 46)
	cpu0 := processCPU()
	for b.Loop() {
		ck, err := OpenCheckpoint(context.Background(), dir)
		if err != nil {
			b.Fatal(err)
		}
		ck.Close()
	}
	if cpu := processCPU() - cpu0; cpu > 0 {
		b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	}
	b.ReportMetric(float64(n), "tensors")
	b.ReportMetric(float64(total)/1e9, "GB")
}

// TestWriteSparseFlash writes the synthetic sparse V4-Flash checkpoint into
// $DSV4_SPARSE_FLASH_DIR (skipped when unset), for timing peers on the same
// files, e.g. Python safetensors.safe_open over every shard.
func TestWriteSparseFlash(t *testing.T) {
	dir := os.Getenv("DSV4_SPARSE_FLASH_DIR")
	if dir == "" {
		t.Skip("DSV4_SPARSE_FLASH_DIR not set")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	total, n := writeSparseCheckpoint(t, dir, flashConfig, 46)
	t.Logf("wrote %d tensors, %.1f GB logical, into %s", n, float64(total)/1e9, dir)
}

// BenchmarkLoadTiny times Load of the embedded tiny model (models/dsv4-tiny,
// 30 MB): open, validate, WeightsFingerprint, dequantize to float32.
func BenchmarkLoadTiny(b *testing.B) {
	dir := filepath.Join("..", "models", "dsv4-tiny")
	for b.Loop() {
		m, err := Load(context.Background(), dir)
		if err != nil {
			b.Fatal(err)
		}
		m.Close()
	}
}

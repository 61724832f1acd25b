// Package convert re-encodes DeepSeek-V4 checkpoints without Python: it reads
// any checkpoint dsv4 can load (HF float, upstream FP8/MXFP4, NVFP4) and
// writes DeepSeek's upstream naming with FP8 E4M3 128x128-block dense
// weights and MXFP4 or NVFP4 routed experts, as the published checkpoints
// (deepseek-ai/DeepSeek-V4-Flash and nvidia/DeepSeek-V4-Flash-NVFP4) are laid out.
//
// Quantized: attention wq_a, wq_b, wkv, wo_a, wo_b, the indexer's wq_b, the
// shared experts and the MTP e_proj/h_proj (FP8 block), and the routed experts
// (MXFP4 or NVFP4; MTP experts always MXFP4, as NVIDIA's checkpoint). Kept
// as stored (bit-exact): embeddings, head, norms, mHC, sinks, compressor and
// indexer-compressor projections, indexer weights_proj, router, biases and
// tid2eid.
package convert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/internal/numfmt"
	"github.com/dsv4go/dsv4go/internal/safetensors"
)

// ExpertFormat selects the routed experts' output format.
type ExpertFormat string

// Routed-expert formats.
const (
	MXFP4 ExpertFormat = "mxfp4" // E2M1 + UE8M0 per 32 (DeepSeek's release)
	NVFP4 ExpertFormat = "nvfp4" // E2M1 + E4M3 per 16 + F32 global (NVIDIA ModelOpt)
)

// DefaultMaxShardBytes is the shard size used when Options.MaxShardBytes is 0.
const DefaultMaxShardBytes = 4 << 30

// Options configure Convert.
type Options struct {
	// Experts is the routed experts' format; "" means MXFP4.
	Experts ExpertFormat
	// MaxShardBytes bounds each output shard (a tensor and its scales are
	// never split). 0 means DefaultMaxShardBytes. When everything fits in
	// one shard the output is a single model.safetensors without an index.
	MaxShardBytes int64
	// NVFP4InputScale, when > 0, is written as every NVFP4 expert's
	// "input_scale" (the activation global scale of W4A4 inference; ModelOpt
	// calibrates it as amax_act/(6*448)). 0 omits input_scale.
	NVFP4InputScale float32
	// Progress, if set, is called after each tensor group is written.
	Progress func(done, total int)
	// Load options passed to dsv4.OpenCheckpoint for the source.
	Load []dsv4.Option
}

// Convert reads the checkpoint in srcDir and writes the converted one into
// dstDir (created if needed; existing files of the same names are
// replaced). Other files of srcDir (tokenizer, generation config, chat
// template) are copied. It honours ctx between tensors.
func Convert(ctx context.Context, srcDir, dstDir string, opts Options) error {
	if opts.Experts == "" {
		opts.Experts = MXFP4
	}
	if opts.Experts != MXFP4 && opts.Experts != NVFP4 {
		return fmt.Errorf("convert: unknown expert format %q (want mxfp4 or nvfp4)", opts.Experts)
	}
	if opts.MaxShardBytes <= 0 {
		opts.MaxShardBytes = DefaultMaxShardBytes
	}
	if abs, err := filepath.Abs(srcDir); err == nil {
		if abs2, err := filepath.Abs(dstDir); err == nil && abs == abs2 {
			return errors.New("convert: source and destination are the same directory")
		}
	}
	ck, err := dsv4.OpenCheckpoint(ctx, srcDir, opts.Load...)
	if err != nil {
		return err
	}
	defer ck.Close()
	groups, err := plan(ck, &opts)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dstDir, 0o755); err != nil {
		return err
	}
	if err := writeShards(ctx, dstDir, groups, &opts); err != nil {
		return err
	}
	if err := writeConfig(srcDir, dstDir, &opts); err != nil {
		return err
	}
	return copyAuxFiles(srcDir, dstDir)
}

// group is one source tensor and the output tensors it becomes.
type group struct {
	outs    []safetensors.TensorInfo
	produce func() ([][]byte, error)
}

func (g *group) bytes() int64 {
	var n int64
	for _, o := range g.outs {
		sz := int64(o.DType.Size())
		for _, d := range o.Shape {
			sz *= d
		}
		n += sz
	}
	return n
}

// fp8Dense lists the layer-relative canonical names quantized to FP8 blocks.
var fp8Dense = map[string]bool{
	"self_attn.q_a_proj.weight":                    true,
	"self_attn.q_b_proj.weight":                    true,
	"self_attn.kv_proj.weight":                     true,
	"self_attn.o_a_proj.weight":                    true,
	"self_attn.o_b_proj.weight":                    true,
	"self_attn.compressor.indexer.q_b_proj.weight": true,
	"mlp.shared_experts.gate_proj.weight":          true,
	"mlp.shared_experts.up_proj.weight":            true,
	"mlp.shared_experts.down_proj.weight":          true,
	"e_proj.weight":                                true,
	"h_proj.weight":                                true,
}

// layerRel strips "layers.N." or "mtp.N." and reports whether it was MTP.
func layerRel(canonical string) (string, bool) {
	for _, p := range []string{"layers.", "mtp."} {
		if rest, ok := strings.CutPrefix(canonical, p); ok {
			if i := strings.IndexByte(rest, '.'); i > 0 {
				return rest[i+1:], p == "mtp."
			}
		}
	}
	return canonical, false
}

func plan(ck *dsv4.Checkpoint, opts *Options) ([]*group, error) {
	var groups []*group
	add := func(canonical string, t *dsv4.Tensor) error {
		rel, mtp := layerRel(canonical)
		switch {
		case strings.HasPrefix(rel, "mlp.experts.") || strings.HasPrefix(rel, "ffn.experts."):
			f := opts.Experts
			if mtp {
				f = MXFP4
			}
			groups = append(groups, fp4Group(canonical, t, f, opts.NVFP4InputScale))
		case fp8Dense[rel]:
			groups = append(groups, fp8Group(canonical, t))
		default:
			groups = append(groups, copyGroup(canonical, t))
		}
		return nil
	}
	w := ck.Weights()
	if err := w.Tensors(add); err != nil {
		return nil, err
	}
	for _, name := range sortedKeys(w.MTP) {
		t := w.MTP[name]
		if strings.HasSuffix(name, "weight_scale_inv") || strings.HasSuffix(name, ".weight_scale") ||
			strings.HasSuffix(name, ".weight_scale_2") || strings.HasSuffix(name, ".input_scale") {
			continue // scales travel with their weights
		}
		if t.Format == dsv4.FormatFloat || t.Format == dsv4.FormatInt {
			rel, _ := layerRel(name)
			if !(fp8Dense[rel] || strings.HasPrefix(rel, "mlp.experts.")) || len(t.Shape) != 2 {
				groups = append(groups, copyGroup(name, t))
				continue
			}
		}
		if err := add(name, t); err != nil {
			return nil, err
		}
	}
	return groups, nil
}

func shape64(s []int) []int64 {
	out := make([]int64, len(s))
	for i, d := range s {
		out[i] = int64(d)
	}
	return out
}

// copyGroup keeps a tensor as stored; a quantized one is written as F32.
func copyGroup(canonical string, t *dsv4.Tensor) *group {
	name := dsv4.UpstreamName(canonical)
	if t.Format == dsv4.FormatFloat || t.Format == dsv4.FormatInt {
		return &group{
			outs:    []safetensors.TensorInfo{{Name: name, DType: safetensors.DType(t.DType), Shape: shape64(t.Shape)}},
			produce: func() ([][]byte, error) { return [][]byte{t.Data}, nil },
		}
	}
	return &group{
		outs: []safetensors.TensorInfo{{Name: name, DType: safetensors.F32, Shape: shape64(t.Shape)}},
		produce: func() ([][]byte, error) {
			v, err := t.Float32()
			if err != nil {
				return nil, err
			}
			b := make([]byte, 4*len(v))
			return [][]byte{b}, numfmt.F32ToBytes(b, v)
		},
	}
}

func fp8Group(canonical string, t *dsv4.Tensor) *group {
	base := strings.TrimSuffix(dsv4.UpstreamName(canonical), ".weight")
	r, c := t.Rows(), t.Cols()
	return &group{
		outs: []safetensors.TensorInfo{
			{Name: base + ".weight", DType: safetensors.F8E4M3, Shape: []int64{int64(r), int64(c)}},
			{Name: base + ".scale", DType: safetensors.F8E8M0, Shape: []int64{int64(ceilDiv(r, FP8BlockSize)), int64(ceilDiv(c, FP8BlockSize))}},
		},
		produce: func() ([][]byte, error) {
			v, err := t.Float32()
			if err != nil {
				return nil, err
			}
			q, s, err := QuantizeFP8Block(v, r, c)
			return [][]byte{q, s}, err
		},
	}
}

func fp4Group(canonical string, t *dsv4.Tensor, f ExpertFormat, inputScale float32) *group {
	base := strings.TrimSuffix(dsv4.UpstreamName(canonical), ".weight")
	r, c := t.Rows(), t.Cols()
	if f == MXFP4 {
		return &group{
			outs: []safetensors.TensorInfo{
				{Name: base + ".weight", DType: safetensors.I8, Shape: []int64{int64(r), int64(c / 2)}},
				{Name: base + ".scale", DType: safetensors.F8E8M0, Shape: []int64{int64(r), int64(ceilDiv(c, 32))}},
			},
			produce: func() ([][]byte, error) {
				v, err := t.Float32()
				if err != nil {
					return nil, err
				}
				q, s, err := QuantizeMXFP4(v, r, c)
				return [][]byte{q, s}, err
			},
		}
	}
	outs := []safetensors.TensorInfo{
		{Name: base + ".weight", DType: safetensors.U8, Shape: []int64{int64(r), int64(c / 2)}},
		{Name: base + ".weight_scale", DType: safetensors.F8E4M3, Shape: []int64{int64(r), int64(ceilDiv(c, 16))}},
		{Name: base + ".weight_scale_2", DType: safetensors.F32, Shape: []int64{}},
	}
	if inputScale > 0 {
		outs = append(outs, safetensors.TensorInfo{Name: base + ".input_scale", DType: safetensors.F32, Shape: []int64{}})
	}
	return &group{
		outs: outs,
		produce: func() ([][]byte, error) {
			v, err := t.Float32()
			if err != nil {
				return nil, err
			}
			q, s, g, err := QuantizeNVFP4(v, r, c)
			if err != nil {
				return nil, err
			}
			gb := make([]byte, 4)
			numfmt.F32ToBytes(gb, []float32{g})
			out := [][]byte{q, s, gb}
			if inputScale > 0 {
				ib := make([]byte, 4)
				numfmt.F32ToBytes(ib, []float32{inputScale})
				out = append(out, ib)
			}
			return out, nil
		},
	}
}

func writeShards(ctx context.Context, dir string, groups []*group, opts *Options) error {
	// Assign groups to shards in order.
	var shards [][]*group
	var cur []*group
	var curBytes int64
	for _, g := range groups {
		if len(cur) > 0 && curBytes+g.bytes() > opts.MaxShardBytes {
			shards = append(shards, cur)
			cur, curBytes = nil, 0
		}
		cur = append(cur, g)
		curBytes += g.bytes()
	}
	if len(cur) > 0 {
		shards = append(shards, cur)
	}
	weightMap := map[string]string{}
	var total int64
	done := 0
	for i, sh := range shards {
		name := "model.safetensors"
		if len(shards) > 1 {
			name = fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(shards))
		}
		var infos []safetensors.TensorInfo
		for _, g := range sh {
			infos = append(infos, g.outs...)
			total += g.bytes()
		}
		w, err := safetensors.Create(filepath.Join(dir, name), infos, map[string]string{"format": "pt"})
		if err != nil {
			return err
		}
		err = produceInOrder(ctx, sh, func(g *group, data [][]byte) error {
			for k, o := range g.outs {
				if err := w.Write(o.Name, data[k]); err != nil {
					return err
				}
				weightMap[o.Name] = name
			}
			done++
			if opts.Progress != nil {
				opts.Progress(done, len(groups))
			}
			return nil
		})
		if err != nil {
			w.Abort()
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
	}
	indexPath := filepath.Join(dir, safetensors.IndexFileName)
	if len(shards) <= 1 {
		if err := os.Remove(indexPath); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	b, err := json.MarshalIndent(map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": weightMap}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(indexPath, append(b, '\n'), 0o644)
}

// produceInOrder quantizes the groups on all cores (at most 2 per core in
// flight, bounding memory) and hands the results to consume in order.
func produceInOrder(ctx context.Context, groups []*group, consume func(*group, [][]byte) error) error {
	type result struct {
		data [][]byte
		err  error
	}
	workers := max(1, runtime.GOMAXPROCS(0))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	futures := make(chan chan result, 2*workers)
	sem := make(chan struct{}, workers)
	go func() {
		defer close(futures)
		for _, g := range groups {
			ch := make(chan result, 1)
			select {
			case futures <- ch:
			case <-ctx.Done():
				return
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				ch <- result{err: ctx.Err()}
				return
			}
			go func() {
				defer func() { <-sem }()
				data, err := g.produce()
				ch <- result{data, err}
			}()
		}
	}()
	i := 0
	for ch := range futures {
		r := <-ch
		g := groups[i]
		i++
		if r.err == nil {
			r.err = ctx.Err()
		}
		if r.err != nil {
			cancel()
			for range futures { // let the producer exit
			}
			return fmt.Errorf("convert: %s: %w", g.outs[0].Name, r.err)
		}
		if err := consume(g, r.data); err != nil {
			cancel()
			for range futures {
			}
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if i != len(groups) {
		return fmt.Errorf("convert: %d of %d tensors produced", i, len(groups))
	}
	return nil
}

// writeConfig copies config.json with quantization_config and expert_dtype
// describing the output (DeepSeek's keys; ModelOpt's for NVFP4).
func writeConfig(srcDir, dstDir string, opts *Options) error {
	b, err := os.ReadFile(filepath.Join(srcDir, "config.json"))
	if err != nil {
		return err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("convert: %s: %w", filepath.Join(srcDir, "config.json"), err)
	}
	q := map[string]any{
		"quant_method":      "fp8",
		"fmt":               "e4m3",
		"scale_fmt":         "ue8m0",
		"activation_scheme": "dynamic",
		"weight_block_size": []int{FP8BlockSize, FP8BlockSize},
	}
	if opts.Experts == NVFP4 {
		q["quant_algo"] = "MIXED_PRECISION"
		q["moe_quant_algo"] = "NVFP4"
		q["group_size"] = 16
		q["producer"] = map[string]any{"name": "dsv4go", "version": "convert"}
		q["ignore"] = []string{"*.attn.*", "*.ffn.shared_experts.*", "head", "mtp.*"}
	}
	m["quantization_config"] = q
	m["expert_dtype"] = "fp4"
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dstDir, "config.json"), append(out, '\n'), 0o644)
}

// auxPrefixes selects the files copyAuxFiles carries over: tokenizer,
// generation config, chat template, licence and model card.
var auxPrefixes = []string{"tokenizer", "special_tokens_map", "generation_config", "chat_template", "vocab", "merges", "README", "LICENSE"}

// copyAuxFiles copies the tokenizer and generation files of srcDir.
func copyAuxFiles(srcDir, dstDir string) error {
	ents, err := os.ReadDir(srcDir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		n := e.Name()
		if !e.Type().IsRegular() || strings.HasSuffix(n, ".safetensors") {
			continue
		}
		if !slices.ContainsFunc(auxPrefixes, func(p string) bool { return strings.HasPrefix(n, p) }) {
			continue
		}
		if err := copyFile(filepath.Join(srcDir, n), filepath.Join(dstDir, n)); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func sortedKeys(m map[string]*dsv4.Tensor) []string { return slices.Sorted(maps.Keys(m)) }

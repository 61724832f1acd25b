package dsv4

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/dsv4go/dsv4go/internal/numfmt"
	"github.com/dsv4go/dsv4go/internal/safetensors"
)

// DType is a tensor's storage dtype, spelled as in the safetensors header.
type DType string

// Storage dtypes found in DeepSeek-V4 checkpoints.
const (
	F64     DType = "F64"
	F32     DType = "F32"
	F16     DType = "F16"
	BF16    DType = "BF16"
	F8E4M3  DType = "F8_E4M3" // FP8 E4M3FN (OCP), max 448, no Inf
	F8E8M0  DType = "F8_E8M0" // UE8M0 scale byte: 2^(b-127)
	I64     DType = "I64"
	I32     DType = "I32"
	I16     DType = "I16"
	I8      DType = "I8" // packed FP4 E2M1 pairs (DeepSeek MXFP4 experts)
	U8      DType = "U8" // packed FP4 E2M1 pairs (ModelOpt NVFP4 experts)
	BOOL    DType = "BOOL"
	F8E5M2  DType = "F8_E5M2"
	unknown DType = ""
)

// Size returns the bytes per stored element (0 for an unknown dtype).
func (d DType) Size() int {
	switch d {
	case F64, I64:
		return 8
	case F32, I32:
		return 4
	case F16, BF16, I16:
		return 2
	case F8E4M3, F8E8M0, F8E5M2, I8, U8, BOOL:
		return 1
	}
	return 0
}

// Format is the storage form of a weight, decided from its dtype and the
// scale tensors stored beside it (never from config.json alone).
type Format uint8

// Weight storage forms.
const (
	// FormatFloat: plain F32 / BF16 / F16 / F64 values.
	FormatFloat Format = iota
	// FormatInt: integer data (tid2eid); not dequantizable, see Int32s.
	FormatInt
	// FormatFP8Block: FP8 E4M3FN weight [R, C] with one scale per 128x128
	// block, [ceil(R/128), ceil(C/128)] UE8M0 or F32:
	// W[r,c] = e4m3(w[r,c]) * s[r/128, c/128] (DeepSeek inference/convert.py;
	// HF "weight_scale_inv").
	FormatFP8Block
	// FormatMXFP4: FP4 E2M1 pairs packed in I8/U8 [R, C/2] (low nibble =
	// even column) with a UE8M0 scale per 32 inputs [R, C/32]:
	// W[r,c] = e2m1(nib) * 2^(s[r, c/32]-127) (DeepSeek V4 routed experts).
	FormatMXFP4
	// FormatNVFP4: FP4 E2M1 pairs packed in U8 [R, C/2] with an E4M3 scale per
	// 16 inputs [R, C/16] and an F32 per-tensor global scale:
	// W[r,c] = e2m1(nib) * (e4m3(s[r, c/16]) * global) (NVIDIA ModelOpt).
	FormatNVFP4
)

// String returns "float", "int", "fp8-block", "mxfp4" or "nvfp4".
func (f Format) String() string {
	switch f {
	case FormatFloat:
		return "float"
	case FormatInt:
		return "int"
	case FormatFP8Block:
		return "fp8-block"
	case FormatMXFP4:
		return "mxfp4"
	case FormatNVFP4:
		return "nvfp4"
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

// Tensor is one weight of the checkpoint: its raw bytes (a read-only view of
// the memory-mapped shard; never write to Data) and how to turn them into
// float32. Tensors are created by Load; all fields are read-only afterwards.
//
// Data is a view of the shard's memory mapping: if another process truncates
// the shard file while it is mapped, reading Data past the file's new end
// raises SIGBUS, which kills the process. Float32, Dequantize,
// DequantizeRows and Int32s read it under a fault guard and return an
// ErrCheckpoint error (naming the tensor and the file) instead; code that
// reads Data itself takes that risk, or copies it out through those methods.
// After Model.Close (or Checkpoint.Close) Data is unmapped: those methods
// return a *TensorError wrapping ErrClosed, while reading Data itself faults
// or sees whatever was mapped there since. Closing while one of them runs is
// a caller bug (its read may fault).
//
// Shape is the LOGICAL shape, the shape of the dequantized tensor (row-major,
// last dimension fastest). For packed FP4 the stored bytes per row are
// Shape[last]/2. Rows means the product of all dimensions but the last.
type Tensor struct {
	Name   string // name as written in the checkpoint (for errors and tools)
	File   string // shard file holding Data
	DType  DType  // storage dtype of Data
	Shape  []int  // logical shape (dequantized)
	Data   []byte // raw little-endian bytes, read-only
	Format Format // storage form

	// Scale holds the block scales of FP8Block (F8_E8M0 or F32,
	// [ceil(R/BlockRows), ceil(C/BlockCols)]), MXFP4 (F8_E8M0 [R, C/32]) and
	// NVFP4 (F8_E4M3 [R, C/16]) weights; nil for FormatFloat and FormatInt.
	Scale *Tensor
	// BlockRows and BlockCols are the scale block: 128x128 (FP8Block),
	// 1x32 (MXFP4), 1x16 (NVFP4); 0 when unscaled.
	BlockRows, BlockCols int
	// GlobalScale is NVFP4's "weight_scale_2" (per-tensor F32); 1 otherwise.
	GlobalScale float32
	// InputScale is NVFP4's "input_scale" (activation global scale for W4A4
	// emulation), read and kept; 0 when absent. Weight-only dequantization
	// ignores it.
	InputScale float32

	src *safetensors.File // the mapped file Data views (nil: not from a file)
}

// NumElements is the product of the logical shape.
func (t *Tensor) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Cols is the last logical dimension (1 for a scalar).
func (t *Tensor) Cols() int {
	if len(t.Shape) == 0 {
		return 1
	}
	return t.Shape[len(t.Shape)-1]
}

// Rows is the product of all logical dimensions but the last.
func (t *Tensor) Rows() int {
	n := 1
	for i := 0; i+1 < len(t.Shape); i++ {
		n *= t.Shape[i]
	}
	return n
}

// Bytes is the stored size of the tensor including its scales.
func (t *Tensor) Bytes() int64 {
	n := int64(len(t.Data))
	if t.Scale != nil {
		n += int64(len(t.Scale.Data))
	}
	return n
}

// Float32 dequantizes the whole tensor into a new slice of NumElements()
// float32 values (row-major, logical shape).
func (t *Tensor) Float32() ([]float32, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	dst := make([]float32, t.NumElements())
	if err := t.Dequantize(dst); err != nil {
		return nil, err
	}
	return dst, nil
}

// Dequantize writes all NumElements() values of the tensor into dst, which
// must have exactly that length. The math per Format is documented on the
// Format constants; float dtypes widen exactly; NVFP4 computes
// e2m1 * float32(e4m3(scale) * global), one float32 rounding per block scale,
// as NVIDIA ModelOpt's NVFP4 dequantization does.
func (t *Tensor) Dequantize(dst []float32) error {
	if len(dst) != t.NumElements() {
		return t.errf("Dequantize: dst has %d elements, tensor has %d", len(dst), t.NumElements())
	}
	rows, cols := t.Rows(), t.Cols()
	workers := min(runtime.GOMAXPROCS(0), len(dst)/parallelDequantElems)
	if workers < 2 || rows < workers {
		return t.DequantizeRows(dst, 0, rows)
	}
	// Large tensors: split the rows over the available cores.
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		r0, r1 := rows*w/workers, rows*(w+1)/workers
		wg.Go(func() { errs[w] = t.DequantizeRows(dst[r0*cols:r1*cols], r0, r1) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// parallelDequantElems is the tensor size per extra goroutine in Dequantize.
const parallelDequantElems = 1 << 19

// DequantizeRows writes rows [r0, r1) (rows as in Rows()) into dst, which
// must hold (r1-r0)*Cols() values. Use it to dequantize a slice of a large
// weight without materialising the whole tensor.
func (t *Tensor) DequantizeRows(dst []float32, r0, r1 int) error {
	rows, cols := t.Rows(), t.Cols()
	if r0 < 0 || r1 < r0 || r1 > rows {
		return t.errf("DequantizeRows: rows [%d,%d) out of range [0,%d)", r0, r1, rows)
	}
	if len(dst) != (r1-r0)*cols {
		return t.errf("DequantizeRows: dst has %d elements, want %d", len(dst), (r1-r0)*cols)
	}
	if err := t.check(); err != nil {
		return err
	}
	return t.guard(func() error { return t.dequantRows(dst, r0, r1) })
}

// guard runs fn, which reads t's (memory-mapped) bytes, so that a shard
// truncated while mapped fails with ErrCheckpoint (wrapping the safetensors
// ErrTruncated) instead of a fatal SIGBUS.
func (t *Tensor) guard(fn func() error) error {
	for _, x := range []*Tensor{t, t.Scale} {
		if x != nil && x.src != nil && x.src.Closed() {
			return &TensorError{Kind: ErrClosed, Name: x.Name, File: x.File,
				Detail: "the checkpoint was closed (Model.Close or Checkpoint.Close): its mapped bytes are gone"}
		}
	}
	err := safetensors.Guard(fn)
	var se *safetensors.Error
	if errors.As(err, &se) {
		return &TensorError{Kind: ErrCheckpoint, Name: t.Name, File: t.File, Err: err}
	}
	return err
}

// dequantRows is DequantizeRows after its checks.
func (t *Tensor) dequantRows(dst []float32, r0, r1 int) error {
	cols := t.Cols()
	switch t.Format {
	case FormatFloat:
		es := t.DType.Size()
		src := t.Data[r0*cols*es : r1*cols*es]
		switch t.DType {
		case F32:
			return numfmt.F32BytesToF32(dst, src)
		case BF16:
			return numfmt.BF16BytesToF32(dst, src)
		case F16:
			return numfmt.F16BytesToF32(dst, src)
		case F64:
			return numfmt.F64BytesToF32(dst, src)
		case F8E4M3:
			return numfmt.E4M3BytesToF32(dst, src)
		case F8E8M0:
			return numfmt.UE8M0BytesToF32(dst, src)
		}
	case FormatFP8Block:
		return t.dequantFP8Block(dst, r0, r1)
	case FormatMXFP4, FormatNVFP4:
		return t.dequantFP4(dst, r0, r1)
	}
	return &TensorError{Kind: ErrTensorDType, Name: t.Name, File: t.File, Detail: fmt.Sprintf("cannot dequantize %s data of form %v", t.DType, t.Format)}
}

func (t *Tensor) errf(format string, args ...any) error {
	return &TensorError{Kind: ErrTensorShape, Name: t.Name, File: t.File, Detail: fmt.Sprintf(format, args...)}
}

// check verifies that Data and Scale are consistent with Shape, so that the
// dequantizers can index without bounds surprises.
func (t *Tensor) check() error {
	rows, cols := t.Rows(), t.Cols()
	for _, d := range t.Shape {
		if d < 0 {
			return t.errf("negative dimension in shape %v", t.Shape)
		}
	}
	var want int
	switch t.Format {
	case FormatFloat, FormatInt, FormatFP8Block:
		want = rows * cols * t.DType.Size()
	case FormatMXFP4, FormatNVFP4:
		if cols%2 != 0 {
			return t.errf("packed FP4 needs an even column count, got %d", cols)
		}
		want = rows * cols / 2
	}
	if len(t.Data) != want {
		return t.errf("data has %d bytes, shape %v needs %d", len(t.Data), t.Shape, want)
	}
	if t.Format == FormatFloat || t.Format == FormatInt {
		return nil
	}
	if t.Scale == nil || t.BlockRows <= 0 || t.BlockCols <= 0 {
		return t.errf("%v weight without scales", t.Format)
	}
	sr, sc := ceilDiv(rows, t.BlockRows), ceilDiv(cols, t.BlockCols)
	if t.Scale.Rows() != sr || t.Scale.Cols() != sc || len(t.Scale.Data) != sr*sc*t.Scale.DType.Size() {
		return &TensorError{Kind: ErrTensorShape, Name: t.Scale.Name, File: t.Scale.File,
			Detail: fmt.Sprintf("scale shape %v (%d bytes), want [%d %d] for weight %v", t.Scale.Shape, len(t.Scale.Data), sr, sc, t.Shape)}
	}
	return nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func (t *Tensor) dequantFP8Block(dst []float32, r0, r1 int) error {
	cols := t.Cols()
	sc := ceilDiv(cols, t.BlockCols)
	srow := make([]float32, sc)
	for r := r0; r < r1; r++ {
		br := r / t.BlockRows
		if err := t.scaleRow(srow, br); err != nil {
			return err
		}
		src := t.Data[r*cols : (r+1)*cols]
		out := dst[(r-r0)*cols : (r-r0+1)*cols]
		for c0 := 0; c0 < cols; c0 += t.BlockCols {
			c1 := min(c0+t.BlockCols, cols)
			s := srow[c0/t.BlockCols]
			o := out[c0:c1]
			for c, b := range src[c0:c1] {
				o[c] = numfmt.E4M3ToF32(b) * s
			}
		}
	}
	return nil
}

// scaleRow decodes row br of the scale tensor into dst (len = scale cols).
func (t *Tensor) scaleRow(dst []float32, br int) error {
	s := t.Scale
	sc := s.Cols()
	es := s.DType.Size()
	src := s.Data[br*sc*es : (br+1)*sc*es]
	switch s.DType {
	case F8E8M0, U8:
		return numfmt.UE8M0BytesToF32(dst, src)
	case F8E4M3:
		return numfmt.E4M3BytesToF32(dst, src)
	case F32:
		return numfmt.F32BytesToF32(dst, src)
	case BF16:
		return numfmt.BF16BytesToF32(dst, src)
	}
	return &TensorError{Kind: ErrTensorDType, Name: s.Name, File: s.File, Detail: "unsupported scale dtype " + string(s.DType)}
}

func (t *Tensor) dequantFP4(dst []float32, r0, r1 int) error {
	cols := t.Cols()
	sc := ceilDiv(cols, t.BlockCols)
	srow := make([]float32, sc)
	g := t.GlobalScale
	for r := r0; r < r1; r++ {
		if err := t.scaleRow(srow, r); err != nil {
			return err
		}
		if t.Format == FormatNVFP4 {
			for i := range srow {
				srow[i] *= g
			}
		}
		src := t.Data[r*cols/2 : (r+1)*cols/2]
		out := dst[(r-r0)*cols : (r-r0+1)*cols]
		half := t.BlockCols / 2 // packed bytes per scale block
		for k, s := range srow {
			b0 := k * half
			b1 := min(b0+half, len(src))
			o := out[2*b0 : 2*b1]
			for j, b := range src[b0:b1] {
				p := numfmt.E2M1PairToF32(b)
				d := o[2*j : 2*j+2 : 2*j+2]
				d[0], d[1] = p[0]*s, p[1]*s
			}
		}
	}
	return nil
}

// Int32s returns an integer tensor (I64, I32, I16, I8, U8) as int32 values,
// e.g. the hash-routing table tid2eid [vocab, k]. Values outside the int32
// range are an error.
func (t *Tensor) Int32s() ([]int32, error) {
	n := t.NumElements()
	es := t.DType.Size()
	if es == 0 || len(t.Data) != n*es {
		return nil, t.errf("data has %d bytes for %d elements of %s", len(t.Data), n, t.DType)
	}
	out := make([]int32, n)
	if err := t.guard(func() error { return t.int32s(out) }); err != nil {
		return nil, err
	}
	return out, nil
}

// int32s converts t's data into out (Int32s after its checks).
func (t *Tensor) int32s(out []int32) error {
	for i := range out {
		switch t.DType {
		case I64:
			v := int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
			if v < math.MinInt32 || v > math.MaxInt32 {
				return t.errf("element %d = %d overflows int32", i, v)
			}
			out[i] = int32(v)
		case I32:
			out[i] = int32(binary.LittleEndian.Uint32(t.Data[4*i:]))
		case I16:
			out[i] = int32(int16(binary.LittleEndian.Uint16(t.Data[2*i:])))
		case I8:
			out[i] = int32(int8(t.Data[i]))
		case U8:
			out[i] = int32(t.Data[i])
		default:
			return &TensorError{Kind: ErrTensorDType, Name: t.Name, File: t.File, Detail: "not an integer dtype: " + string(t.DType)}
		}
	}
	return nil
}

// SliceRows returns a view of rows [r0, r1) of a 2-D (or, for 3-D, of the
// flattened [Rows, Cols]) tensor as a 2-D tensor [r1-r0, Cols], sharing Data.
// FP8Block row ranges must start on a scale-block boundary.
func (t *Tensor) SliceRows(r0, r1 int) (*Tensor, error) {
	rows, cols := t.Rows(), t.Cols()
	if r0 < 0 || r1 <= r0 || r1 > rows {
		return nil, t.errf("SliceRows: [%d,%d) out of range [0,%d)", r0, r1, rows)
	}
	if err := t.check(); err != nil {
		return nil, err
	}
	v := *t
	v.Shape = []int{r1 - r0, cols}
	switch t.Format {
	case FormatFloat, FormatInt:
		es := t.DType.Size()
		v.Data = t.Data[r0*cols*es : r1*cols*es]
	case FormatFP8Block:
		if r0%t.BlockRows != 0 || (r1%t.BlockRows != 0 && r1 != rows) {
			return nil, t.errf("SliceRows: [%d,%d) not aligned to %d-row scale blocks", r0, r1, t.BlockRows)
		}
		v.Data = t.Data[r0*cols : r1*cols]
		s, err := t.Scale.SliceRows(r0/t.BlockRows, ceilDiv(r1, t.BlockRows))
		if err != nil {
			return nil, err
		}
		v.Scale = s
	case FormatMXFP4, FormatNVFP4:
		v.Data = t.Data[r0*cols/2 : r1*cols/2]
		s, err := t.Scale.SliceRows(r0, r1)
		if err != nil {
			return nil, err
		}
		v.Scale = s
	}
	return &v, nil
}

// Weights is the typed description of a DeepSeek-V4 checkpoint: every tensor
// the forward pass reads, bound by name (see names.go for the HF and upstream
// spellings) and validated against the Config. Shapes below use the Config
// field names: D = HiddenSize, V = VocabSize, H = NumAttentionHeads,
// hd = HeadDim, hc = HCMult, I = MoEIntermediateSize, E = NRoutedExperts.
type Weights struct {
	Embed  *Tensor   // embed_tokens.weight (upstream embed.weight) [V, D]
	Norm   *Tensor   // norm.weight: final RMSNorm [D]
	Head   *Tensor   // lm_head.weight (upstream head.weight) [V, D]
	HCHead HyperHead // hc_head.* (upstream hc_head_*)
	Layers []*Layer  // NumHiddenLayers decoder blocks

	// MTP holds the multi-token-prediction tensors (upstream "mtp.N.*",
	// canonical names), which the main model does not run; empty when the
	// checkpoint has none (HF checkpoints drop them).
	MTP map[string]*Tensor
}

// HyperHead is the final mHC collapse of the hc residual streams
// (transformers DeepseekV4HyperHead).
type HyperHead struct {
	Fn    *Tensor // hc_head.hc_fn [hc, hc*D] F32
	Base  *Tensor // hc_head.hc_base [hc] F32
	Scale *Tensor // hc_head.hc_scale [1] F32
}

// HyperConnection is one mHC mixing site (transformers
// DeepseekV4HyperConnection): fn [(2+hc)*hc, hc*D], base [(2+hc)*hc],
// scale [3], all F32 in published checkpoints.
type HyperConnection struct {
	Fn    *Tensor // attn_hc.fn / ffn_hc.fn (upstream hc_attn_fn / hc_ffn_fn)
	Base  *Tensor // .base
	Scale *Tensor // .scale
}

// Layer holds one decoder block's weights. What exists depends on Type
// (Attn.Compressor is nil for sliding layers; Compressor.Indexer is non-nil
// only for CSA) and MLPType (Router.Bias for moe, Router.Tid2Eid for
// hash_moe).
type Layer struct {
	Index        int       // layer number
	Type         LayerType // attention type
	MLPType      MLPType   // routing type
	CompressRate int       // 0, CompressRateCSA or CompressRateHCA

	InputNorm         *Tensor // input_layernorm.weight (upstream attn_norm) [D]
	PostAttentionNorm *Tensor // post_attention_layernorm.weight (upstream ffn_norm) [D]
	AttnHC            HyperConnection
	FFNHC             HyperConnection
	Attn              Attention
	MLP               MoE
}

// Attention holds a layer's attention weights (transformers
// DeepseekV4Attention; upstream "attn.*").
type Attention struct {
	QAProj *Tensor // self_attn.q_a_proj.weight (wq_a) [QLoraRank, D]
	QANorm *Tensor // self_attn.q_a_norm.weight (q_norm) [QLoraRank]
	QBProj *Tensor // self_attn.q_b_proj.weight (wq_b) [H*hd, QLoraRank]
	KVProj *Tensor // self_attn.kv_proj.weight (wkv) [hd, D]
	KVNorm *Tensor // self_attn.kv_norm.weight (kv_norm) [hd]
	OAProj *Tensor // self_attn.o_a_proj.weight (wo_a) [OGroups*OLoraRank, H*hd/OGroups]
	OBProj *Tensor // self_attn.o_b_proj.weight (wo_b) [D, OGroups*OLoraRank]
	Sinks  *Tensor // self_attn.sinks (attn_sink) [H] F32

	Compressor *Compressor // nil for sliding_attention layers
}

// Compressor holds a CSA or HCA layer's KV compressor
// (DeepseekV4CSACompressor / DeepseekV4HCACompressor). coff = 2 for CSA
// (overlapping Ca/Cb series), 1 for HCA; m = the layer's CompressRate.
type Compressor struct {
	KVProj       *Tensor // self_attn.compressor.kv_proj.weight (compressor.wkv) [coff*hd, D]
	GateProj     *Tensor // self_attn.compressor.gate_proj.weight (compressor.wgate) [coff*hd, D]
	PositionBias *Tensor // self_attn.compressor.position_bias (compressor.ape) [m, coff*hd] F32
	KVNorm       *Tensor // self_attn.compressor.kv_norm.weight (compressor.norm) [hd]

	Indexer *Indexer // CSA only
}

// Indexer holds a CSA layer's lightning indexer (DeepseekV4Indexer; upstream
// "attn.indexer.*"); ihd = IndexHeadDim, nI = IndexNHeads, m = CompressRateCSA.
type Indexer struct {
	KVProj       *Tensor // ...compressor.indexer.kv_proj.weight (indexer.compressor.wkv) [2*ihd, D]
	GateProj     *Tensor // ...compressor.indexer.gate_proj.weight (indexer.compressor.wgate) [2*ihd, D]
	PositionBias *Tensor // ...compressor.indexer.position_bias (indexer.compressor.ape) [m, 2*ihd]
	KVNorm       *Tensor // ...compressor.indexer.kv_norm.weight (indexer.compressor.norm) [ihd]
	QBProj       *Tensor // ...compressor.indexer.q_b_proj.weight (indexer.wq_b) [nI*ihd, QLoraRank]
	WeightsProj  *Tensor // ...compressor.indexer.scorer.weights_proj.weight (indexer.weights_proj) [nI, D]
}

// MoE holds a layer's mixture of experts (DeepseekV4SparseMoeBlock; upstream
// "ffn.*").
type MoE struct {
	Router  Router
	Experts []Expert // NRoutedExperts routed experts
	Shared  Expert   // the shared expert (mlp.shared_experts.*)
}

// Router holds the gate (DeepseekV4TopKRouter / DeepseekV4HashRouter).
type Router struct {
	Weight  *Tensor // mlp.gate.weight [E, D]
	Bias    *Tensor // mlp.gate.e_score_correction_bias (gate.bias) [E] F32; moe layers only
	Tid2Eid *Tensor // mlp.gate.tid2eid [V, NumExpertsPerTok] I64 or I32; hash_moe layers only
}

// Expert is one SwiGLU expert: y = Down(silu(min(Gate x, limit)) * clamp(Up x)).
// For HF checkpoints, whose routed experts are merged into
// mlp.experts.gate_up_proj [E, 2I, D] and mlp.experts.down_proj [E, D, I],
// Gate/Up/Down are zero-copy row views of the merged tensors.
type Expert struct {
	Gate *Tensor // experts.E.gate_proj (w1) [I, D]
	Up   *Tensor // experts.E.up_proj (w3) [I, D]
	Down *Tensor // experts.E.down_proj (w2) [D, I]
}

// Tensors calls fn for every tensor of the weights in a fixed order (global
// tensors, then layer by layer), with its canonical name. Scale tensors are
// not visited separately (see Tensor.Scale). It stops at the first error.
func (w *Weights) Tensors(fn func(canonical string, t *Tensor) error) error {
	visit := func(name string, t *Tensor) error {
		if t == nil {
			return nil
		}
		return fn(name, t)
	}
	for _, x := range []struct {
		n string
		t *Tensor
	}{{"embed_tokens.weight", w.Embed}, {"norm.weight", w.Norm}, {"lm_head.weight", w.Head},
		{"hc_head.hc_fn", w.HCHead.Fn}, {"hc_head.hc_base", w.HCHead.Base}, {"hc_head.hc_scale", w.HCHead.Scale}} {
		if err := visit(x.n, x.t); err != nil {
			return err
		}
	}
	for _, l := range w.Layers {
		for _, x := range l.named() {
			if err := visit(x.name, x.t); err != nil {
				return err
			}
		}
	}
	return nil
}

type namedTensor struct {
	name string
	t    *Tensor
}

// named lists the layer's tensors with canonical names.
func (l *Layer) named() []namedTensor {
	p := fmt.Sprintf("layers.%d.", l.Index)
	out := []namedTensor{
		{p + "input_layernorm.weight", l.InputNorm},
		{p + "post_attention_layernorm.weight", l.PostAttentionNorm},
		{p + "attn_hc.fn", l.AttnHC.Fn}, {p + "attn_hc.base", l.AttnHC.Base}, {p + "attn_hc.scale", l.AttnHC.Scale},
		{p + "ffn_hc.fn", l.FFNHC.Fn}, {p + "ffn_hc.base", l.FFNHC.Base}, {p + "ffn_hc.scale", l.FFNHC.Scale},
		{p + "self_attn.q_a_proj.weight", l.Attn.QAProj}, {p + "self_attn.q_a_norm.weight", l.Attn.QANorm},
		{p + "self_attn.q_b_proj.weight", l.Attn.QBProj}, {p + "self_attn.kv_proj.weight", l.Attn.KVProj},
		{p + "self_attn.kv_norm.weight", l.Attn.KVNorm}, {p + "self_attn.o_a_proj.weight", l.Attn.OAProj},
		{p + "self_attn.o_b_proj.weight", l.Attn.OBProj}, {p + "self_attn.sinks", l.Attn.Sinks},
	}
	if c := l.Attn.Compressor; c != nil {
		q := p + "self_attn.compressor."
		out = append(out, namedTensor{q + "kv_proj.weight", c.KVProj}, namedTensor{q + "gate_proj.weight", c.GateProj},
			namedTensor{q + "position_bias", c.PositionBias}, namedTensor{q + "kv_norm.weight", c.KVNorm})
		if ix := c.Indexer; ix != nil {
			q += "indexer."
			out = append(out, namedTensor{q + "kv_proj.weight", ix.KVProj}, namedTensor{q + "gate_proj.weight", ix.GateProj},
				namedTensor{q + "position_bias", ix.PositionBias}, namedTensor{q + "kv_norm.weight", ix.KVNorm},
				namedTensor{q + "q_b_proj.weight", ix.QBProj}, namedTensor{q + "scorer.weights_proj.weight", ix.WeightsProj})
		}
	}
	out = append(out, namedTensor{p + "mlp.gate.weight", l.MLP.Router.Weight},
		namedTensor{p + "mlp.gate.e_score_correction_bias", l.MLP.Router.Bias},
		namedTensor{p + "mlp.gate.tid2eid", l.MLP.Router.Tid2Eid})
	for e, ex := range l.MLP.Experts {
		q := fmt.Sprintf("%smlp.experts.%d.", p, e)
		out = append(out, namedTensor{q + "gate_proj.weight", ex.Gate}, namedTensor{q + "up_proj.weight", ex.Up},
			namedTensor{q + "down_proj.weight", ex.Down})
	}
	q := p + "mlp.shared_experts."
	out = append(out, namedTensor{q + "gate_proj.weight", l.MLP.Shared.Gate}, namedTensor{q + "up_proj.weight", l.MLP.Shared.Up},
		namedTensor{q + "down_proj.weight", l.MLP.Shared.Down})
	return out
}

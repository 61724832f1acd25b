//go:build !cuda || !cgo

package cuda

// Available reports whether this build has the CUDA backend compiled in. In this build
// (no cuda tag or no cgo) it is false and every device entry point returns ErrNoCUDA.
const Available = false

// DeviceCount returns ErrNoCUDA in this build.
func DeviceCount() (int, error) { return 0, ErrNoCUDA }

// Device is a GPU; in this build it cannot be opened.
type Device struct{}

// Open returns ErrNoCUDA in this build.
func Open(ordinal int) (*Device, error) { return nil, ErrNoCUDA }

// Name returns "".
func (d *Device) Name() string { return "" }

// ComputeCapability returns 0, 0.
func (d *Device) ComputeCapability() (int, int) { return 0, 0 }

// SMs returns 0.
func (d *Device) SMs() int { return 0 }

// Memory returns 0.
func (d *Device) Memory() int64 { return 0 }

// Stream returns nil.
func (d *Device) Stream() *Stream { return nil }

// NewStream returns ErrNoCUDA.
func (d *Device) NewStream() (*Stream, error) { return nil, ErrNoCUDA }

// Close returns nil.
func (d *Device) Close() error { return nil }

// Alloc returns ErrNoCUDA.
func (d *Device) Alloc(n int64) (*Buffer, error) { return nil, ErrNoCUDA }

// UploadWeight returns ErrNoCUDA.
func (d *Device) UploadWeight(p *Packed) (*Weight, error) { return nil, ErrNoCUDA }

// Stream is a CUDA stream; in this build every method returns ErrNoCUDA.
type Stream struct{}

// Sync returns ErrNoCUDA.
func (s *Stream) Sync() error { return ErrNoCUDA }

// Close returns nil.
func (s *Stream) Close() error { return nil }

// QGEMM returns ErrNoCUDA.
func (s *Stream) QGEMM(w *Weight, x, y *Buffer, m int, accumulate bool) error { return ErrNoCUDA }

// QGEMMSplit returns ErrNoCUDA.
func (s *Stream) QGEMMSplit(w *Weight, x, y *Buffer, m int, accumulate bool, splits int) error {
	return ErrNoCUDA
}

// MatMulF32 returns ErrNoCUDA.
func (s *Stream) MatMulF32(y, x, w *Buffer, m, n, k int) error { return ErrNoCUDA }

// RMSNorm returns ErrNoCUDA.
func (s *Stream) RMSNorm(y, yBF16, x, w *Buffer, rows, n int, eps float32) error { return ErrNoCUDA }

// RoPE returns ErrNoCUDA.
func (s *Stream) RoPE(x, cos, sin *Buffer, rows, half int, sign float32) error { return ErrNoCUDA }

// Softmax returns ErrNoCUDA.
func (s *Stream) Softmax(x *Buffer, rows, n int) error { return ErrNoCUDA }

// SwiGLU returns ErrNoCUDA.
func (s *Stream) SwiGLU(out, outBF16, g, u *Buffer, n int, limit float32) error { return ErrNoCUDA }

// TopK returns ErrNoCUDA.
func (s *Stream) TopK(idx, scores *Buffer, rows, n, k int) error { return ErrNoCUDA }

// Router returns ErrNoCUDA.
func (s *Stream) Router(idx, weights, logits, bias *Buffer, rows, n, k int, scale float32) error {
	return ErrNoCUDA
}

// Embedding returns ErrNoCUDA.
func (s *Stream) Embedding(y, table, ids *Buffer, bf16 bool, m, d, vocab int) error {
	return ErrNoCUDA
}

// ToBF16 returns ErrNoCUDA.
func (s *Stream) ToBF16(dst, src *Buffer, n int) error { return ErrNoCUDA }

// CopyDtoD returns ErrNoCUDA.
func (s *Stream) CopyDtoD(dst, src *Buffer, n int64) error { return ErrNoCUDA }

// Record returns ErrNoCUDA.
func (s *Stream) Record() (*Event, error) { return nil, ErrNoCUDA }

// BeginCapture returns ErrNoCUDA.
func (s *Stream) BeginCapture() error { return ErrNoCUDA }

// EndCapture returns ErrNoCUDA.
func (s *Stream) EndCapture() (*Graph, error) { return nil, ErrNoCUDA }

// Buffer is device memory; in this build none can be allocated.
type Buffer struct{}

// Len returns 0.
func (b *Buffer) Len() int64 { return 0 }

// Slice returns ErrNoCUDA.
func (b *Buffer) Slice(off, n int64) (*Buffer, error) { return nil, ErrNoCUDA }

// Free returns nil.
func (b *Buffer) Free() error { return nil }

// Upload returns ErrNoCUDA.
func (b *Buffer) Upload(src []byte) error { return ErrNoCUDA }

// Download returns ErrNoCUDA.
func (b *Buffer) Download(dst []byte) error { return ErrNoCUDA }

// UploadF32 returns ErrNoCUDA.
func (b *Buffer) UploadF32(src []float32) error { return ErrNoCUDA }

// DownloadF32 returns ErrNoCUDA.
func (b *Buffer) DownloadF32(dst []float32) error { return ErrNoCUDA }

// UploadI32 returns ErrNoCUDA.
func (b *Buffer) UploadI32(src []int32) error { return ErrNoCUDA }

// DownloadI32 returns ErrNoCUDA.
func (b *Buffer) DownloadI32(dst []int32) error { return ErrNoCUDA }

// Weight is a packed weight resident on a device; none exist in this build.
type Weight struct {
	Format     Format
	N, K, NPad int
	Alpha      float32
}

// Bytes returns 0.
func (w *Weight) Bytes() int64 { return 0 }

// Free returns nil.
func (w *Weight) Free() error { return nil }

// Event marks a point in a stream; none exist in this build.
type Event struct{}

// Elapsed returns ErrNoCUDA.
func Elapsed(start, stop *Event) (float32, error) { return 0, ErrNoCUDA }

// Close returns nil.
func (e *Event) Close() error { return nil }

// Graph is an instantiated CUDA graph; none exist in this build.
type Graph struct{}

// Launch returns ErrNoCUDA.
func (g *Graph) Launch(s *Stream, n int, sync bool) error { return ErrNoCUDA }

// Close returns nil.
func (g *Graph) Close() error { return nil }

// WeightStack is a stack of packed weights on a device; none exist in this build.
type WeightStack struct {
	Format        Format
	N, K, NPad, E int
}

// UploadWeightStack returns ErrNoCUDA.
func (d *Device) UploadWeightStack(ps []*Packed) (*WeightStack, error) { return nil, ErrNoCUDA }

// Free returns nil.
func (ws *WeightStack) Free() error { return nil }

// Bytes returns 0.
func (ws *WeightStack) Bytes() int64 { return 0 }

// QGEMMGroupedOpts returns ErrNoCUDA.
func (s *Stream) QGEMMGroupedOpts(ws *WeightStack, ids, x, y *Buffer, m, groups int, o GroupedOptions) error {
	return ErrNoCUDA
}

// QGEMMGrouped returns ErrNoCUDA.
func (s *Stream) QGEMMGrouped(ws *WeightStack, ids, x, y *Buffer, m, groups int, accumulate bool) error {
	return ErrNoCUDA
}

// MoEWorkspace is Stream.MoE's scratch; none exist in this build.
type MoEWorkspace struct {
	M, Groups, Inter int
}

// NewMoEWorkspace returns ErrNoCUDA.
func (d *Device) NewMoEWorkspace(m, groups, inter int) (*MoEWorkspace, error) { return nil, ErrNoCUDA }

// Free returns nil.
func (w *MoEWorkspace) Free() error { return nil }

// MoE returns ErrNoCUDA.
func (s *Stream) MoE(w13, w2 *WeightStack, ids, x, y *Buffer, ws *MoEWorkspace, m, groups int, o MoEOptions) error {
	return ErrNoCUDA
}

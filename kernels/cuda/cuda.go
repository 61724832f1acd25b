//go:build cuda && cgo

package cuda

/*
#cgo CFLAGS: -I${SRCDIR}/csrc
#cgo LDFLAGS: -L${SRCDIR}/lib -ldsv4cuda -lcudart_static -lstdc++ -lm -ldl -lrt -lpthread
#include <stdlib.h>
#include "dsv4cuda.h"
*/
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"
)

// Available reports whether this build has the CUDA backend compiled in (it may still find
// no device at run time).
const Available = true

func check(op string, code C.int) error {
	if code == 0 {
		return nil
	}
	return &Error{Op: op, Code: int(code), Name: C.GoString(C.dsv4c_error_name(code)),
		Msg: C.GoString(C.dsv4c_error_string(code))}
}

// DeviceCount returns the number of CUDA devices (0 with a *Error when no driver is found).
func DeviceCount() (int, error) {
	var n C.int
	if err := check("device_count", C.dsv4c_device_count(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// Device is one GPU with its default stream and a stream-ordered memory pool. Its methods
// bind the calling OS thread's current device first, so a Device may be used from any
// goroutine; a Stream must be used by one goroutine at a time.
type Device struct {
	ordinal int
	name    string
	major   int
	minor   int
	sms     int
	mem     int64
	l2      int
	mu      sync.Mutex
	stream  *Stream
	closed  bool
}

// Open selects GPU ordinal, configures its default memory pool to keep freed memory for
// reuse, and creates the device's default stream. Devices older than sm_80 are refused
// (the kernels use bf16 mma.sync); sm_90 is the tuned target.
func Open(ordinal int) (*Device, error) {
	n, err := DeviceCount()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("cuda: device %d out of range (have %d): %w", ordinal, n, ErrShape)
	}
	d := &Device{ordinal: ordinal}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := check("set_device", C.dsv4c_set_device(C.int(ordinal))); err != nil {
		return nil, err
	}
	var name [256]C.char
	var maj, min, sms, l2 C.int
	var mem C.size_t
	if err := check("device_props", C.dsv4c_device_props(C.int(ordinal), &name[0], 256, &maj, &min, &sms, &mem, &l2)); err != nil {
		return nil, err
	}
	d.name, d.major, d.minor, d.sms, d.mem, d.l2 = C.GoString(&name[0]), int(maj), int(min), int(sms), int64(mem), int(l2)
	if d.major < 8 {
		return nil, fmt.Errorf("cuda: %s is sm_%d%d; need sm_80 or newer: %w", d.name, d.major, d.minor, ErrNoCUDA)
	}
	if err := check("pool_init", C.dsv4c_pool_init(C.int(ordinal))); err != nil {
		return nil, err
	}
	s, err := d.newStream()
	if err != nil {
		return nil, err
	}
	d.stream = s
	return d, nil
}

// Name is the device's marketing name, e.g. "NVIDIA H200".
func (d *Device) Name() string { return d.name }

// ComputeCapability returns major, minor (9, 0 for Hopper).
func (d *Device) ComputeCapability() (int, int) { return d.major, d.minor }

// SMs is the multiprocessor count.
func (d *Device) SMs() int { return d.sms }

// Memory is the device's total memory in bytes.
func (d *Device) Memory() int64 { return d.mem }

// Stream returns the device's default stream (created by Open).
func (d *Device) Stream() *Stream { return d.stream }

func (d *Device) bind() error {
	return check("set_device", C.dsv4c_set_device(C.int(d.ordinal)))
}

func (d *Device) newStream() (*Stream, error) {
	var p unsafe.Pointer
	if err := check("stream_create", C.dsv4c_stream_create(&p)); err != nil {
		return nil, err
	}
	return &Stream{dev: d, p: p}, nil
}

// NewStream creates a non-blocking stream on the device.
func (d *Device) NewStream() (*Stream, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.bind(); err != nil {
		return nil, err
	}
	return d.newStream()
}

// Close synchronizes and destroys the default stream. Buffers must be freed by their
// owners first; Close is idempotent.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	return d.stream.Close()
}

// Stream is a CUDA stream: kernels and copies issued on it run in order.
type Stream struct {
	dev *Device
	p   unsafe.Pointer
	// capturing is set between a successful BeginCapture and its EndCapture, which then
	// releases the OS-thread lock BeginCapture took (and only then).
	capturing bool
}

// Sync waits until all work issued on the stream has finished and returns its first error.
func (s *Stream) Sync() error {
	if s.p == nil {
		return ErrClosed
	}
	return check("stream_sync", C.dsv4c_stream_sync(s.p))
}

// Close waits for the stream and destroys it; idempotent.
func (s *Stream) Close() error {
	if s.p == nil {
		return nil
	}
	err := check("stream_sync", C.dsv4c_stream_sync(s.p))
	if e := check("stream_destroy", C.dsv4c_stream_destroy(s.p)); err == nil {
		err = e
	}
	s.p = nil
	return err
}

// Buffer is device memory from the device's memory pool.
type Buffer struct {
	dev  *Device
	p    unsafe.Pointer
	n    int64
	view bool
}

// Slice returns a view of n bytes at byte offset off (16-byte aligned); the view shares
// the memory, and its Free does nothing.
func (b *Buffer) Slice(off, n int64) (*Buffer, error) {
	if b == nil || b.p == nil {
		return nil, ErrClosed
	}
	if off < 0 || n <= 0 || off+n > b.n || off%16 != 0 {
		return nil, fmt.Errorf("cuda: slice [%d, %d) of %d bytes: %w", off, off+n, b.n, ErrShape)
	}
	return &Buffer{dev: b.dev, p: unsafe.Add(b.p, off), n: n, view: true}, nil
}

// Alloc takes n bytes (n > 0) from the device's stream-ordered pool (cudaMallocAsync on the
// default stream, then synchronized so the memory is usable from any stream).
func (d *Device) Alloc(n int64) (*Buffer, error) {
	if n <= 0 || n > d.mem {
		return nil, fmt.Errorf("cuda: alloc of %d bytes: %w", n, ErrShape)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.bind(); err != nil {
		return nil, err
	}
	var p unsafe.Pointer
	if err := check("malloc", C.dsv4c_malloc(&p, C.size_t(n), d.stream.p)); err != nil {
		return nil, err
	}
	if err := d.stream.Sync(); err != nil {
		return nil, err
	}
	return &Buffer{dev: d, p: p, n: n}, nil
}

// Len is the buffer's size in bytes.
func (b *Buffer) Len() int64 { return b.n }

// Free returns the buffer to the pool (stream-ordered after the default stream's work);
// idempotent.
func (b *Buffer) Free() error {
	if b == nil || b.p == nil {
		return nil
	}
	if b.view {
		b.p = nil
		return nil
	}
	err := check("free", C.dsv4c_free(b.p, b.dev.stream.p))
	b.p = nil
	return err
}

func (b *Buffer) ok(need int64) error {
	if b == nil || b.p == nil {
		return ErrClosed
	}
	if need > b.n || need < 0 {
		return fmt.Errorf("cuda: buffer of %d bytes, need %d: %w", b.n, need, ErrShape)
	}
	return nil
}

// Upload copies src to the start of the buffer (synchronous).
func (b *Buffer) Upload(src []byte) error {
	if err := b.ok(int64(len(src))); err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	return check("htod", C.dsv4c_htod(b.p, unsafe.Pointer(&src[0]), C.size_t(len(src)), b.dev.stream.p))
}

// Download copies the start of the buffer into dst (synchronous, after the default
// stream's work).
func (b *Buffer) Download(dst []byte) error {
	if err := b.ok(int64(len(dst))); err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	return check("dtoh", C.dsv4c_dtoh(unsafe.Pointer(&dst[0]), b.p, C.size_t(len(dst)), b.dev.stream.p))
}

// UploadF32 copies float32 values to the buffer.
func (b *Buffer) UploadF32(src []float32) error {
	return b.Upload(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(src))), 4*len(src)))
}

// DownloadF32 copies float32 values from the buffer.
func (b *Buffer) DownloadF32(dst []float32) error {
	return b.Download(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), 4*len(dst)))
}

// UploadI32 copies int32 values to the buffer.
func (b *Buffer) UploadI32(src []int32) error {
	return b.Upload(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(src))), 4*len(src)))
}

// DownloadI32 copies int32 values from the buffer.
func (b *Buffer) DownloadI32(dst []int32) error {
	return b.Download(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), 4*len(dst)))
}

// Weight is a packed quantized weight resident on the device (uploaded once).
type Weight struct {
	Format       Format
	N, K, NPad   int
	Alpha        float32
	data, scales *Buffer
}

// UploadWeight copies a packed weight to the device once.
func (d *Device) UploadWeight(p *Packed) (*Weight, error) {
	if p == nil || len(p.Data) == 0 || len(p.Scales) == 0 {
		return nil, fmt.Errorf("cuda: empty packed weight: %w", ErrShape)
	}
	data, err := d.Alloc(int64(len(p.Data)))
	if err != nil {
		return nil, err
	}
	sc, err := d.Alloc(int64(len(p.Scales)))
	if err != nil {
		data.Free()
		return nil, err
	}
	if err := data.Upload(p.Data); err != nil {
		data.Free()
		sc.Free()
		return nil, err
	}
	if err := sc.Upload(p.Scales); err != nil {
		data.Free()
		sc.Free()
		return nil, err
	}
	return &Weight{Format: p.Format, N: p.N, K: p.K, NPad: p.NPad, Alpha: p.Alpha, data: data, scales: sc}, nil
}

// Bytes is the device memory the weight occupies.
func (w *Weight) Bytes() int64 { return w.data.n + w.scales.n }

// Free releases the weight's device memory; idempotent.
func (w *Weight) Free() error {
	err := w.data.Free()
	if e := w.scales.Free(); err == nil {
		err = e
	}
	return err
}

// gemvPath reports the kernel family of the last decode GEMV launch (M <= 16) in this
// process: 1 the earlier kernels (csrc/qgemm.cu), 2 / 3 the streaming kernel without / with a
// cluster split of K, 4 / 5 the predecode kernel, 6 the streaming kernel on a grouped launch
// whose ids were declared ready (csrc/qgemv_stream.cu); 0 before the first.
// A test hook (the dispatch falls back between them without a signal); not synchronized with
// launches from other goroutines.
func gemvPath() int { return int(C.dsv4c_gemv_path()) }

// moePath reports the form the last Stream.MoE took (dsv4c_moe_path: 1 w1/w3 blocks stream the
// same rows of both and make their SwiGLU, 2 w2 stages it, 3 a SwiGLU launch, 4 separate w1 and
// w3 launches); a test hook.
func moePath() int { return int(C.dsv4c_moe_path()) }

// QGEMM issues y[m][N] = x[m][K] · Wᵀ on the stream (y += … when accumulate): x is bf16
// [m][K] (row stride K), y float32 [m][N] (row stride N). Decode-sized m (≤ 64) runs a
// split-K GEMV-style grid; larger m runs 64-token tiles. Asynchronous: errors of the launch
// are returned, errors of the kernel surface at the next Sync.
func (s *Stream) QGEMM(w *Weight, x, y *Buffer, m int, accumulate bool) error {
	return s.QGEMMSplit(w, x, y, m, accumulate, 0)
}

// QGEMMSplit is QGEMM with a forced split-K factor (0 = automatic; -1 forces the large-M
// pipelined kernel and -2 the wgmma kernel when m > 32), for benchmarks and tests.
func (s *Stream) QGEMMSplit(w *Weight, x, y *Buffer, m int, accumulate bool, splits int) error {
	if s.p == nil {
		return ErrClosed
	}
	if m <= 0 || m > MaxDim {
		return fmt.Errorf("cuda: qgemm m=%d: %w", m, ErrShape)
	}
	if err := x.ok(int64(m) * int64(w.K) * 2); err != nil {
		return err
	}
	if err := y.ok(int64(m) * int64(w.N) * 4); err != nil {
		return err
	}
	acc := C.int(0)
	if accumulate {
		acc = 1
	}
	return s.do("qgemm", func() C.int {
		return C.dsv4c_qgemm_cfg(C.int(w.Format), w.data.p, w.scales.p, C.int(w.N), C.int(w.NPad), C.int(w.K),
			C.float(w.Alpha), x.p, C.int(w.K), (*C.float)(y.p), C.int(w.N), C.int(m), acc, C.int(splits), s.p)
	})
}

// WeightStack is E packed weights of one shape and format stored back to back on the
// device (e.g. the routed experts of one MoE layer), for QGEMMGrouped.
type WeightStack struct {
	Format           Format
	N, K, NPad, E    int
	dataStride       int64
	scaleStride      int64
	data, scales, al *Buffer // al: float32 [E] per-expert Alpha
}

// UploadWeightStack uploads packed weights of one shape and format as a stack.
func (d *Device) UploadWeightStack(ps []*Packed) (*WeightStack, error) {
	if len(ps) == 0 || len(ps) > 1<<16 {
		return nil, fmt.Errorf("cuda: weight stack of %d: %w", len(ps), ErrShape)
	}
	p0 := ps[0]
	ds, ss := int64(len(p0.Data)), int64(len(p0.Scales))
	ss = (ss + 15) / 16 * 16
	al := make([]float32, len(ps))
	for i, p := range ps {
		if p.Format != p0.Format || p.N != p0.N || p.K != p0.K || int64(len(p.Data)) != ds || len(p.Scales) != len(p0.Scales) {
			return nil, fmt.Errorf("cuda: weight stack entry %d differs in shape or format: %w", i, ErrShape)
		}
		al[i] = p.Alpha
	}
	ws := &WeightStack{Format: p0.Format, N: p0.N, K: p0.K, NPad: p0.NPad, E: len(ps), dataStride: ds, scaleStride: ss}
	var err error
	if ws.data, err = d.Alloc(ds * int64(len(ps))); err != nil {
		return nil, err
	}
	if ws.scales, err = d.Alloc(ss * int64(len(ps))); err != nil {
		ws.Free()
		return nil, err
	}
	if ws.al, err = d.Alloc(int64(4 * len(ps))); err != nil {
		ws.Free()
		return nil, err
	}
	data := make([]byte, ds*int64(len(ps)))
	sc := make([]byte, ss*int64(len(ps)))
	for i, p := range ps {
		copy(data[int64(i)*ds:], p.Data)
		copy(sc[int64(i)*ss:], p.Scales)
	}
	if err := firstErr(ws.data.Upload(data), ws.scales.Upload(sc), ws.al.UploadF32(al)); err != nil {
		ws.Free()
		return nil, err
	}
	return ws, nil
}

// Free releases the stack's device memory; idempotent.
func (ws *WeightStack) Free() error {
	var err error
	for _, b := range []*Buffer{ws.data, ws.scales, ws.al} {
		if b != nil {
			if e := b.Free(); err == nil {
				err = e
			}
		}
	}
	return err
}

// Bytes is the device memory of one expert's weight (data plus scales).
func (ws *WeightStack) Bytes() int64 { return ws.dataStride + ws.scaleStride }

// QGEMMGrouped issues, in one launch, y[z] = x[z] · W_{ids[z]}ᵀ for z < groups: x is bf16
// [groups][m][K], y float32 [groups][m][N] (y += … when accumulate), ids an int32 device
// buffer [groups] of expert indices into the stack, read on the device so the launch can be
// captured in a graph while routing changes between replays; ids == nil means expert z.
// m ≤ 16 (decode). A group whose expert index is outside [0, E) is skipped on the device
// (CheckExpertIDs validates indices on the host): its slice of y is not computed, left as it
// was by the streaming kernel and zeroed (accumulate false) by the earlier split-K kernel
// (DSV4GO_GEMV3_GROUPED=0, or shapes the streaming kernel declines); callers must not use it.
// QGEMMGroupedOpts adds GroupedOptions.IDsReady, the faster form for a decode step's routed
// experts.
func (s *Stream) QGEMMGrouped(ws *WeightStack, ids, x, y *Buffer, m, groups int, accumulate bool) error {
	return s.QGEMMGroupedOpts(ws, ids, x, y, m, groups, GroupedOptions{Accumulate: accumulate})
}

// QGEMMGroupedOpts is QGEMMGrouped with options.
func (s *Stream) QGEMMGroupedOpts(ws *WeightStack, ids, x, y *Buffer, m, groups int, o GroupedOptions) error {
	if m <= 0 || m > 16 || groups <= 0 || groups > 65535 || (ids == nil && groups > ws.E) {
		return fmt.Errorf("cuda: grouped qgemm m=%d groups=%d: %w", m, groups, ErrShape)
	}
	xb := int64(groups) * int64(m) * int64(ws.K) * 2
	if o.SwiGLU {
		if groups < 2 || math.IsNaN(float64(o.SwiGLULimit)) {
			return fmt.Errorf("cuda: grouped qgemm with SwiGLU x, groups=%d limit=%g: %w", groups, o.SwiGLULimit, ErrShape)
		}
		xb *= 4 // float32 gate and up rows instead of bf16 x
	}
	if err := firstErr(x.ok(xb), y.ok(int64(groups)*int64(m)*int64(ws.N)*4)); err != nil {
		return err
	}
	ip, acc, err := groupedFlags(ids, groups, o.Accumulate, o.IDsReady)
	if err != nil {
		return err
	}
	if o.SwiGLU {
		return s.do("qgemm_grouped_swiglu", func() C.int {
			return C.dsv4c_qgemm_grouped_swiglu(C.int(ws.Format), ws.data.p, ws.scales.p, C.longlong(ws.dataStride), C.longlong(ws.scaleStride),
				C.int(ws.N), C.int(ws.NPad), C.int(ws.K), 1, (*C.float)(ws.al.p), (*C.int32_t)(ip), (*C.float)(x.p), (*C.float)(y.p), C.int(m), C.int(groups), C.int(ws.E), acc, C.float(o.SwiGLULimit), s.p)
		})
	}
	return s.do("qgemm_grouped", func() C.int {
		return C.dsv4c_qgemm_grouped(C.int(ws.Format), ws.data.p, ws.scales.p, C.longlong(ws.dataStride), C.longlong(ws.scaleStride),
			C.int(ws.N), C.int(ws.NPad), C.int(ws.K), 1, (*C.float)(ws.al.p), (*C.int32_t)(ip), x.p, (*C.float)(y.p), C.int(m), C.int(groups), C.int(ws.E), acc, s.p)
	})
}

// MoEWorkspace is the device scratch of Stream.MoE for up to Groups slots of up to M rows
// with intermediate size Inter: the slots' float32 gate / up rows [2][groups][m][Inter] and
// their bf16 SwiGLU [groups][m][Inter] (w2's input). One per stream: launches that may run at
// the same time must not share one.
type MoEWorkspace struct {
	M, Groups, Inter int
	gu, h            *Buffer
}

// NewMoEWorkspace allocates a MoEWorkspace of 10·groups·m·inter bytes.
func (d *Device) NewMoEWorkspace(m, groups, inter int) (*MoEWorkspace, error) {
	if m <= 0 || m > 16 || groups <= 1 || groups > 65535 || inter <= 0 || inter > 1<<20 {
		return nil, fmt.Errorf("cuda: MoE workspace m=%d groups=%d inter=%d: %w", m, groups, inter, ErrShape)
	}
	w := &MoEWorkspace{M: m, Groups: groups, Inter: inter}
	n := int64(groups) * int64(m) * int64(inter)
	var err error
	if w.gu, err = d.Alloc(8 * n); err == nil {
		w.h, err = d.Alloc(2 * n)
	}
	if err != nil {
		w.Free()
		return nil, err
	}
	return w, nil
}

// Free releases the workspace; idempotent.
func (w *MoEWorkspace) Free() error { return firstErr(w.gu.Free(), w.h.Free()) }

// MoE issues a decode step's routed experts of one MoE layer: for slot z < groups with expert
// e = ids[z] (int32 device buffer [groups], read on the device as for QGEMMGrouped; nil:
// e = z), y[z] = SwiGLU(x[z] · W1_eᵀ, x[z] · W3_eᵀ) · W2_eᵀ, the SwiGLU clamped by
// o.SwiGLULimit and rounded to bf16 (Stream.SwiGLU's math). x is bf16 [groups][m][H], y
// float32 [groups][m][H] (y += … with o.Accumulate). w13 stacks 2E matrices [I][H]: expert e's
// w1 at e and its w3 at E + e (UploadWeightStack(append(w1s, w3s...))); w2 stacks the E
// matrices [H][I] of the same format.
//
// The results are those of QGEMMGrouped on w13 with 2·groups groups (ids, then ids + E where
// ids is in [0, E) and -1 elsewhere; x repeated), Stream.SwiGLU into bf16, and QGEMMGrouped on
// w2 (TestQGEMMMoE): bit for bit in the second form below; the first (one block streams the
// same rows of w1 and w3) and the last (separate w1 and w3 launches) cut a row's float32 sums
// elsewhere, so that a bf16 rounding of the SwiGLU may differ by one ulp. The launches, in the
// first form the kernels take (BENCHMARKS.md, "CUDA (H200)", session 11, for the choice):
//   - FP4 where the rows and x fit in shared memory (V4-Flash's experts at 1, 4 and 16 tokens
//     routed top-6): w1/w3 as one launch whose blocks each stream the same rows of w1 and w3 and
//     make their SwiGLU as they finish, then w2 (two launches; 28.1 µs at one token on the H200,
//     against 29.2 with w2 staging the SwiGLU and 27.3 for the two launches without it);
//   - else w1/w3 as one launch of 2·groups groups that reads each slot's id and x once, then at
//     m < 3 w2 staging the SwiGLU (GroupedOptions.SwiGLU), from m = 3 a SwiGLU launch and w2;
//   - where the streaming kernel declines: w1, w3, SwiGLU, w2.
//
// ws must hold groups·m rows of I (ws.M·ws.Groups ≥ m·groups, ws.Inter ≥ I). groups ≥ 2; a
// slot whose id is outside [0, E) is skipped (its y left as it was by the streaming kernel).
// Errors: ErrShape for mismatched stacks, sizes or a NaN limit, ErrClosed for freed buffers,
// *Error from CUDA.
func (s *Stream) MoE(w13, w2 *WeightStack, ids, x, y *Buffer, ws *MoEWorkspace, m, groups int, o MoEOptions) error {
	if w13 == nil || w2 == nil || ws == nil || w13.Format != w2.Format || w13.E != 2*w2.E || w13.N != w2.K || w13.K != w2.N ||
		m <= 0 || m > 16 || groups < 2 || groups > 65535 || (ids == nil && groups > w2.E) ||
		m*groups > ws.M*ws.Groups || w13.N > ws.Inter || math.IsNaN(float64(o.SwiGLULimit)) {
		return fmt.Errorf("cuda: MoE m=%d groups=%d: %w", m, groups, ErrShape)
	}
	n := int64(groups) * int64(m) * int64(w13.N) // gate / up rows and SwiGLU values
	if err := firstErr(x.ok(int64(groups)*int64(m)*int64(w13.K)*2), y.ok(int64(groups)*int64(m)*int64(w2.N)*4),
		ws.gu.ok(8*n), ws.h.ok(2*n), w13.data.ok(0), w2.data.ok(0)); err != nil {
		return err
	}
	ip, acc, err := groupedFlags(ids, groups, o.Accumulate, o.IDsReady)
	if err != nil {
		return err
	}
	return s.do("moe", func() C.int {
		return C.dsv4c_moe(C.int(w13.Format), w13.data.p, w13.scales.p, C.longlong(w13.dataStride), C.longlong(w13.scaleStride), (*C.float)(w13.al.p),
			w2.data.p, w2.scales.p, C.longlong(w2.dataStride), C.longlong(w2.scaleStride), (*C.float)(w2.al.p),
			C.int(w2.N), C.int(w13.N), C.int(w13.NPad), C.int(w2.NPad), C.int(w2.E), (*C.int32_t)(ip), x.p,
			(*C.float)(ws.gu.p), ws.h.p, (*C.float)(y.p), C.int(m), C.int(groups), acc, C.float(o.SwiGLULimit), s.p)
	})
}

// groupedFlags checks ids (nil, or int32 [groups] on the device) and returns its pointer and
// the C accumulate argument of a grouped launch: 1 for y +=, or'ed with DSV4C_IDS_READY when
// the caller declared the ids ready (ignored without ids).
func groupedFlags(ids *Buffer, groups int, accumulate, ready bool) (unsafe.Pointer, C.int, error) {
	var ip unsafe.Pointer
	if ids != nil {
		if err := ids.ok(int64(groups) * 4); err != nil {
			return nil, 0, err
		}
		ip = ids.p
	}
	acc := C.int(0)
	if accumulate {
		acc = 1
	}
	if ready && ids != nil {
		acc |= C.DSV4C_IDS_READY
	}
	return ip, acc, nil
}

// MatMulF32 issues y[m][n] = x[m][k] · w[n][k]ᵀ in float32 (a simple tiled kernel; the
// reference path for unquantized weights).
func (s *Stream) MatMulF32(y, x, w *Buffer, m, n, k int) error {
	if err := shapeOK(m, n, k); err != nil {
		return err
	}
	if err := firstErr(y.ok(int64(m*n)*4), x.ok(int64(m*k)*4), w.ok(int64(n*k)*4)); err != nil {
		return err
	}
	return s.do("matmul_f32", func() C.int {
		return C.dsv4c_matmul_f32((*C.float)(y.p), (*C.float)(x.p), (*C.float)(w.p), C.int(m), C.int(n), C.int(k), s.p)
	})
}

// RMSNorm issues y = w ⊙ x / sqrt(mean(x²)+eps) per row of x [rows][n] (float32). w may be
// nil (unweighted); yBF16, if not nil, also receives the result as bf16 (the next GEMM's
// input); y may be nil when yBF16 is not.
func (s *Stream) RMSNorm(y, yBF16, x, w *Buffer, rows, n int, eps float32) error {
	if err := shapeOK(rows, n, 1); err != nil {
		return err
	}
	sz := int64(rows) * int64(n)
	if err := x.ok(sz * 4); err != nil {
		return err
	}
	var yp, bp, wp unsafe.Pointer
	if y != nil {
		if err := y.ok(sz * 4); err != nil {
			return err
		}
		yp = y.p
	}
	if yBF16 != nil {
		if err := yBF16.ok(sz * 2); err != nil {
			return err
		}
		bp = yBF16.p
	}
	if w != nil {
		if err := w.ok(int64(n) * 4); err != nil {
			return err
		}
		wp = w.p
	}
	return s.do("rmsnorm", func() C.int {
		return C.dsv4c_rmsnorm((*C.float)(yp), bp, (*C.float)(x.p), (*C.float)(wp), C.int(rows), C.int(n), C.float(eps), s.p)
	})
}

// RoPE rotates, in place, the interleaved channel pairs of x [rows][2*half] by the per-row
// angles given as cos, sin [rows][half]; sign -1 rotates backwards.
func (s *Stream) RoPE(x, cos, sin *Buffer, rows, half int, sign float32) error {
	if err := shapeOK(rows, half, 1); err != nil {
		return err
	}
	sz := int64(rows) * int64(half)
	if err := firstErr(x.ok(sz*8), cos.ok(sz*4), sin.ok(sz*4)); err != nil {
		return err
	}
	return s.do("rope", func() C.int {
		return C.dsv4c_rope((*C.float)(x.p), (*C.float)(cos.p), (*C.float)(sin.p), C.int(rows), C.int(half), C.float(sign), s.p)
	})
}

// Softmax replaces each row of x [rows][n] by its softmax.
func (s *Stream) Softmax(x *Buffer, rows, n int) error {
	if err := shapeOK(rows, n, 1); err != nil {
		return err
	}
	if err := x.ok(int64(rows) * int64(n) * 4); err != nil {
		return err
	}
	return s.do("softmax", func() C.int { return C.dsv4c_softmax((*C.float)(x.p), C.int(rows), C.int(n), s.p) })
}

// SwiGLU writes out[i] = silu(min(g[i], limit)) · clamp(u[i], −limit, limit) for n
// elements (limit ≤ 0: no clamp). out or outBF16 may be nil (not both).
func (s *Stream) SwiGLU(out, outBF16, g, u *Buffer, n int, limit float32) error {
	if n <= 0 || n > 1<<30 || (out == nil && outBF16 == nil) {
		return fmt.Errorf("cuda: swiglu n=%d: %w", n, ErrShape)
	}
	if err := firstErr(g.ok(int64(n)*4), u.ok(int64(n)*4)); err != nil {
		return err
	}
	var op, bp unsafe.Pointer
	if out != nil {
		if err := out.ok(int64(n) * 4); err != nil {
			return err
		}
		op = out.p
	}
	if outBF16 != nil {
		if err := outBF16.ok(int64(n) * 2); err != nil {
			return err
		}
		bp = outBF16.p
	}
	return s.do("swiglu", func() C.int {
		return C.dsv4c_swiglu((*C.float)(op), bp, (*C.float)(g.p), (*C.float)(u.p), C.longlong(n), C.float(limit), s.p)
	})
}

// TopK writes idx [rows][k] (int32): the indices of the k largest of each row of scores
// [rows][n], largest first, ties by ascending index, NaN last (n ≤ 4096, k ≤ 64).
func (s *Stream) TopK(idx, scores *Buffer, rows, n, k int) error {
	if rows <= 0 || n <= 0 || n > 4096 || k <= 0 || k > 64 || k > n {
		return fmt.Errorf("cuda: topk rows=%d n=%d k=%d: %w", rows, n, k, ErrShape)
	}
	if err := firstErr(idx.ok(int64(rows*k)*4), scores.ok(int64(rows*n)*4)); err != nil {
		return err
	}
	return s.do("topk", func() C.int {
		return C.dsv4c_topk((*C.int32_t)(idx.p), (*C.float)(scores.p), C.int(rows), C.int(n), C.int(k), s.p)
	})
}

// Router is the DeepSeek-V4 MoE gate on router logits [rows][n]: s = sqrt(softplus(logit)),
// the k experts with the largest s + bias (bias may be nil), weights s/(Σs + 1e-20)·scale.
// idx int32 [rows][k], weights float32 [rows][k]; n ≤ 1024, k ≤ 16.
func (s *Stream) Router(idx, weights, logits, bias *Buffer, rows, n, k int, scale float32) error {
	if rows <= 0 || n <= 0 || n > 1024 || k <= 0 || k > 16 || k > n {
		return fmt.Errorf("cuda: router rows=%d n=%d k=%d: %w", rows, n, k, ErrShape)
	}
	if err := firstErr(idx.ok(int64(rows*k)*4), weights.ok(int64(rows*k)*4), logits.ok(int64(rows*n)*4)); err != nil {
		return err
	}
	var bp unsafe.Pointer
	if bias != nil {
		if err := bias.ok(int64(n) * 4); err != nil {
			return err
		}
		bp = bias.p
	}
	return s.do("router", func() C.int {
		return C.dsv4c_router((*C.int32_t)(idx.p), (*C.float)(weights.p), (*C.float)(logits.p), (*C.float)(bp), C.int(rows), C.int(n), C.int(k), C.float(scale), s.p)
	})
}

// Embedding gathers y[m][d] = table[ids[m]] (float32 result) from a bf16 (bf16 = true) or
// float32 table [vocab][d]. Ids are validated by the caller (EmbeddingHost checks them);
// out-of-range ids give zero rows.
func (s *Stream) Embedding(y, table, ids *Buffer, bf16 bool, m, d, vocab int) error {
	if err := shapeOK(m, d, vocab); err != nil {
		return err
	}
	es := int64(4)
	if bf16 {
		es = 2
	}
	if err := firstErr(y.ok(int64(m*d)*4), table.ok(int64(vocab)*int64(d)*es), ids.ok(int64(m)*4)); err != nil {
		return err
	}
	b := C.int(0)
	if bf16 {
		b = 1
	}
	return s.do("embedding", func() C.int {
		return C.dsv4c_embedding((*C.float)(y.p), table.p, b, (*C.int32_t)(ids.p), C.int(m), C.int(d), C.int(vocab), s.p)
	})
}

// ToBF16 converts n float32 values to bf16 (round to nearest even).
func (s *Stream) ToBF16(dst, src *Buffer, n int) error {
	if n <= 0 || n > 1<<30 {
		return fmt.Errorf("cuda: tobf16 n=%d: %w", n, ErrShape)
	}
	if err := firstErr(dst.ok(int64(n)*2), src.ok(int64(n)*4)); err != nil {
		return err
	}
	return s.do("f32_to_bf16", func() C.int { return C.dsv4c_f32_to_bf16(dst.p, (*C.float)(src.p), C.longlong(n), s.p) })
}

// CopyDtoD issues an asynchronous device-to-device copy of n bytes.
func (s *Stream) CopyDtoD(dst, src *Buffer, n int64) error {
	if err := firstErr(dst.ok(n), src.ok(n)); err != nil {
		return err
	}
	return s.do("dtod", func() C.int { return C.dsv4c_dtod(dst.p, src.p, C.size_t(n), s.p) })
}

// Event marks a point in a stream, for timing and ordering.
type Event struct{ p unsafe.Pointer }

// Record records a new event on the stream.
func (s *Stream) Record() (*Event, error) {
	var p unsafe.Pointer
	if err := check("event_create", C.dsv4c_event_create(&p)); err != nil {
		return nil, err
	}
	if err := check("event_record", C.dsv4c_event_record(p, s.p)); err != nil {
		C.dsv4c_event_destroy(p)
		return nil, err
	}
	return &Event{p: p}, nil
}

// Elapsed waits for stop and returns the milliseconds between start and stop.
func Elapsed(start, stop *Event) (float32, error) {
	if err := check("event_sync", C.dsv4c_event_sync(stop.p)); err != nil {
		return 0, err
	}
	var ms C.float
	err := check("event_elapsed", C.dsv4c_event_elapsed(&ms, start.p, stop.p))
	return float32(ms), err
}

// Close destroys the event; idempotent.
func (e *Event) Close() error {
	if e.p == nil {
		return nil
	}
	err := check("event_destroy", C.dsv4c_event_destroy(e.p))
	e.p = nil
	return err
}

// Graph is an instantiated CUDA graph: a captured sequence of stream work (e.g. one decode
// step) replayed with a single launch and a single cgo crossing.
type Graph struct{ p unsafe.Pointer }

// BeginCapture starts recording the stream's work into a graph instead of running it. Until
// EndCapture, calls that synchronize (Upload, Download, Alloc, Sync) fail. The capture is
// CUDA's thread-local mode, which must end on the OS thread that began it, so BeginCapture
// locks the calling goroutine to its OS thread (runtime.LockOSThread) and EndCapture, which
// the same goroutine must call, unlocks it; without the lock a goroutine can move to another
// thread between two cgo calls and EndCapture fails with cudaErrorStreamCaptureWrongThread
// (seen in cudabench on the H200, 2026-11-30).
func (s *Stream) BeginCapture() error {
	if s == nil || s.p == nil {
		return ErrClosed
	}
	runtime.LockOSThread()
	if err := s.dev.bind(); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	if err := check("capture_begin", C.dsv4c_capture_begin(s.p)); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	s.capturing = true
	return nil
}

// EndCapture stops recording and instantiates the graph. Call it from the goroutine that
// called BeginCapture: it releases BeginCapture's OS-thread lock, also when the capture
// fails, and leaves the caller's own locks alone when no capture was begun.
func (s *Stream) EndCapture() (*Graph, error) {
	if s == nil || s.p == nil {
		return nil, ErrClosed
	}
	if s.capturing {
		s.capturing = false
		defer runtime.UnlockOSThread()
	}
	var p unsafe.Pointer
	if err := check("capture_end", C.dsv4c_capture_end(s.p, &p)); err != nil {
		return nil, err
	}
	return &Graph{p: p}, nil
}

// Launch replays the graph n times on the stream (n ≥ 1), then waits for the stream when
// sync is true — all in one cgo call.
func (g *Graph) Launch(s *Stream, n int, sync bool) error {
	if g.p == nil {
		return ErrClosed
	}
	if n < 1 {
		return fmt.Errorf("cuda: graph launch n=%d: %w", n, ErrShape)
	}
	sy := C.int(0)
	if sync {
		sy = 1
	}
	return s.do("graph_launch", func() C.int { return C.dsv4c_graph_launch(g.p, s.p, C.int(n), sy) })
}

// Close destroys the graph; idempotent.
func (g *Graph) Close() error {
	if g.p == nil {
		return nil
	}
	err := check("graph_destroy", C.dsv4c_graph_destroy(g.p))
	g.p = nil
	return err
}

// do runs one C call with the calling goroutine locked to its OS thread and that thread's
// current device set to the stream's device.
func (s *Stream) do(op string, f func() C.int) error {
	if s == nil || s.p == nil {
		return ErrClosed
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := s.dev.bind(); err != nil {
		return err
	}
	return check(op, f())
}

func shapeOK(a, b, c int) error {
	if a <= 0 || b <= 0 || c <= 0 || a > 1<<24 || b > 1<<24 || c > 1<<24 || int64(a)*int64(b) > 1<<31 {
		return fmt.Errorf("cuda: dims %d,%d,%d: %w", a, b, c, ErrShape)
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

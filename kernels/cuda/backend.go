//go:build cuda && cgo

package cuda

import (
	"sync"

	"github.com/dsv4go/dsv4go/kernels"
)

// HostBackend implements kernels.Backend on the GPU for host slices: each call uploads its
// inputs, runs the kernel on the device's default stream and downloads the result. It is
// the adapter the conformance suite uses to run every operation of the Backend interface on
// both backends; the decode hot loop uses device-resident Buffers and Graphs instead.
// kernels.Backend methods return no error: the first failure is kept and returned by Err,
// and later calls do nothing.
type HostBackend struct {
	Dev *Device
	mu  sync.Mutex
	err error
}

var _ kernels.Backend = (*HostBackend)(nil)

// Err returns the first error of any call.
func (b *HostBackend) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

func (b *HostBackend) fail(err error) bool {
	if err == nil {
		return false
	}
	if b.err == nil {
		b.err = err
	}
	return true
}

// tmp allocates one buffer per size and frees them all at the end of the call.
type tmp struct {
	b    *HostBackend
	bufs []*Buffer
}

func (t *tmp) f32(src []float32, n int) *Buffer {
	if t.b.err != nil {
		return nil
	}
	buf, err := t.b.Dev.Alloc(int64(max(n, 1)) * 4)
	if t.b.fail(err) {
		return nil
	}
	t.bufs = append(t.bufs, buf)
	if src != nil && t.b.fail(buf.UploadF32(src[:n])) {
		return nil
	}
	return buf
}

func (t *tmp) free() {
	for _, b := range t.bufs {
		b.Free()
	}
}

// MatMul implements kernels.Backend.MatMul with the float32 matmul kernel.
func (b *HostBackend) MatMul(y, x, w []float32, m, n, k int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil || m == 0 || n == 0 {
		return
	}
	t := &tmp{b: b}
	defer t.free()
	xb, wb, yb := t.f32(x, m*k), t.f32(w, n*k), t.f32(nil, m*n)
	if b.err != nil || b.fail(b.Dev.Stream().MatMulF32(yb, xb, wb, m, n, k)) {
		return
	}
	b.fail(yb.DownloadF32(y[:m*n]))
}

// RMSNorm implements kernels.Backend.RMSNorm.
func (b *HostBackend) RMSNorm(y, x, w []float32, rows, n int, eps float32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil || rows == 0 {
		return
	}
	t := &tmp{b: b}
	defer t.free()
	xb, yb := t.f32(x, rows*n), t.f32(nil, rows*n)
	var wb *Buffer
	if w != nil {
		wb = t.f32(w, n)
	}
	if b.err != nil || b.fail(b.Dev.Stream().RMSNorm(yb, nil, xb, wb, rows, n, eps)) {
		return
	}
	b.fail(yb.DownloadF32(y[:rows*n]))
}

// RoPEInterleaved implements kernels.Backend.RoPEInterleaved.
func (b *HostBackend) RoPEInterleaved(x, cos, sin []float32, rows, half int, sign float32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil || rows == 0 || half == 0 {
		return
	}
	t := &tmp{b: b}
	defer t.free()
	xb, cb, sb := t.f32(x, rows*2*half), t.f32(cos, rows*half), t.f32(sin, rows*half)
	if b.err != nil || b.fail(b.Dev.Stream().RoPE(xb, cb, sb, rows, half, sign)) {
		return
	}
	b.fail(xb.DownloadF32(x[:rows*2*half]))
}

// Softmax implements kernels.Backend.Softmax.
func (b *HostBackend) Softmax(x []float32, rows, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil || rows == 0 || n == 0 {
		return
	}
	t := &tmp{b: b}
	defer t.free()
	xb := t.f32(x, rows*n)
	if b.err != nil || b.fail(b.Dev.Stream().Softmax(xb, rows, n)) {
		return
	}
	b.fail(xb.DownloadF32(x[:rows*n]))
}

// SwiGLU implements kernels.Backend.SwiGLU.
func (b *HostBackend) SwiGLU(out, gate, up []float32, limit float32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(out)
	if b.err != nil || n == 0 {
		return
	}
	t := &tmp{b: b}
	defer t.free()
	gb, ub, ob := t.f32(gate, n), t.f32(up, n), t.f32(nil, n)
	if b.err != nil || b.fail(b.Dev.Stream().SwiGLU(ob, nil, gb, ub, n, limit)) {
		return
	}
	b.fail(ob.DownloadF32(out))
}

// TopK implements kernels.Backend.TopK for one row (len(scores) ≤ 4096, k ≤ 64).
func (b *HostBackend) TopK(idx []int32, scores []float32, k int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k = min(k, len(scores), len(idx))
	if b.err != nil || k <= 0 {
		return
	}
	t := &tmp{b: b}
	defer t.free()
	sb := t.f32(scores, len(scores))
	ib := t.f32(nil, k)
	if b.err != nil || b.fail(b.Dev.Stream().TopK(ib, sb, 1, len(scores), k)) {
		return
	}
	b.fail(ib.DownloadI32(idx[:k]))
}

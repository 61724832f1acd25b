package safetensors

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"
)

// WriteTensor is one tensor to write.
type WriteTensor struct {
	Name  string
	DType DType
	Shape []int64
	Data  []byte // little-endian, exactly the dtype's byte length for Shape
}

// WriteFile writes tensors, in the given order, to path as one safetensors
// file. It writes to a temporary file in the same directory and renames it,
// so a failed write never leaves a truncated file behind.
func WriteFile(path string, tensors []WriteTensor, metadata map[string]string) error {
	infos := make([]TensorInfo, len(tensors))
	for i, t := range tensors {
		infos[i] = TensorInfo{Name: t.Name, DType: t.DType, Shape: t.Shape}
	}
	w, err := Create(path, infos, metadata)
	if err != nil {
		return err
	}
	for _, t := range tensors {
		if err := w.Write(t.Name, t.Data); err != nil {
			w.Abort()
			return err
		}
	}
	return w.Close()
}

// Writer streams a safetensors file whose tensor list is known up front:
// Create writes the header, Write appends each tensor's bytes in header
// order, Close checks completeness and renames the temporary file into
// place. Abort discards it. Not safe for concurrent use.
type Writer struct {
	path  string
	tmp   *os.File
	w     *bufio.Writer
	infos []TensorInfo
	sizes []int64
	next  int
}

// Create starts writing path with the given tensors (data offsets are
// computed; Begin/End of infos are ignored).
func Create(path string, infos []TensorInfo, metadata map[string]string) (*Writer, error) {
	seen := make(map[string]bool, len(infos))
	sizes := make([]int64, len(infos))
	for i, t := range infos {
		if seen[t.Name] {
			return nil, &Error{Kind: ErrHeader, File: path, Tensor: t.Name, Detail: "duplicate tensor name"}
		}
		seen[t.Name] = true
		n, err := byteLen(t.DType, t.Shape)
		if err != nil {
			return nil, &Error{Kind: ErrShape, File: path, Tensor: t.Name, Detail: err.Error()}
		}
		sizes[i] = n
	}
	hdr, _, err := EncodeHeader(infos, metadata)
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return nil, err
	}
	w := &Writer{path: path, tmp: tmp, w: bufio.NewWriterSize(tmp, 1<<20), infos: infos, sizes: sizes}
	if _, err := w.w.Write(hdr); err != nil {
		w.Abort()
		return nil, err
	}
	return w, nil
}

// Write appends the next tensor's data; name must be the next in order.
// data may be a view returned by File.Data: if its file was truncated while
// mapped, Write fails with ErrTruncated instead of a fatal SIGBUS (it copies
// under Guard).
func (w *Writer) Write(name string, data []byte) error {
	if w.next >= len(w.infos) || w.infos[w.next].Name != name {
		return &Error{Kind: ErrHeader, File: w.path, Tensor: name, Detail: "written out of header order"}
	}
	if int64(len(data)) != w.sizes[w.next] {
		t := w.infos[w.next]
		return &Error{Kind: ErrShape, File: w.path, Tensor: name, Detail: fmt.Sprintf("%d data bytes for %s %v (want %d)", len(data), t.DType, t.Shape, w.sizes[w.next])}
	}
	w.next++
	err := Guard(func() error { _, err := w.w.Write(data); return err })
	if isFault(err) { // the kernel met the unbacked page (a direct write)
		file := w.path // name the mapped source file, as Guard does, when data is a view of one
		if len(data) > 0 {
			if src, ok := faulted(uintptr(unsafe.Pointer(unsafe.SliceData(data)))); ok {
				file = src
			}
		}
		err = &Error{Kind: ErrTruncated, File: file, Tensor: name, Detail: "reading the data faulted: its memory-mapped file shrank?", Err: err}
	}
	return err
}

// Close finishes the file; every tensor must have been written.
func (w *Writer) Close() error {
	if w.next != len(w.infos) {
		w.Abort()
		return &Error{Kind: ErrTruncated, File: w.path, Detail: fmt.Sprintf("%d of %d tensors written", w.next, len(w.infos))}
	}
	if err := w.w.Flush(); err != nil {
		w.Abort()
		return err
	}
	if err := w.tmp.Chmod(0o644); err != nil {
		w.Abort()
		return err
	}
	if err := w.tmp.Close(); err != nil {
		os.Remove(w.tmp.Name())
		return err
	}
	return os.Rename(w.tmp.Name(), w.path)
}

// Abort discards the partial file.
func (w *Writer) Abort() {
	w.tmp.Close()
	os.Remove(w.tmp.Name())
}

package safetensors

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sync"
)

// noMmap forces the ReadAt fallback (tests of the non-unix path).
var noMmap = false

// File is an open safetensors file. Its methods are safe for concurrent use.
type File struct {
	path   string
	header *Header
	byName map[string]int

	mu     sync.RWMutex
	f      *os.File
	mapped []byte // whole file when memory-mapped; nil in read mode
	closed bool
}

// Open opens and validates a safetensors file: the header is parsed and
// checked against the file size, and the file is memory-mapped read-only
// (falling back to lazy reads where mmap is unavailable).
func Open(path string) (*File, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	sf, err := open(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	return sf, nil
}

func open(f *os.File, path string) (*File, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, &Error{Kind: ErrHeader, File: path, Err: err}
	}
	size := st.Size()
	if size < 8 {
		return nil, &Error{Kind: ErrTruncated, File: path, Detail: fmt.Sprintf("%d bytes, shorter than the 8-byte header length", size)}
	}
	var lenb [8]byte
	if _, err := f.ReadAt(lenb[:], 0); err != nil {
		return nil, &Error{Kind: ErrTruncated, File: path, Err: err}
	}
	hlen := binary.LittleEndian.Uint64(lenb[:])
	if hlen > MaxHeaderBytes {
		return nil, &Error{Kind: ErrLimit, File: path, Detail: fmt.Sprintf("header length %d exceeds %d", hlen, MaxHeaderBytes)}
	}
	if int64(hlen) > size-8 {
		return nil, &Error{Kind: ErrTruncated, File: path, Detail: fmt.Sprintf("header length %d but file has %d bytes", hlen, size)}
	}
	hb := make([]byte, hlen)
	if _, err := f.ReadAt(hb, 8); err != nil {
		return nil, &Error{Kind: ErrTruncated, File: path, Err: err}
	}
	h, err := ParseHeader(hb, size-8-int64(hlen))
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.File = path
		}
		return nil, err
	}
	sf := &File{path: path, header: h, f: f, byName: make(map[string]int, len(h.Tensors))}
	for i, t := range h.Tensors {
		sf.byName[t.Name] = i
	}
	if !noMmap {
		if m, err := mmapFile(f, size); err == nil {
			sf.mapped = m
			addMapping(m, path)
		}
	}
	return sf, nil
}

// Path returns the file's path.
func (f *File) Path() string { return f.path }

// Header returns the parsed header (read-only).
func (f *File) Header() *Header { return f.header }

// Tensors returns the tensor descriptions in data order (read-only).
func (f *File) Tensors() []TensorInfo { return f.header.Tensors }

// Info returns the description of the named tensor.
func (f *File) Info(name string) (TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.header.Tensors[i], true
}

// Mapped reports whether the file is memory-mapped.
func (f *File) Mapped() bool { return f.mapped != nil }

// Data returns the raw bytes of the named tensor. When the file is
// memory-mapped this is a read-only view valid until Close (writing to it
// faults); otherwise the bytes are read now into a new buffer.
//
// A mapped file is checked (fstat) to still hold the tensor's bytes, else
// the error is ErrTruncated. If the file shrinks later, while the view is
// in use, reading the view past the new end raises SIGBUS, which kills the
// process unless the read runs inside Guard (then it is an ErrTruncated
// error): read views through Guard, or copy them out under it, when other
// processes may modify the checkpoint's files.
func (f *File) Data(name string) ([]byte, error) {
	i, ok := f.byName[name]
	if !ok {
		return nil, &Error{Kind: ErrNotFound, File: f.path, Tensor: name}
	}
	t := &f.header.Tensors[i]
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return nil, &Error{Kind: ErrClosed, File: f.path, Tensor: name}
	}
	off := f.header.DataOffset + t.Begin
	n := t.End - t.Begin
	if f.mapped != nil {
		if st, err := f.f.Stat(); err != nil || st.Size() < off+n {
			e := &Error{Kind: ErrTruncated, File: f.path, Tensor: name, Err: err}
			if err == nil {
				e.Detail = fmt.Sprintf("the file has %d bytes now, the tensor ends at %d", st.Size(), off+n)
			}
			return nil, e
		}
		return f.mapped[off : off+n : off+n], nil
	}
	buf := make([]byte, n)
	if _, err := f.f.ReadAt(buf, off); err != nil && !(err == io.EOF && n == 0) {
		return nil, &Error{Kind: ErrTruncated, File: f.path, Tensor: name, Err: err}
	}
	return buf, nil
}

// Close unmaps and closes the file. Slices returned by Data must not be used
// afterwards. Close is idempotent.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	var err error
	if f.mapped != nil {
		removeMapping(f.mapped)
		err = munmap(f.mapped)
		f.mapped = nil
	}
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	return err
}

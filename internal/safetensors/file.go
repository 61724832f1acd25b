package safetensors

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
)

// noMmap forces the ReadAt fallback (tests of the non-unix path).
var noMmap = false

// File is an open safetensors file. Its methods are safe for concurrent use.
type File struct {
	path   string
	header *Header
	byName map[string]int

	// size is the file's length in bytes as last checked: by Open, and
	// again (recheckSize) after a read of the mapping faulted. Data bounds
	// views by it without a system call per tensor.
	size atomic.Int64

	mu     sync.RWMutex
	f      *os.File
	mapped []byte // whole file when memory-mapped; nil in read mode
	closed bool
}

// statCalls counts fstat calls made on open Files (tests: Data makes none).
var statCalls atomic.Int64

// fileSize returns f's current length (one fstat).
func fileSize(f *os.File) (int64, error) {
	statCalls.Add(1)
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
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
	size, err := fileSize(f)
	if err != nil {
		return nil, &Error{Kind: ErrHeader, File: path, Err: err}
	}
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
	sf.size.Store(size)
	for i, t := range h.Tensors {
		sf.byName[t.Name] = i
	}
	if !noMmap {
		if m, err := mmapFile(f, size); err == nil {
			sf.mapped = m
			addMapping(m, sf)
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
// A mapped file's view is bounded by the file size as last checked (at
// Open, and again whenever a read of the file's mapping faulted under Guard
// or in Writer.Write): a tensor past that size is refused with
// ErrTruncated. Data itself makes no system call. A file that shrinks after
// Open, while the view is in use or before Data is called, leaves bytes past
// its new end unbacked: reading them raises SIGBUS, which kills the process
// unless the read runs inside Guard (then it is an ErrTruncated error, and
// the File re-checks its size so later Data calls refuse the lost tensors):
// read views through Guard, or copy them out under it, when other processes
// may modify the checkpoint's files.
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
		if size := f.size.Load(); size < off+n {
			return nil, &Error{Kind: ErrTruncated, File: f.path, Tensor: name,
				Detail: fmt.Sprintf("the file has %d bytes as last checked, the tensor ends at %d", size, off+n)}
		}
		return f.mapped[off : off+n : off+n], nil
	}
	buf := make([]byte, n)
	if _, err := f.f.ReadAt(buf, off); err != nil && !(err == io.EOF && n == 0) {
		return nil, &Error{Kind: ErrTruncated, File: f.path, Tensor: name, Err: err}
	}
	return buf, nil
}

// ReadTensorAt copies len(p) bytes of the named tensor's data, starting at
// byte off of that tensor, into p, with one ReadAt (pread) of the file even
// when it is memory-mapped: a page fault on a mapping reads a whole
// read-around window (128 KiB or more) where ReadAt's readahead for a small
// random read is a few pages, and a file that shrank gives ErrTruncated
// instead of SIGBUS. It reads only those bytes, whatever the tensor's size,
// and is safe to call concurrently with Close. Errors: ErrNotFound,
// ErrClosed, ErrTruncated; ErrOffsets when [off, off+len(p)) is not inside
// the tensor.
func (f *File) ReadTensorAt(name string, p []byte, off int64) error {
	i, ok := f.byName[name]
	if !ok {
		return &Error{Kind: ErrNotFound, File: f.path, Tensor: name}
	}
	t := &f.header.Tensors[i]
	n := t.End - t.Begin
	if off < 0 || off > n || int64(len(p)) > n-off {
		return &Error{Kind: ErrOffsets, File: f.path, Tensor: name,
			Detail: fmt.Sprintf("bytes [%d, %d+%d) are not inside the tensor's %d", off, off, len(p), n)}
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return &Error{Kind: ErrClosed, File: f.path, Tensor: name}
	}
	if _, err := f.f.ReadAt(p, f.header.DataOffset+t.Begin+off); err != nil && !(err == io.EOF && len(p) == 0) {
		return &Error{Kind: ErrTruncated, File: f.path, Tensor: name, Err: err}
	}
	return nil
}

// recheckSize re-reads the file's size (one fstat) after a read of its
// mapping faulted, so that Data refuses the tensors the file lost. A closed
// file, or a failed fstat, leaves the size as it was.
func (f *File) recheckSize() {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return
	}
	if n, err := fileSize(f.f); err == nil {
		f.size.Store(n)
	}
}

// Close unmaps and closes the file. Slices returned by Data must not be used
// afterwards. Close is idempotent.
// Closed reports whether Close was called: slices that Data returned before
// then are no longer backed by the file (reading them faults, or reads
// another mapping that took their addresses).
func (f *File) Closed() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.closed
}

// Close unmaps the file and closes it. Tensors read from it before Close
// must not be used after it (see Closed); later reads (ReadTensorAt...)
// return an error. A second Close returns nil.
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

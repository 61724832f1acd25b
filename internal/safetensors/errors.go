package safetensors

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Sentinel error classes; test with errors.Is.
var (
	ErrHeader    = errors.New("safetensors: malformed header") // bad length prefix or JSON
	ErrLimit     = errors.New("safetensors: limit exceeded")   // header, tensor count, rank, name too large
	ErrTruncated = errors.New("safetensors: truncated file")   // file shorter than header or data
	ErrOffsets   = errors.New("safetensors: bad data offsets") // out of range, overlapping, holes
	ErrDType     = errors.New("safetensors: unknown dtype")    // dtype not in the spec
	ErrShape     = errors.New("safetensors: bad shape")        // negative dims, size mismatch
	ErrNotFound  = errors.New("safetensors: tensor not found") // name not in file/index
	ErrIndex     = errors.New("safetensors: malformed index")  // bad model.safetensors.index.json
	ErrClosed    = errors.New("safetensors: file closed")      // use after Close
	// ErrNoFile: the file (a shard, the index) does not exist; the error
	// also matches fs.ErrNotExist.
	ErrNoFile = errors.New("safetensors: file not found")
	// ErrNotRegular: the path is a directory, FIFO, device or socket; it is
	// refused before it is opened, so a FIFO cannot block the reader.
	ErrNotRegular = errors.New("safetensors: not a regular file")
	// ErrOpen: the file exists but cannot be opened or stat'ed (permissions,
	// I/O error); the OS error is wrapped.
	ErrOpen = errors.New("safetensors: cannot open file")
)

// Error is the typed error of this package. Kind is one of the sentinels;
// File and Tensor say where ("" when not applicable).
type Error struct {
	Kind   error
	File   string
	Tensor string
	Detail string
	Err    error // underlying OS or JSON error, if any
}

// Error names the class, the file, the tensor and the detail.
func (e *Error) Error() string {
	s := e.Kind.Error()
	if e.File != "" {
		s += ": " + e.File
	}
	if e.Tensor != "" {
		s += fmt.Sprintf(": tensor %q", e.Tensor)
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the sentinel and the underlying cause.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

// openRegular opens path for reading after checking (following symlinks)
// that it is a regular file. A missing file gives ErrNoFile, a directory,
// FIFO, device or socket ErrNotRegular, other OS errors ErrOpen.
func openRegular(path string) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fileErr(path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, &Error{Kind: ErrNotRegular, File: path, Detail: fileKind(st.Mode())}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fileErr(path, err)
	}
	return f, nil
}

func fileErr(path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return &Error{Kind: ErrNoFile, File: path, Err: fs.ErrNotExist}
	}
	return &Error{Kind: ErrOpen, File: path, Err: err}
}

// fileKind names a non-regular file mode.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "is a directory"
	case m&fs.ModeNamedPipe != 0:
		return "is a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "is a socket"
	case m&fs.ModeDevice != 0:
		return "is a device"
	}
	return "mode " + m.String()
}

package safetensors

import (
	"errors"
	"fmt"
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

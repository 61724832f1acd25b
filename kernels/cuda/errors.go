package cuda

import (
	"errors"
	"fmt"
)

// ErrNoCUDA is returned by every device entry point of a build without the cuda tag or
// without cgo.
var ErrNoCUDA = errors.New("cuda: not available (build with -tags cuda and cgo, after `make cuda`)")

// ErrClosed is returned when a Device, Stream, Buffer or Graph is used after Close/Free.
var ErrClosed = errors.New("cuda: use after close")

// Error is a failed CUDA call: the operation, the cudaError_t code (or one of the
// DSV4C_ERR_* codes of csrc/dsv4cuda.h) with its name and description.
type Error struct {
	Op   string // our operation, e.g. "qgemm" or "malloc"
	Code int    // cudaError_t value
	Name string // e.g. "cudaErrorMemoryAllocation"
	Msg  string // CUDA's description
}

// Error formats the failure as "cuda: <op>: <name> (<code>): <description>".
func (e *Error) Error() string {
	return fmt.Sprintf("cuda: %s: %s (%d): %s", e.Op, e.Name, e.Code, e.Msg)
}

// codes of csrc/dsv4cuda.h
const (
	codeShape  = 100001
	codeFormat = 100002
)

// Is reports ErrShape for the kernels' shape error code, so errors.Is(err, ErrShape) works
// for both host-side and device-side shape checks.
func (e *Error) Is(target error) bool {
	return (target == ErrShape && (e.Code == codeShape || e.Code == codeFormat))
}

package safetensors

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"unsafe"
)

// A memory-mapped file that shrinks after it was mapped (truncated or
// rewritten in place by another process) leaves the pages past its new end
// unbacked: reading them raises SIGBUS, which by default kills a Go process
// ("unexpected fault address", fatal error: fault). Guard turns such a
// fault, when it hits a mapping of this package, into an ErrTruncated error.

// mapping is one live file mapping, [start, end) in the address space.
type mapping struct {
	start, end uintptr
	file       *File
}

var (
	mappingsMu sync.RWMutex
	mappings   []mapping
)

// addMapping records b (a whole-file mapping of f) until removeMapping.
func addMapping(b []byte, f *File) {
	if len(b) == 0 {
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	mappingsMu.Lock()
	mappings = append(mappings, mapping{start: start, end: start + uintptr(len(b)), file: f})
	mappingsMu.Unlock()
}

// removeMapping forgets b (before it is unmapped).
func removeMapping(b []byte) {
	if len(b) == 0 {
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	mappingsMu.Lock()
	defer mappingsMu.Unlock()
	for i, m := range mappings {
		if m.start == start {
			mappings = append(mappings[:i], mappings[i+1:]...)
			return
		}
	}
}

// mappedFile returns the File whose live mapping holds addr.
func mappedFile(addr uintptr) (*File, bool) {
	mappingsMu.RLock()
	defer mappingsMu.RUnlock()
	for _, m := range mappings {
		if addr >= m.start && addr < m.end {
			return m.file, true
		}
	}
	return nil, false
}

// faulted handles a fault reading addr: when addr lies in a live mapping,
// that File re-checks its size (so Data refuses what the file lost) and its
// path is returned.
func faulted(addr uintptr) (string, bool) {
	f, ok := mappedFile(addr)
	if !ok {
		return "", false
	}
	f.recheckSize() // after mappingsMu is released: Close locks f.mu, then mappingsMu
	return f.path, true
}

// Guard runs fn, which may read slices returned by File.Data, and returns its
// error. If fn faults reading a file this package has memory-mapped (the file
// was truncated after Open, so the pages past its new end raise SIGBUS, or
// its storage failed), Guard returns an *Error of kind ErrTruncated naming
// the file instead of letting the fault kill the process; whatever fn wrote
// before the fault is partial. Other panics, and faults at addresses outside
// this package's mappings, propagate unchanged.
//
// It works through runtime/debug.SetPanicOnFault, which applies to the
// calling goroutine only: goroutines that fn starts must call Guard
// themselves. The goroutine's previous SetPanicOnFault setting is restored
// on return.
func Guard(fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		// A fault under SetPanicOnFault panics with a runtime.Error that has
		// the faulting address (runtime/debug.SetPanicOnFault's doc).
		re, isRuntime := r.(runtime.Error)
		fault, hasAddr := r.(interface{ Addr() uintptr })
		if isRuntime && hasAddr {
			if path, ok := faulted(fault.Addr()); ok {
				err = &Error{Kind: ErrTruncated, File: path, Err: re,
					Detail: fmt.Sprintf("memory fault at %#x reading the mapped file: it shrank after it was opened, or its storage failed", fault.Addr())}
				return
			}
		}
		panic(r)
	}()
	return fn()
}

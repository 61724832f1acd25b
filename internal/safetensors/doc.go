// Package safetensors reads (and writes) the safetensors format of Hugging
// Face: an 8-byte little-endian header length, a JSON header mapping tensor
// names to {dtype, shape, data_offsets}, then the raw data.
//
// Files are memory-mapped read-only where the platform allows it
// (golang.org/x/sys/unix, no cgo), so opening a 160 GB checkpoint costs only
// the header parse and a tensor's bytes are paged in on first touch. Where
// mmap is unavailable (non-unix, or when it fails) tensors are read lazily
// with ReadAt into fresh buffers.
//
// The header parser enforces limits (header size, tensor count, rank, name
// length) and validates every entry: known dtype, non-negative shape, byte
// length equal to the element count times the dtype size, offsets inside the
// file, no overlaps and no holes (as the reference Rust implementation).
// All errors are *Error values wrapping one of the Err* sentinels; nothing
// panics on malformed input.
//
// A mapped file that another process truncates stays mapped at its old
// size, and reading past its new end raises SIGBUS, fatal to a Go process
// by default. Guard runs code that reads views with
// runtime/debug.SetPanicOnFault on, turning such a fault into ErrTruncated;
// views read outside Guard keep the hazard. File.Data bounds views by the
// file size as last checked (one fstat at Open, another after each fault
// Guard or Writer.Write met in the file's mapping), so it costs no system
// call per tensor and refuses, with ErrTruncated, the tensors a file is
// known to have lost.
//
// Sharded checkpoints (model.safetensors.index.json with a weight_map) are
// opened by OpenDir / OpenIndex.
package safetensors

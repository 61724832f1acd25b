//go:build !unix

package safetensors

import (
	"errors"
	"os"
)

// mmapFile is unavailable here: File falls back to lazy ReadAt.
func mmapFile(f *os.File, size int64) ([]byte, error) { return nil, errors.New("mmap unsupported") }

func munmap(b []byte) error { return nil }

// isFault: without mmap no system call reads a mapping.
func isFault(err error) bool { return false }

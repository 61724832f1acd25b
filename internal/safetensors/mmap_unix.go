//go:build unix

package safetensors

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// mmapFile maps the whole file read-only and shared. Pages are loaded on
// first access, so mapping a 160 GB checkpoint is cheap.
func mmapFile(f *os.File, size int64) ([]byte, error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, errors.New("cannot map")
	}
	return unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
}

func munmap(b []byte) error { return unix.Munmap(b) }

// isFault reports whether err is the kernel's EFAULT: a system call was
// given memory it could not read (a mapping past its file's end).
func isFault(err error) bool { return errors.Is(err, unix.EFAULT) }

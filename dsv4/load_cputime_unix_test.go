//go:build unix

package dsv4

import (
	"syscall"
	"time"
)

// processCPU returns the user+system CPU time of the process, so that
// benchmarks on a shared machine can report CPU cost next to wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

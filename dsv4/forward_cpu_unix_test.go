//go:build unix

package dsv4

import (
	"syscall"
	"time"
)

// cpuTime returns the process's user+system CPU time. Benchmarks report it per op
// ("cpu-ms/op") beside wall time, because the shared 2-core dev box is often loaded
// by other work: wall time then overstates the cost, CPU time does not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

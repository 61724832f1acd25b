//go:build unix

package kernels

import "syscall"

// cpuSeconds is the process's user+system CPU time in seconds, for the benchmarks'
// per-CPU-second metrics (the dev box is shared: wall time varies with its load).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

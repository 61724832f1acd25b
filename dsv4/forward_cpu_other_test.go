//go:build !unix

package dsv4

import "time"

// cpuTime is not measured on this platform (cpu-ms/op reads 0).
func cpuTime() time.Duration { return 0 }

//go:build !unix

package tokenizer

import "time"

// processCPU is unavailable here: CPU-time metrics are not reported.
func processCPU() time.Duration { return 0 }

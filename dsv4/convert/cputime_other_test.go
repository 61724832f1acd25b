//go:build !unix

package convert

import "time"

func processCPU() time.Duration { return 0 }

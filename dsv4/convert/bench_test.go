package convert

import (
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkQuantize measures the quantizers on a 512x2048 float32 weight
// (throughput counted in float32 input bytes).
func BenchmarkQuantize(b *testing.B) {
	const R, C = 512, 2048
	w := make([]float32, R*C)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 0.02)
	}
	b.Run("fp8-block", func(b *testing.B) {
		b.SetBytes(4 * R * C)
		cpu0 := processCPU()
		for b.Loop() {
			QuantizeFP8Block(w, R, C)
		}
		reportCPU(b, cpu0, 4*R*C)
	})
	b.Run("mxfp4", func(b *testing.B) {
		b.SetBytes(4 * R * C)
		cpu0 := processCPU()
		for b.Loop() {
			QuantizeMXFP4(w, R, C)
		}
		reportCPU(b, cpu0, 4*R*C)
	})
	b.Run("nvfp4", func(b *testing.B) {
		b.SetBytes(4 * R * C)
		cpu0 := processCPU()
		for b.Loop() {
			QuantizeNVFP4(w, R, C)
		}
		reportCPU(b, cpu0, 4*R*C)
	})
}

// reportCPU adds throughput per CPU-second (the dev box is shared, so wall
// time overstates the cost).
func reportCPU(b *testing.B, cpu0 time.Duration, bytesPerOp int) {
	if cpu := processCPU() - cpu0; cpu > 0 {
		b.ReportMetric(float64(bytesPerOp)*float64(b.N)/cpu.Seconds()/1e9, "cpu-GB/s")
	}
}

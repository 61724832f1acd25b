package dsv4

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// goldenTol is the bound on |Go float32 logits - float64 oracle logits|: float32
// rounding through a few tiny layers stays around 1e-6..1e-5 (measured values are
// logged); the acceptance bound is 1e-4.
const goldenTol = 1e-4

var goldenConfigs = []string{"mixed-hc4-yarn", "hc1-rope", "hc2-yarn", "csa-hc4", "quant-src"}

func maxDiff(t *testing.T, got [][]float32, want [][]float64) float64 {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	var m float64
	for i := range got {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("row %d: %d logits, want %d", i, len(got[i]), len(want[i]))
		}
		for j := range got[i] {
			d := math.Abs(float64(got[i][j]) - want[i][j])
			if !(d <= m) {
				m = d
			}
		}
	}
	return m
}

func runNet(t *testing.T, n *network, ids []int32, chunks []int) [][]float32 {
	t.Helper()
	st := n.newState()
	var out [][]float32
	pos := 0
	for _, c := range chunks {
		lg, err := n.forward(context.Background(), []segment{{st: &st, ids: ids[pos : pos+c]}}, true)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, lg...)
		pos += c
	}
	return out
}

func TestForwardGoldenNet(t *testing.T) {
	for _, name := range goldenConfigs {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", "forward", name)
			if _, err := os.Stat(dir); err != nil {
				t.Skip(err)
			}
			g := readGolden(t, dir)
			n := testNet(t, dir)
			L := len(g.Tokens)
			full := runNet(t, n, g.Tokens, []int{L})
			check := func(mode string, got [][]float32, want [][]float64) {
				d := maxDiff(t, got, want)
				t.Logf("%s: max |Δ| = %.3g", mode, d)
				if d > goldenTol {
					t.Errorf("%s: max |Δ| = %g > %g", mode, d, goldenTol)
				}
			}
			check("full", full, g.Full)
			inc := []int{g.Prefill}
			for i := g.Prefill; i < L; i++ {
				inc = append(inc, 1)
			}
			incl := runNet(t, n, g.Tokens, inc)[g.Prefill-1:]
			check("incremental", incl, g.Incremental)
			ch := runNet(t, n, g.Tokens, g.Chunks)
			check("chunked", ch, g.Chunked)
		})
	}
}

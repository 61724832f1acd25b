package dsv4

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// goldenFile is the JSON written by tools/gen_forward_goldens.py.
type goldenFile struct {
	Name                    string      `json:"name"`
	Tokens                  []int32     `json:"tokens"`
	Prefill                 int         `json:"prefill"`
	Chunks                  []int       `json:"chunks"`
	Full                    [][]float64 `json:"full"`
	Incremental             [][]float64 `json:"incremental"`
	Chunked                 [][]float64 `json:"chunked"`
	GreedyPrompt            []int32     `json:"greedy_prompt"`
	Greedy                  []int32     `json:"greedy"`
	IndexTies               int         `json:"index_ties"`
	OracleIncrementalVsFull float64     `json:"oracle_incremental_vs_full"`
	OracleChunkedVsFull     float64     `json:"oracle_chunked_vs_full"`
}

func readGolden(t testing.TB, dir string) *goldenFile {
	t.Helper()
	var g goldenFile
	readGzJSON(t, filepath.Join(dir, "golden.json.gz"), &g)
	return &g
}

// readGzJSON decodes the gzip-compressed JSON file path into v.
func readGzJSON(t testing.TB, path string, v any) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(zr).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// testNet loads a golden directory and returns its network.
func testNet(t testing.TB, dir string) *network {
	t.Helper()
	m, err := Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m.net
}

package dsv4

import (
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
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
	f, err := os.Open(filepath.Join(dir, "golden.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var g goldenFile
	if err := json.NewDecoder(zr).Decode(&g); err != nil {
		t.Fatal(err)
	}
	return &g
}

// stSource is a minimal test-only reader of a float32/int64 HF-named safetensors file,
// mapping names to the canonical ones the model builder asks for (no "model." prefix,
// merged experts split per expert). It stands in for Load in the math tests.
type stSource struct {
	data map[string][]byte
	dt   map[string]string
	sh   map[string][]int
}

func openST(t testing.TB, path string) *stSource {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	hl := binary.LittleEndian.Uint64(b[:8])
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+hl], &hdr); err != nil {
		t.Fatal(err)
	}
	s := &stSource{data: map[string][]byte{}, dt: map[string]string{}, sh: map[string][]int{}}
	body := b[8+hl:]
	for k, v := range hdr {
		if k == "__metadata__" {
			continue
		}
		var e struct {
			Dtype   string `json:"dtype"`
			Shape   []int  `json:"shape"`
			Offsets [2]int `json:"data_offsets"`
		}
		if err := json.Unmarshal(v, &e); err != nil {
			t.Fatal(err)
		}
		k = strings.TrimPrefix(k, "model.")
		s.data[k], s.dt[k], s.sh[k] = body[e.Offsets[0]:e.Offsets[1]], e.Dtype, e.Shape
	}
	return s
}

var expertRE = regexp.MustCompile(`^(layers\.\d+\.mlp\.experts\.)(\d+)\.(gate|up|down)_proj\.weight$`)

func (s *stSource) float32s(name string, shape ...int) ([]float32, error) {
	src, off, n := name, 0, 1
	for _, d := range shape {
		n *= d
	}
	if m := expertRE.FindStringSubmatch(name); m != nil {
		e, _ := strconv.Atoi(m[2])
		switch m[3] {
		case "gate":
			src, off = m[1]+"gate_up_proj", e*2*n
		case "up":
			src, off = m[1]+"gate_up_proj", e*2*n+n
		case "down":
			src, off = m[1]+"down_proj", e*n
		}
	} else if sh, ok := s.sh[name]; ok {
		m := 1
		for _, d := range sh {
			m *= d
		}
		if m != n {
			return nil, fmt.Errorf("%s: shape %v, want %v", name, sh, shape)
		}
	}
	b, ok := s.data[src]
	if !ok {
		return nil, fmt.Errorf("%s: missing", name)
	}
	if s.dt[src] != "F32" {
		return nil, fmt.Errorf("%s: dtype %s", name, s.dt[src])
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*(off+i):]))
	}
	return out, nil
}

func (s *stSource) int32s(name string, shape ...int) ([]int32, error) {
	b, ok := s.data[name]
	if !ok || s.dt[name] != "I64" {
		return nil, fmt.Errorf("%s: missing or not I64", name)
	}
	out := make([]int32, len(b)/8)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out, nil
}

// testNet builds the network of a golden directory through stSource.
func testNet(t testing.TB, dir string) *network {
	t.Helper()
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := build(cfg, openST(t, filepath.Join(dir, "model.safetensors")))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

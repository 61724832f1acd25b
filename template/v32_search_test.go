package template

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readTestFile reads a testdata file, gunzipping it when its name ends in
// ".gz".
func readTestFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(path, ".gz") {
		return data
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return out
}

// TestOfficialV32SearchVectors renders the remaining vectors of DeepSeek's
// encoding_dsv32 test folder (two search-agent conversations with developer
// turns, 63 tool results, and the Chinese variant of the base vector; see
// testdata/official/v32search/README.md) the way test_encoding_dsv32.py
// does: thinking mode, drop_thinking, default BOS, golden compared after
// str.strip().
func TestOfficialV32SearchVectors(t *testing.T) {
	dir := filepath.Join("testdata", "official", "v32search")
	for _, tc := range []struct{ name, in, out string }{
		{"search_w_date", "test_input_search_w_date.json.gz", "test_output_search_w_date.golden.gz"},
		{"search_wo_date", "test_input_search_wo_date.json.gz", "test_output_search_wo_date.golden.gz"},
		{"zh", "test_input_zh.json", "test_output_zh.golden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs := loadVector(t, filepath.Join(dir, tc.in))
			want := strings.TrimSpace(string(readTestFile(t, filepath.Join(dir, tc.out))))
			got, err := EncodeV32(msgs, &Options{Thinking: true})
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("mismatch (got %d bytes, want %d)\n%s", len(got), len(want), firstDiff(got, want))
			}
		})
	}
}

package main

import (
	"testing"

	"github.com/dsv4go/dsv4go/tokenizer"
)

// TestMockTokenizerOutsideTree: --mock's tokenizer comes from the embedded
// models package, so it loads from a directory outside the source tree
// (BREAKER F26).
func TestMockTokenizerOutsideTree(t *testing.T) {
	t.Chdir(t.TempDir())
	tok, err := mockTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	if n := tok.VocabSize(); n != 129280 {
		t.Fatalf("VocabSize = %d, want 129280 (DeepSeek-V4)", n)
	}
	if ids := tok.Encode("Hello", tokenizer.EncodeOptions{}); len(ids) == 0 {
		t.Fatal("Encode gave no ids")
	}
}

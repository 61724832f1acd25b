package tokenizer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRegexTimeout: a Split pattern with catastrophic backtracking stops after
// RegexMatchTimeout with ErrRegexTimeout (EncodeErr, EncodeBatch) instead of
// spinning for minutes, and Encode still returns (BREAKER F24).
func TestRegexTimeout(t *testing.T) {
	js := `{"pre_tokenizer":{"type":"Sequence","pretokenizers":[` +
		`{"type":"Split","pattern":{"Regex":"(a+)+$"},"behavior":"Isolated","invert":false},` +
		`{"type":"ByteLevel","add_prefix_space":false,"use_regex":false}]},` +
		`"model":{"type":"BPE","vocab":` + byteVocabJSON() + `,"merges":[]},"decoder":{"type":"ByteLevel"}}`
	tok, err := Parse([]byte(js), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Sane input: no timeout.
	if ids, err := tok.EncodeErr("aaab", EncodeOptions{}); err != nil || len(ids) != 4 {
		t.Fatalf("EncodeErr(aaab) = %v, %v", ids, err)
	}
	bad := strings.Repeat("a", 40) + "b"
	for _, tc := range []struct {
		name string
		run  func() error
	}{
		{"EncodeErr", func() error { _, err := tok.EncodeErr(bad, EncodeOptions{}); return err }},
		{"EncodeBatch", func() error {
			_, err := tok.EncodeBatch(context.Background(), []string{"a", bad}, EncodeOptions{})
			return err
		}},
		{"Encode", func() error {
			if ids := tok.Encode(bad, EncodeOptions{}); len(ids) != len(bad) {
				t.Errorf("Encode after timeout: %d ids, want %d (one per byte)", len(ids), len(bad))
			}
			return ErrRegexTimeout
		}},
	} {
		t0 := time.Now()
		err := tc.run()
		if d := time.Since(t0); d > 4*RegexMatchTimeout {
			t.Errorf("%s took %v (limit %v)", tc.name, d, RegexMatchTimeout)
		}
		if !errors.Is(err, ErrRegexTimeout) {
			t.Errorf("%s: err = %v, want ErrRegexTimeout", tc.name, err)
		}
		if err != nil && strings.Contains(err.Error(), bad) {
			t.Errorf("%s: error quotes the input: %v", tc.name, err)
		}
	}
}

// byteVocabJSON is the vocabulary {ByteLevel(byte b): b} of the 256 bytes.
func byteVocabJSON() string {
	var sb strings.Builder
	sb.WriteString("{")
	for b := 0; b < 256; b++ {
		if b > 0 {
			sb.WriteString(",")
		}
		k, _ := json.Marshal(byteLevelEncode(string([]byte{byte(b)})))
		fmt.Fprintf(&sb, "%s:%d", k, b)
	}
	sb.WriteString("}")
	return sb.String()
}

package tokenizer

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseVocabEqualsEncodingJSON holds the fast vocab/merges scanner equal to
// encoding/json on escapes, surrogates and white space, and checks it fails cleanly.
func TestParseVocabEqualsEncodingJSON(t *testing.T) {
	good := []string{
		`{}`,
		` { "a" : 0 , "b":1 }`,
		`{"\u0120the": 270, "\"q\"": 3, "\\": 4, "\/": 5, "\b\f\n\r\t": 6, "\u00e9\u4e2d": 7}`,
		`{"\ud83d\ude00": 8, "\ud83d": 9, "\ude00x": 10, "\ud83d\u0041": 11, "é中😀": 12, "n": -1}`,
	}
	for _, g := range good {
		var want map[string]int32
		if err := json.Unmarshal([]byte(g), &want); err != nil {
			t.Fatal(err)
		}
		got, err := parseVocab([]byte(g))
		if err != nil {
			t.Fatalf("parseVocab(%s): %v", g, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("parseVocab(%s) (-json +ours):\n%s", g, diff)
		}
	}
	for _, bad := range []string{``, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1 "b":2}`, `{"a":99999999999}`, `{"\x":1}`, `{"\u12":1}`, "{\"\xff\":1}", `[]`} {
		if _, err := parseVocab([]byte(bad)); err == nil {
			t.Errorf("parseVocab(%q): no error", bad)
		}
	}
	m, err := parseMerges([]byte(`["a b", ["c d", "e"], "\u0120 t"]`))
	if err != nil || !cmp.Equal(m, [][2]string{{"a", "b"}, {"c d", "e"}, {"Ġ", "t"}}) {
		t.Errorf("parseMerges = %v, %v", m, err)
	}
	for _, bad := range []string{`["ab"]`, `["a b c"]`, `[["a"]]`, `[1]`, `["a b"`, `{}`} {
		if _, err := parseMerges([]byte(bad)); err == nil {
			t.Errorf("parseMerges(%q): no error", bad)
		}
	}
}

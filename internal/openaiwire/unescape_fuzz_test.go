package openaiwire

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// checkUnescape marshals s (as a string, a map key and inside an array)
// with Marshal and checks the bytes decode to the same value as
// json.Marshal's and hold no \u003c, \u003e or \u0026 escape.
func checkUnescape(t *testing.T, s string) {
	t.Helper()
	v := map[string]any{s: []any{s, json.RawMessage(`"<\u003c&\u0026"`)}, "k": s}
	std, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if err := json.Unmarshal(std, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &b); err != nil {
		t.Fatalf("%q: Marshal gave invalid JSON %s: %v", s, got, err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("%q: %s decodes to %#v, json.Marshal's %s to %#v", s, got, b, std, a)
	}
	// An escape left is one whose backslash is itself escaped (text).
	plain := strings.ReplaceAll(string(got), `\\`, "")
	for _, esc := range []string{`\u003c`, `\u003e`, `\u0026`} {
		if strings.Contains(plain, esc) {
			t.Fatalf("%q: %s keeps %s", s, got, esc)
		}
	}
}

// TestUnescapeHTMLRandom: random strings over an alphabet of backslashes,
// quotes, "u003c"-like text, '<' '>' '&', U+2028, invalid UTF-8 and
// control bytes, in random order: Marshal's output always decodes to
// json.Marshal's value and keeps no HTML escape.
func TestUnescapeHTMLRandom(t *testing.T) {
	parts := []string{`\`, `\\`, `"`, "u", "00", "3c", "3e", "26", "u003c", `\u003c`, `\\u0026`, "<", ">", "&",
		"\u2028", "\u2029", "\xff", "\xe2\x80", "\x00", "\x1f", "é", "🙂", "a", " "}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 3000; i++ {
		var b strings.Builder
		for n := rng.IntN(12); n >= 0; n-- {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		checkUnescape(t, b.String())
	}
}

// FuzzUnescapeHTML is TestUnescapeHTMLRandom's property on fuzzed strings
// (go test -fuzz FuzzUnescapeHTML ./internal/openaiwire).
func FuzzUnescapeHTML(f *testing.F) {
	for _, s := range []string{`\u003c`, `\\u003c`, "<\xff>", "\u2028&", `\\\u0026`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkUnescape(t, s) })
}

package jsongrammar

import (
	"encoding/json"
	"fmt"
	mbits "math/bits"
	"strings"
	"testing"
	"time"

	"github.com/dsv4go/dsv4go/tokenizer"
)

func loadVocab(tb testing.TB) *Vocab {
	tb.Helper()
	tok, err := tokenizer.Load("../../tokenizer/testdata/deepseek-v4")
	if err != nil {
		tb.Fatal(err)
	}
	added := map[int32]bool{}
	for _, a := range tok.AddedTokens() {
		added[a.ID] = true
	}
	toks := make([][]byte, tok.VocabSize())
	for id := range toks {
		if b, ok := tok.TokenBytes(int32(id)); ok && !added[int32(id)] {
			toks[id] = b
		}
	}
	return NewVocab(toks)
}

// TestAllowedEqualsBruteForce checks the trie walk (and its plain-string
// shortcut) against feeding every token on its own, at every prefix of
// sample outputs, on DeepSeek-V4's vocabulary.
func TestAllowedEqualsBruteForce(t *testing.T) {
	v := loadVocab(t)
	toks := make([][]byte, v.size)
	// Recover the token bytes from the trie of all tokens.
	var rec func(ni int32, prefix []byte)
	rec = func(ni int32, prefix []byte) {
		n := v.all.nodes[ni]
		for _, id := range v.all.ids[n.tok : n.tok+n.nTok] {
			toks[id] = append([]byte(nil), prefix...)
		}
		for c := n.child; c < n.child+n.nChild; c++ {
			rec(c, append(prefix, v.all.label[c]))
		}
	}
	rec(0, nil)
	schema := `{"type":"object","properties":{"name":{"type":"string","maxLength":5},"tags":{"type":"array","items":{"enum":["a","bb"]}},"k":{"type":"integer","minimum":-20,"maximum":350},"n":{"type":"number"},"r":{"type":"number","minimum":-2.5,"exclusiveMaximum":10.25}},"required":["name"]}`
	g, err := Compile([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	// Several live alternatives: strings of different lengths (the plain
	// shortcut takes the most room), objects with overlapping keys.
	alts, err := Compile([]byte(`{"type":"array","items":{"anyOf":[{"type":"string","maxLength":2},{"type":"string","minLength":4,"maxLength":6},{"enum":["abcdefghij"]},{"type":"object","properties":{"na":{"type":"integer"}},"required":["na"]},{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	// Pattern and format strings: the walk of every token, no plain
	// shortcut; escapes decoded before the pattern sees them.
	pat, err := Compile([]byte(`{"type":"object","properties":{"id":{"type":"string","pattern":"^[A-Z]{2}-\\d{3,5}[\"é\\n]?$"},"when":{"type":"string","format":"date"},"any":{"type":"string","pattern":"(?s).{0,3}"},"n":{"type":"string","pattern":"[^\\n]*"}},"required":["id","when"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		g   *Grammar
		out string
	}{
		{pat, `{"id":"\u0041B-1234\"","when":"2024-02-2\u0039","any":"\ud83d\ude00\n","n":"a\"é"}`},
		{alts, `["a","bcde",{"na":1}]`},
		{JSONObject(), `{"key": "vä\u00e9lue 😀", "n": [1, -2.5e3, true, null, {}]}`},
		{g, `{"name": "héllo", "tags": ["bb", "a"], "k": 342, "n": 12.5}`},
		{g, `{"name": "", "k": -17}`},
		{g, `{"name": "", "r": -2.5}`},
		{g, `{"name": "", "n": 1, "r": 10.249999}`},
	} {
		st := c.g.Start()
		got := make([]uint64, v.Words())
		for i := 0; i <= len(c.out); i++ {
			v.Allowed(st, got)
			for id, b := range toks {
				want := false
				if len(b) > 0 {
					s := st.Clone()
					want = s.FeedBytes(b)
				}
				if has := got[id/64]&(1<<(id%64)) != 0; has != want {
					t.Fatalf("%q after %q: token %d %q allowed %v, want %v", c.out, c.out[:i], id, b, has, want)
				}
			}
			if i < len(c.out) && !st.Feed(c.out[i]) {
				t.Fatalf("%q rejected at %d", c.out, i)
			}
		}
		if !st.Accepting() {
			t.Fatalf("%q not accepted", c.out)
		}
	}
}

// BenchmarkMask measures one uncached mask (Vocab.Allowed) on DeepSeek-V4's
// 129,280-id vocabulary in typical states of a JSON output.
func BenchmarkMask(b *testing.B) {
	v := loadVocab(b)
	g, err := Compile([]byte(`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string","maxLength":8}}},"required":["name","age","tags"]}`))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, prefix string }{
		{"object_start", `{`},
		{"key", `{"na`},
		{"string_body", `{"name": "Al`},
		{"number", `{"name": "Al", "age": 4`},
		{"bounded_string", `{"name": "Al", "age": 4, "tags": ["ab`},
		{"after_value", `{"name": "Al", "age": 4, "tags": ["ab"`},
	} {
		st := g.Start()
		if !st.FeedBytes([]byte(c.prefix)) {
			b.Fatalf("%q rejected", c.prefix)
		}
		dst := make([]uint64, v.Words())
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				v.Allowed(st, dst)
			}
		})
	}
	// tool_choice "required" over 8 tools (vLLM's array of {name,
	// parameters} alternatives): 8 live threads after the item's '{'
	// until the name tells them apart.
	var tools strings.Builder
	tools.WriteString(`{"type":"array","minItems":1,"items":{"anyOf":[`)
	for i := range 8 {
		if i > 0 {
			tools.WriteByte(',')
		}
		fmt.Fprintf(&tools, `{"properties":{"name":{"type":"string","enum":["get_weather_%d"]},"parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}},"required":["name","parameters"]}`, i)
	}
	tools.WriteString(`]}}`)
	tg, err := Compile([]byte(tools.String()))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, prefix string }{
		{"anyof8_item_start", `[{`},
		{"anyof8_name", `[{"name": "get_wea`},
		{"anyof8_arguments", `[{"name": "get_weather_3", "parameters": {"city": "Os`},
	} {
		st := tg.Start()
		if !st.FeedBytes([]byte(c.prefix)) {
			b.Fatalf("%q rejected", c.prefix)
		}
		dst := make([]uint64, v.Words())
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				v.Allowed(st, dst)
			}
		})
	}
	pg, err := Compile([]byte(`{"type":"object","properties":{"id":{"type":"string","pattern":"[A-Z]{2}-\\d{3,5}"},"when":{"type":"string","format":"date-time"},"note":{"type":"string","pattern":"[^\\n]*"},"short":{"type":"string","pattern":".{0,40}"}},"required":["id","when","note","short"]}`))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, prefix string }{
		{"pattern_start", `{"id": "`},
		{"pattern_digits", `{"id": "AB-12`},
		{"format_date_time", `{"id": "AB-123", "when": "2024-01-0`},
		{"pattern_free_text", `{"id": "AB-123", "when": "2024-01-01T00:00:00Z", "note": "Hel`},
		{"pattern_bounded_text", `{"id": "AB-123", "when": "2024-01-01T00:00:00Z", "note": "", "short": "Hel`},
	} {
		st := pg.Start()
		if !st.FeedBytes([]byte(c.prefix)) {
			b.Fatalf("%q rejected", c.prefix)
		}
		dst := make([]uint64, v.Words())
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				v.Allowed(st, dst)
			}
		})
	}
	b.Run("cached_string_body", func(b *testing.B) {
		m := NewMasker(v)
		st := g.Start()
		st.FeedBytes([]byte(`{"name": "Al`))
		var key []byte
		for b.Loop() {
			_, key = m.Allowed(st, key)
		}
	})
}

// TestMaskWorkBound walks an anyOf of 128 pattern strings that all stay
// live (5-6 s per uncached mask before MaxMaskWork): each mask stays well
// under a second, offers only tokens the state accepts and is never empty
// before the end; the string, once closed, is valid JSON.
func TestMaskWorkBound(t *testing.T) {
	v := loadVocab(t)
	toks := make([][]byte, v.size)
	var rec func(ni int32, prefix []byte)
	rec = func(ni int32, prefix []byte) {
		n := v.all.nodes[ni]
		for _, id := range v.all.ids[n.tok : n.tok+n.nTok] {
			toks[id] = append([]byte(nil), prefix...)
		}
		for c := n.child; c < n.child+n.nChild; c++ {
			rec(c, append(prefix, v.all.label[c]))
		}
	}
	rec(0, nil)
	var alts []string
	for i := range 128 {
		alts = append(alts, fmt.Sprintf(`{"type":"string","pattern":"[^%c]{0,%d}"}`, 'a'+i%26, 40+i))
	}
	g, err := Compile([]byte(`{"anyOf":[` + strings.Join(alts, ",") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	st := g.Start()
	st.FeedBytes([]byte(`"`))
	out := []byte(`"`)
	bits := make([]uint64, v.Words())
	for step := range 6 {
		start := time.Now()
		v.Allowed(st, bits)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("step %d: mask took %v", step, d)
		}
		var ids []int
		for i, w := range bits {
			for ; w != 0; w &= w - 1 {
				ids = append(ids, i*64+mbits.TrailingZeros64(w))
			}
		}
		if len(ids) == 0 {
			t.Fatalf("no token allowed after %q", out)
		}
		for _, id := range ids[:min(len(ids), 300)] {
			if !st.Clone().FeedBytes(toks[id]) {
				t.Fatalf("token %q allowed after %q, refused", toks[id], out)
			}
		}
		// Prefer a short token, so that the string stays open.
		id := ids[(step*7919)%len(ids)]
		if step == 5 {
			id = -1
			for _, x := range ids {
				if string(toks[x]) == `"` {
					id = x
				}
			}
			if id < 0 {
				t.Fatalf("no closing quote offered after %q", out)
			}
		}
		st.FeedBytes(toks[id])
		out = append(out, toks[id]...)
	}
	var s string
	if !st.Accepting() || json.Unmarshal(out, &s) != nil {
		t.Fatalf("%q: accepting %v, not a JSON string", out, st.Accepting())
	}
}

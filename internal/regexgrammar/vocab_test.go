package regexgrammar

import (
	bits64 "math/bits"
	"math/rand/v2"
	"regexp"
	"testing"
	"time"

	"github.com/dsv4go/dsv4go/tokenizer"
)

// v4Tokens returns DeepSeek-V4's token bytes (nil for added tokens).
func v4Tokens(tb testing.TB) [][]byte {
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
	return toks
}

// TestAllowedEqualsBruteForce checks the trie walk against feeding every
// token on its own, at every prefix of sample outputs, on DeepSeek-V4's
// vocabulary (tokens with partial UTF-8 included), and the Masker's cache
// against the walk.
func TestAllowedEqualsBruteForce(t *testing.T) {
	toks := v4Tokens(t)
	v := NewVocab(toks)
	choice, err := Choice([]string{"positive", "negative", "neutral", "très bien 😀"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		pattern string
		g       *Grammar
		out     string
	}{
		{`\d{3}-[a-zé]+( 😀)?`, nil, "123-abé 😀"},
		{`(?i)(hello|bye) world`, nil, "HeLLo world"},
		{"choice", choice, "très bien 😀"},
		{"choice", choice, "neutral"},
	} {
		g := c.g
		if g == nil {
			if g, err = Compile(c.pattern); err != nil {
				t.Fatal(err)
			}
		}
		m := NewMasker(v)
		st := g.Start()
		got := make([]uint64, v.Words())
		for i := 0; i <= len(c.out); i++ {
			v.Allowed(st, got)
			cached := m.Allowed(st)
			for id, b := range toks {
				want := len(b) > 0 && st.Clone().FeedBytes(b)
				if has := got[id/64]&(1<<(id%64)) != 0; has != want {
					t.Fatalf("%q after %q: token %d %q allowed %v, want %v", c.pattern, c.out[:i], id, b, has, want)
				}
				if has := cached[id/64]&(1<<(id%64)) != 0; has != want {
					t.Fatalf("%q after %q: masker token %d differs", c.pattern, c.out[:i], id)
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

// TestMaskCost reports (and bounds, loosely) the cost of an uncached mask
// of a broad pattern over DeepSeek-V4's vocabulary.
func TestMaskCost(t *testing.T) {
	v := NewVocab(v4Tokens(t))
	g, err := Compile(`[^\n]*`)
	if err != nil {
		t.Fatal(err)
	}
	bits := make([]uint64, v.Words())
	start := time.Now()
	v.Allowed(g.Start(), bits)
	first := time.Since(start)
	start = time.Now()
	v.Allowed(g.Start(), bits)
	second := time.Since(start)
	n := 0
	for _, w := range bits {
		for ; w != 0; w &= w - 1 {
			n++
		}
	}
	t.Logf("[^\\n]*: %d tokens allowed; first mask %v (DFA built), then %v", n, first, second)
	if second > 2*time.Second {
		t.Errorf("mask took %v", second)
	}
}

// TestConcurrent feeds and masks one Grammar from many goroutines at once,
// past its DFA cache limit (run with -race): every result equals a
// single-threaded one.
func TestConcurrent(t *testing.T) {
	var toks [][]byte
	for _, s := range []string{"a", "b", "ab", "ba", "aab", "bbb", "é", "\xc3", "\xa9", "x"} {
		toks = append(toks, []byte(s))
	}
	v := NewVocab(toks)
	p := `(a|b|é)*a(a|b|é){9}`
	inputs := []string{"ab", "aaaaaaaaaaaa", "ébabababababab", "bbbbbbbbbbbbbbbbbbbbbbbbbba", "aé"}
	ref, err := Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]uint64{}
	for _, in := range inputs {
		st := ref.Start()
		st.FeedBytes([]byte(in))
		bits := make([]uint64, v.Words())
		v.Allowed(st, bits)
		want[in] = bits
	}
	g, err := Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMasker(v)
	done := make(chan string)
	for w := range 8 {
		go func() {
			for i := range 300 {
				in := inputs[(w+i)%len(inputs)]
				st := g.Start()
				// A long random-ish prefix first, to fill the cache.
				for j := range 20 {
					st.Feed("abé"[(w*7+i*3+j)%3])
				}
				st = g.Start()
				st.FeedBytes([]byte(in))
				got := m.Allowed(st)
				for k := range got {
					if got[k] != want[in][k] {
						done <- in
						return
					}
				}
			}
			done <- ""
		}()
	}
	for range 8 {
		if in := <-done; in != "" {
			t.Errorf("mask of %q differs", in)
		}
	}
}

// BenchmarkMask times an uncached mask (the trie walk, DFA transitions
// cached) over DeepSeek-V4's vocabulary at the start of a few patterns.
func BenchmarkMask(b *testing.B) {
	v := NewVocab(v4Tokens(b))
	choice, err := Choice([]string{"positive", "negative", "neutral"})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		g    *Grammar
	}{{"choice3", choice}, {"digits", nil}, {"words", nil}, {"any_line", nil}} {
		g := c.g
		if g == nil {
			p := map[string]string{"digits": `\d{3}-\d{4}`, "words": `[a-z]+( [a-z]+)*`, "any_line": `[^\n]*`}[c.name]
			if g, err = Compile(p); err != nil {
				b.Fatal(err)
			}
		}
		bits := make([]uint64, v.Words())
		st := g.Start()
		v.Allowed(st, bits) // build the DFA transitions
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				v.Allowed(st, bits)
			}
		})
	}
}

// TestMaskWorkBound walks patterns whose every trie node is a new DFA
// state (0.27-3.6 s per uncached mask before MaxMaskWork): each mask stays
// well under a second, offers only tokens the state accepts, is empty only
// where nothing can follow, and the output matches per Go's regexp.
func TestMaskWorkBound(t *testing.T) {
	toks := v4Tokens(t)
	v := NewVocab(toks)
	for _, p := range []string{`(.|..){0,300}`, `(?s).*a.{100}`, `\p{L}{0,200}`} {
		g, err := Compile(p)
		if err != nil {
			t.Fatal(err)
		}
		re := regexp.MustCompile(`^(?:` + p + `)$`)
		m := NewMasker(v)
		st := g.Start()
		rng := rand.New(rand.NewPCG(1, 2))
		var out []byte
		for step := 0; step < 8; step++ {
			start := time.Now()
			bits := m.Allowed(st)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("%s: mask took %v", p, d)
			}
			var ids []int
			for i, w := range bits {
				for ; w != 0; w &= w - 1 {
					ids = append(ids, i*64+bits64.TrailingZeros64(w))
				}
			}
			if len(ids) == 0 {
				if !st.Done() {
					t.Fatalf("%s: no token allowed after %q", p, out)
				}
				break
			}
			for _, id := range ids[:min(len(ids), 200)] {
				if !st.Clone().FeedBytes(toks[id]) {
					t.Fatalf("%s: token %q allowed, refused", p, toks[id])
				}
			}
			id := ids[rng.IntN(len(ids))]
			st.FeedBytes(toks[id])
			out = append(out, toks[id]...)
		}
		if st.Accepting() != re.Match(out) {
			t.Errorf("%s: %q: Accepting %v, regexp disagrees", p, out, st.Accepting())
		}
	}
}

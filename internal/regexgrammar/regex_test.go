package regexgrammar

import (
	"errors"
	"math/rand/v2"
	"regexp"
	"regexp/syntax"
	"strings"
	"testing"
	"unicode/utf8"
)

// viable reports whether s can be fed in full (a prefix of some match).
func viable(g *Grammar, s string) bool {
	return g.Start().FeedBytes([]byte(s))
}

// TestMatch checks full matches, non-matches and viable prefixes on a table
// of patterns.
func TestMatch(t *testing.T) {
	cases := []struct {
		pattern            string
		match, no, prefix  []string // prefix: viable but not a match
		notPrefix          []string // not viable
		done, notDoneMatch []string // done: matches and nothing may follow; notDoneMatch: matches, more may follow
	}{
		{pattern: `abc`, match: []string{"abc"}, no: []string{"", "ab", "abcd", "xabc"}, prefix: []string{"", "a", "ab"}, notPrefix: []string{"b", "abd", "abcc"}, done: []string{"abc"}},
		{pattern: `a+`, match: []string{"a", "aaaa"}, no: []string{"", "b", "ab"}, prefix: []string{""}, notPrefix: []string{"ab"}, notDoneMatch: []string{"a"}},
		{pattern: `^\d{3}-\d{4}$`, match: []string{"555-1234"}, no: []string{"5551234", "555-123", "55-1234"}, prefix: []string{"5", "555-", "555-12"}, notPrefix: []string{"a", "5555", "555-12345"}, done: []string{"555-1234"}},
		{pattern: `\A(yes|no)\z`, match: []string{"yes", "no"}, no: []string{"y", "yesno"}, prefix: []string{"y", "ye", "n"}, notPrefix: []string{"x", "yess"}},
		{pattern: `(?i)hello`, match: []string{"hello", "HeLLo", "HELLO"}, no: []string{"hell"}, notPrefix: []string{"hx"}},
		{pattern: `[a-c]*x?`, match: []string{"", "abc", "abcx", "x"}, no: []string{"xa"}, notPrefix: []string{"d", "xa"}, notDoneMatch: []string{"", "ab"}, done: []string{"abx"}},
		{pattern: `.*`, match: []string{"", "anything goes", "é€𝄞"}, no: []string{"a\nb"}, notPrefix: []string{"\n"}},
		{pattern: `(?s).`, match: []string{"\n", "é"}, no: []string{"", "ab"}},
		{pattern: `[^a]`, match: []string{"\n", "b", "é"}, no: []string{"a"}},
		{pattern: `\w+@\w+\.com`, match: []string{"a_1@b.com"}, no: []string{"a@b.org"}, prefix: []string{"a", "a@", "a@b.c"}, notPrefix: []string{"@", "a@.com"}},
		{pattern: `(a|ab)(c|bcd)`, match: []string{"abcd", "ac", "abc"}, no: []string{"ab", "abd"}},
		{pattern: `x{2,3}`, match: []string{"xx", "xxx"}, no: []string{"x", "xxxx"}, done: []string{"xxx"}, notDoneMatch: []string{"xx"}},
		{pattern: `a*?b+?`, match: []string{"b", "aabb"}, no: []string{"a"}},
		{pattern: `\pL+`, match: []string{"héllo", "Ωμέγα", "日本"}, no: []string{"a1"}},
		{pattern: `[α-ω]{2}`, match: []string{"αβ"}, no: []string{"α", "ab"}, prefix: []string{"α", "\xce"}, notPrefix: []string{"\xc3", "a"}},
		{pattern: `é`, match: []string{"é"}, prefix: []string{"\xc3"}, notPrefix: []string{"\xc3\xa8", "\xc3\xc3", "e"}},
		{pattern: `[\x{10000}-\x{10FFFF}]`, match: []string{"𝄞", "\U0010FFFF"}, prefix: []string{"\xf0", "\xf0\x9d", "\xf4\x8f"}, notPrefix: []string{"\xf0\x80", "\xf4\x90", "\xe0", "a"}},
		{pattern: `(?i)k`, match: []string{"k", "K", "\u212a"}, no: []string{"x"}},
		{pattern: ``, match: []string{""}, no: []string{"a"}, done: []string{""}},
		{pattern: `a|`, match: []string{"", "a"}, notDoneMatch: []string{""}, done: []string{"a"}},
		{pattern: `(^a|^b)(c$|d\z)`, match: []string{"ac", "bd"}, no: []string{"a", "cd"}},
	}
	for _, c := range cases {
		g, err := Compile(c.pattern)
		if err != nil {
			t.Fatalf("%q: %v", c.pattern, err)
		}
		for _, s := range c.match {
			if !g.Match([]byte(s)) {
				t.Errorf("%q does not match %q", c.pattern, s)
			}
		}
		for _, s := range c.no {
			if g.Match([]byte(s)) {
				t.Errorf("%q matches %q", c.pattern, s)
			}
		}
		for _, s := range c.prefix {
			if !viable(g, s) {
				t.Errorf("%q: %q is not a viable prefix", c.pattern, s)
			}
		}
		for _, s := range c.notPrefix {
			if viable(g, s) {
				t.Errorf("%q: %q is a viable prefix", c.pattern, s)
			}
		}
		for _, s := range c.done {
			st := g.Start()
			if !st.FeedBytes([]byte(s)) || !st.Accepting() || !st.Done() {
				t.Errorf("%q: %q is not a complete match with nothing to follow", c.pattern, s)
			}
		}
		for _, s := range c.notDoneMatch {
			st := g.Start()
			if !st.FeedBytes([]byte(s)) || !st.Accepting() || st.Done() {
				t.Errorf("%q: %q is not a match that may go on", c.pattern, s)
			}
		}
	}
}

// TestInvalidUTF8 checks that bytes outside valid UTF-8 are never accepted,
// even by patterns that take any character.
func TestInvalidUTF8(t *testing.T) {
	g, err := Compile(`(?s).*`)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"\xff", "\xc0\x80", "\xc1", "\xed\xa0\x80", "\xf5", "\xe0\x80", "\xf0\x80", "\xf4\x90", "\x80", "a\xc3a"} {
		if viable(g, s) {
			t.Errorf("%q accepted", s)
		}
	}
	for _, s := range []string{"\xed\x9f\xbf", "\xee\x80\x80", "\xf4\x8f\xbf\xbf", "\xc3"} {
		if !viable(g, s) {
			t.Errorf("%q refused", s)
		}
	}
	st := g.Start()
	if !st.FeedBytes([]byte("\xe2\x82")) || st.Accepting() {
		t.Fatal("a partial rune is accepting")
	}
	if !st.Feed(0xac) || !st.Accepting() {
		t.Fatal("€ does not complete")
	}
}

// TestCompileErrors checks the typed errors.
func TestCompileErrors(t *testing.T) {
	var se *SyntaxError
	var ue *UnsupportedError
	var le *LimitError
	cases := []struct {
		pattern string
		target  any
		msg     string
	}{
		{`(a)\1`, &se, "invalid escape sequence: `\\1` (backreferences are not supported)"},
		{`(?=a)b`, &se, `(lookaround assertions are not supported)`},
		{`(?!a)b`, &se, `(lookaround assertions are not supported)`},
		{`(?<!a)b`, &se, `(lookaround assertions are not supported)`},
		{`a(?<=a)`, &se, `(lookaround assertions are not supported)`},
		{`a++`, &se, `(possessive quantifiers are not supported)`},
		{`(`, &se, `missing closing )`},
		{`a^b`, &ue, `unsupported ^`},
		{`a$b`, &ue, `unsupported $`},
		{`(?m)^a`, &ue, `unsupported ^`},
		{`\bfoo`, &ue, `unsupported \b`},
		{`a\B`, &ue, `unsupported \B`},
		{`(^a)*`, &ue, `unsupported ^`},
		{"a\x00", &ue, `NUL`},
		{`a[^\x00-\x{10FFFF}]`, &ue, `matches no text`},
		{strings.Repeat("a", MaxPatternBytes+1), &le, `pattern bytes`},
		{`(?:\pL{1000}){100}`, &se, `invalid repeat count`},
		{strings.Repeat(`[a-z]{1000}`, 101), &le, `program instructions`},
	}
	for _, c := range cases {
		_, err := Compile(c.pattern)
		if err == nil {
			t.Errorf("%.40q: no error", c.pattern)
			continue
		}
		ok := false
		switch p := c.target.(type) {
		case **SyntaxError:
			ok = errors.As(err, p)
		case **UnsupportedError:
			ok = errors.As(err, p)
		case **LimitError:
			ok = errors.As(err, p)
		}
		if !ok || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%.40q: got %T %v, want %T containing %q", c.pattern, err, err, c.target, c.msg)
		}
	}
}

// TestChoice checks choice lists: exactly one choice matches, prefixes of
// longer ones stay open, quoting, limits.
func TestChoice(t *testing.T) {
	g, err := Choice([]string{"yes", "no", "yes!", "a.b", "(x)", "é", "no"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"yes", "no", "yes!", "a.b", "(x)", "é"} {
		if !g.Match([]byte(s)) {
			t.Errorf("%q does not match", s)
		}
	}
	for _, s := range []string{"", "ye", "axb", "x", "(x", "yes!!", "noo"} {
		if g.Match([]byte(s)) {
			t.Errorf("%q matches", s)
		}
	}
	st := g.Start()
	if !st.FeedBytes([]byte("yes")) || !st.Accepting() || st.Done() {
		t.Fatal(`"yes" is a match that may grow to "yes!"`)
	}
	if !st.Feed('!') || !st.Done() {
		t.Fatal(`"yes!" is done`)
	}
	if g, err := Choice([]string{"", "a"}); err != nil || !g.Match(nil) || !g.Match([]byte("a")) {
		t.Fatalf("empty choice: %v", err)
	}
	var ce *ChoiceError
	var le *LimitError
	if _, err := Choice(nil); !errors.As(err, &ce) {
		t.Errorf("no choices: %v", err)
	}
	if _, err := Choice([]string{"a\x00"}); !errors.As(err, &ce) {
		t.Errorf("NUL: %v", err)
	}
	if _, err := Choice([]string{"\xff"}); !errors.As(err, &ce) {
		t.Errorf("invalid UTF-8: %v", err)
	}
	if _, err := Choice(make([]string, MaxChoices+1)); !errors.As(err, &le) {
		t.Errorf("count: %v", err)
	}
	if _, err := Choice([]string{strings.Repeat("x", MaxChoiceBytes+1)}); !errors.As(err, &le) {
		t.Errorf("bytes: %v", err)
	}
	// Many long choices stay small and fast (the parser factors prefixes).
	many := make([]string, 2000)
	for i := range many {
		many[i] = strings.Repeat("choice", 4) + string(rune('a'+i%26)) + strings.Repeat("z", i%7)
	}
	g, err = Choice(many)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range many[:50] {
		if !g.Match([]byte(s)) {
			t.Fatalf("%q does not match", s)
		}
	}
}

// randString draws a string of up to n runes from alphabet.
func randString(r *rand.Rand, alphabet []rune, n int) string {
	var b strings.Builder
	for range r.IntN(n + 1) {
		b.WriteRune(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

// agreePatterns are the patterns compared with Go's regexp on random strings.
var agreePatterns = []string{
	`a*b?c+`, `(ab|a)(bc|c)*`, `[a-c]{2,4}x?`, `(?i)[ab]é+`, `(a|é|€|𝄞)*b`, `\d+(\.\d{1,2})?`,
	`[^ab]*a`, `(?:a{0,3}b){2}`, `.{3}`, `(?s).{2}`, `(x|y|)z*`, `\w\W\s\S`, `[\p{Greek}a]+`,
	`(a+|b+)*c`, `a{2}|b{3}|é{1,2}`, `^a.c$`,
}

// TestAgreesWithRegexp compares Match, and the viability of every prefix
// of a matching string, with Go's regexp full match on random strings.
func TestAgreesWithRegexp(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("abcxyz.é€𝄞12 \nΩβ_")
	for _, p := range agreePatterns {
		g, err := Compile(p)
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		re := regexp.MustCompile(`^(?:` + p + `)$`)
		matched := 0
		for range 3000 {
			s := randString(r, alphabet, 6)
			if r.IntN(2) == 0 { // bias towards the pattern's letters
				s = randString(r, []rune("abcé1."), 5)
			}
			want := re.MatchString(s)
			if got := g.Match([]byte(s)); got != want {
				t.Fatalf("%q on %q: got %v, regexp %v", p, s, got, want)
			}
			if want {
				matched++
				for i := range len(s) {
					if !viable(g, s[:i]) {
						t.Fatalf("%q: prefix %q of match %q not viable", p, s[:i], s)
					}
				}
			}
		}
		if matched == 0 {
			t.Errorf("%q: no random string matched", p)
		}
	}
}

// TestNoDeadState walks random paths: every state reached either matches
// or accepts some byte.
func TestNoDeadState(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, p := range append(agreePatterns, `[\x{10000}-\x{10FFFF}]é`, `[α-ω]+€`, `ab[^\x00-\x{10FFFF}]|ac`, `(a[^\x00-\x{10FFFF}])*b`) {
		g, err := Compile(p)
		if err != nil {
			t.Fatal(err)
		}
		for range 40 {
			st := g.Start()
			var out []byte
			for range 30 {
				var ok []byte
				for c := range 256 {
					if st.Clone().Feed(byte(c)) {
						ok = append(ok, byte(c))
					}
				}
				if len(ok) == 0 {
					if !st.Accepting() || !st.Done() {
						t.Fatalf("%q: dead state after %q", p, out)
					}
					break
				}
				if st.Done() {
					t.Fatalf("%q: done but accepts bytes after %q", p, out)
				}
				if st.Accepting() && r.IntN(4) == 0 {
					break
				}
				c := ok[r.IntN(len(ok))]
				st.Feed(c)
				out = append(out, c)
			}
			if st.Accepting() && (!utf8.Valid(out) || !regexp.MustCompile(`^(?:`+p+`)$`).Match(out)) {
				t.Fatalf("%q: accepted %q", p, out)
			}
		}
	}
}

// TestCacheLimit checks a pattern with more DFA states than the cache
// holds: matching stays correct past the limit.
func TestCacheLimit(t *testing.T) {
	p := `(a|b)*a(a|b){12}`
	g, err := Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^(?:` + p + `)$`)
	r := rand.New(rand.NewPCG(5, 6))
	for range 3000 {
		s := randString(r, []rune("ab"), 40)
		if g.Match([]byte(s)) != re.MatchString(s) {
			t.Fatalf("%q", s)
		}
	}
	if len(g.nodes) != MaxCachedStates {
		t.Errorf("%d cached states, want the limit %d", len(g.nodes), MaxCachedStates)
	}
}

// FuzzMatch compares Match with Go's regexp full match on valid UTF-8
// inputs, for every pattern both compile.
func FuzzMatch(f *testing.F) {
	for _, p := range agreePatterns {
		f.Add(p, "abc")
		f.Add(p, "aé€")
	}
	f.Fuzz(func(t *testing.T, p, s string) {
		if !utf8.ValidString(s) {
			return
		}
		g, err := Compile(p)
		if err != nil {
			return
		}
		// Wrapped through the parsed form: \Q...\E in p would swallow
		// a textual wrapping.
		sre, err := syntax.Parse(p, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		re, err := regexp.Compile(`^(?:` + sre.String() + `)$`)
		if err != nil {
			t.Fatalf("%q compiles here but not for regexp: %v", p, err)
		}
		if got, want := g.Match([]byte(s)), re.MatchString(s); got != want {
			t.Fatalf("%q on %q: got %v, regexp %v", p, s, got, want)
		}
	})
}

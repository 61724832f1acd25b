package regexgrammar

import (
	"errors"
	"math/rand/v2"
	"regexp"
	"testing"
	"unicode/utf8"
)

// TestRuneDFA checks the rune automaton against regexp's full match on
// random strings over each pattern's alphabet, and CanAccept against
// Next rune by rune.
func TestRuneDFA(t *testing.T) {
	pats := []string{`abc`, `a+b*`, `^\d{4}-\d{2}$`, `(?i)héllo`, `.*`, `[^a]+`, `\pL{1,3}`, `(a|ab)(c|bcd)`, ``, `[\x{D7FF}-\x{E000}]`, `[α-ω]*x`, `(?s).`, `[\x00-\x1f"\\]+`, `[^\n]*`, `(?s).*`, `[ !#-\[\]-~\x{80}-\x{10FFFF}]*x`, `(?s).{0,3}`, `(..)*`}
	alphabet := []rune("abcdxHÉé0123-\n\"\\\x01αβωx\u00e9\U0001D11E\uD7FF\uE000")
	rng := rand.New(rand.NewPCG(1, 2))
	for _, p := range pats {
		g, err := Compile(p)
		if err != nil {
			t.Fatal(p, err)
		}
		d, err := g.RuneDFA(1000)
		if err != nil {
			t.Fatal(p, err)
		}
		re := regexp.MustCompile(`^(?:` + p + `)$`)
		for range 2000 {
			n := rng.IntN(7)
			rs := make([]rune, n)
			for i := range rs {
				rs[i] = alphabet[rng.IntN(len(alphabet))]
			}
			s := string(rs)
			if got, want := d.Match(s), re.MatchString(s); got != want {
				t.Errorf("%q on %q: %v, regexp %v", p, s, got, want)
			}
			// A viable prefix can be extended: CanAccept over all runes.
			st := d.Start()
			for _, r := range rs {
				if st = d.Next(st, r); st < 0 {
					break
				}
				if !d.Accepting(st) && !d.CanAccept(st, 0, utf8.MaxRune) {
					t.Errorf("%q: dead end after %q", p, s)
				}
			}
		}
		for s := int32(0); s < int32(d.States()); s++ {
			for _, iv := range [][2]rune{{0, 0x7f}, {'a', 'a'}, {0x80, 0x7ff}, {0xD700, 0xE100}, {0x10000, 0x10FFFF}, {0xD800, 0xDFFF}} {
				want := false
				for r := iv[0]; r <= iv[1] && !want; r++ {
					want = d.Next(s, r) >= 0
				}
				if got := d.CanAccept(s, iv[0], iv[1]); got != want {
					t.Errorf("%q state %d CanAccept%v = %v, want %v", p, s, iv, got, want)
				}
			}
		}
		for s := int32(0); s < int32(d.States()); s++ {
			for _, iv := range [][2]rune{{0, 0x7f}, {0x20, 0x21}, {0x80, 0x10FFFF}, {0xD000, 0xE100}, {0xD800, 0xDFFF}, {'a', 'z'}} {
				want, wantOK, seen := int32(-1), true, false
				for r := iv[0]; r <= iv[1] && wantOK; r++ {
					if r >= 0xD800 && r <= 0xDFFF {
						continue
					}
					switch x := d.Next(s, r); {
					case !seen:
						want, seen = x, true
					case x != want:
						wantOK = false
					}
				}
				if got, ok := d.Uniform(s, iv[0], iv[1]); ok != wantOK || ok && got != want {
					t.Errorf("%q state %d Uniform%v = %d %v, want %d %v", p, s, iv, got, ok, want, wantOK)
				}
			}
		}
		if d.Next(0, 0xD800) != -1 {
			t.Errorf("%q: a surrogate is accepted", p)
		}
	}
	g, _ := Compile(`(a|b)*a(a|b){12}`)
	var le *LimitError
	if _, err := g.RuneDFA(1000); !errors.As(err, &le) {
		t.Errorf("exponential pattern: %v, want *LimitError", err)
	}
	// Many threads over many intervals: refused by the work bound.
	g, _ = Compile(`(?:\pL?){500}`)
	if _, err := g.RuneDFA(4096); !errors.As(err, &le) || le.What != "automaton work" {
		t.Errorf("wide pattern: %v, want the work *LimitError", err)
	}
}

// TestIntersect checks the product automaton against both regexps, and
// that every state it reaches can still reach a match.
func TestIntersect(t *testing.T) {
	pairs := [][2]string{
		{`\d{4}-\d{2}`, `20.*`}, {`[a-c]*`, `(ab)*c?`}, {`.*x.*`, `[^y]{0,5}`}, {`(?i)héllo|world`, `[a-zé]+`},
		{`\pL+`, `[α-ω]*x|[a-z]+`}, {`(a|b)*a(a|b){3}`, `b*a*`},
	}
	alphabet := []rune("abcxyHÉé0123-2\nαβωworldhl")
	rng := rand.New(rand.NewPCG(5, 6))
	for _, pr := range pairs {
		ga, _ := Compile(pr[0])
		gb, _ := Compile(pr[1])
		a, err := ga.RuneDFA(1000)
		if err != nil {
			t.Fatal(err)
		}
		b, err := gb.RuneDFA(1000)
		if err != nil {
			t.Fatal(err)
		}
		d, err := Intersect(a, b, 1000)
		if err != nil {
			t.Fatal(pr, err)
		}
		ra, rb := regexp.MustCompile(`^(?:`+pr[0]+`)$`), regexp.MustCompile(`^(?:`+pr[1]+`)$`)
		for range 3000 {
			rs := make([]rune, rng.IntN(8))
			for i := range rs {
				rs[i] = alphabet[rng.IntN(len(alphabet))]
			}
			s := string(rs)
			if got, want := d.Match(s), ra.MatchString(s) && rb.MatchString(s); got != want {
				t.Errorf("%q on %q: %v, want %v", pr, s, got, want)
			}
		}
		for s := int32(0); s < int32(d.States()); s++ {
			if !d.Accepting(s) && !d.CanAccept(s, 0, utf8.MaxRune) {
				t.Errorf("%q: state %d is a dead end", pr, s)
			}
		}
	}
	ga, _ := Compile(`a+`)
	gb, _ := Compile(`b+`)
	a, _ := ga.RuneDFA(10)
	b, _ := gb.RuneDFA(10)
	var ue *UnsupportedError
	if _, err := Intersect(a, b, 10); !errors.As(err, &ue) {
		t.Errorf("disjoint: %v, want *UnsupportedError", err)
	}
}

package dsv4

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/dsv4go/dsv4go/internal/jsongrammar"
)

// conAccepts reports whether con's automaton accepts s in full.
func conAccepts(con *OutputConstraint, s string) bool {
	if con.g != nil {
		st := con.g.Start()
		return st.FeedBytes([]byte(s)) && st.Accepting()
	}
	st := con.rg.Start()
	return st.FeedBytes([]byte(s)) && st.Accepting()
}

// TestConstraintCacheNoCollisions compiles constraints whose texts are
// close (whitespace inside strings, escapes, key order, choices whose
// concatenations are equal, a schema, a regex and choices of the same
// text) through one cache, in random orders and repeatedly: constraints of
// different meaning never share an entry, and what each accepts is what a
// fresh compilation of it accepts.
func TestConstraintCacheNoCollisions(t *testing.T) {
	type spec struct {
		class  string // specs of one class mean the same constraint
		kind   byte   // 'j' schema, 'r' regex, 'c' choice, 'o' json_object
		text   string
		choice []string
	}
	specs := []spec{
		{class: "ab-space", kind: 'j', text: `{"enum":["a b"]}`},
		{class: "ab", kind: 'j', text: `{"enum":["ab"]}`},
		{class: "ab", kind: 'j', text: `{ "enum" : [ "ab" ] }`},
		{class: "ab-tab", kind: 'j', text: `{"enum":["a\tb"]}`},
		{class: "quote", kind: 'j', text: `{"const":"\""}`},
		{class: "quote", kind: 'j', text: `{"const":"\u0022"}`},
		{class: "bs", kind: 'j', text: `{"const":"\\"}`},
		{class: "bs-u", kind: 'j', text: `{"const":"\\u0022"}`}, // a backslash, then u0022
		{class: "e-acute", kind: 'j', text: `{"const":"é"}`},
		{class: "e-acute", kind: 'j', text: `{"const":"\u00e9"}`},
		{class: "e-comb", kind: 'j', text: "{\"const\":\"e\u0301\"}"}, // e + U+0301
		{class: "ab-props", kind: 'j', text: `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a","b"]}`},
		{class: "ba-props", kind: 'j', text: `{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}},"required":["a","b"]}`},
		{class: "key-space", kind: 'j', text: `{"type":"object","properties":{"a b":{"type":"integer"}},"required":["a b"]}`},
		{class: "key-nospace", kind: 'j', text: `{"type":"object","properties":{"ab":{"type":"integer"}},"required":["ab"]}`},
		{class: "num1", kind: 'j', text: `{"type":"number","minimum":1}`},
		{class: "num1", kind: 'j', text: `{"type":"number","minimum":1}` + "\n"},
		{class: "num10", kind: 'j', text: `{"type":"number","minimum":10}`},
		{class: "num1e1", kind: 'j', text: `{"type":"number","minimum":1e1}`}, // same value as num10, other text: may or may not share
		{class: "empty-obj", kind: 'j', text: `{}`},
		{class: "json_object", kind: 'o'},
		{class: "re-braces", kind: 'r', text: `{}`},
		{class: "choice-braces", kind: 'c', choice: []string{"{}"}},
		{class: "re-ab", kind: 'r', text: `ab`},
		{class: "re-a|b", kind: 'r', text: `a|b`},
		{class: "choice-ab", kind: 'c', choice: []string{"ab"}},
		{class: "choice-a-b", kind: 'c', choice: []string{"a", "b"}},
		{class: "choice-ab-c", kind: 'c', choice: []string{"ab", "c"}},
		{class: "choice-a-bc", kind: 'c', choice: []string{"a", "bc"}},
		{class: "choice-abc", kind: 'c', choice: []string{"abc"}},
		{class: "choice-len", kind: 'c', choice: []string{"\x01a", "\x01b"}},
		{class: "choice-len2", kind: 'c', choice: []string{"\x01a\x01b"}},
		{class: "choice-dot", kind: 'c', choice: []string{"a.c"}},
		{class: "re-dot", kind: 'r', text: `a.c`},
	}
	probes := []string{`"a b"`, `"ab"`, `"a\tb"`, `"\""`, `"\\"`, `"\\u0022"`, `"é"`, "\"e\u0301\"", `{"a":1,"b":"x"}`, `{"b":"x","a":1}`,
		`{"a b":1}`, `{"ab":1}`, `1`, `10`, `5`, `{}`, `ab`, `a`, `b`, `abc`, `c`, "\x01a", "\x01b", "\x01a\x01b", "a.c", "abc", "axc"}
	compile := func(cc *constraintCache, s spec) (*OutputConstraint, error) {
		switch s.kind {
		case 'j':
			return compileSchema(cc, []byte(s.text), "p")
		case 'r':
			return compileRegex(cc, s.text, "p")
		case 'c':
			return compileChoice(cc, s.choice, "p")
		}
		return cc.jsonObject(), nil
	}
	for round := range 8 {
		cc := newConstraintCache(DefaultConstraintCacheBytes, MaxConstraintCacheEntries)
		rng := rand.New(rand.NewPCG(uint64(round), 7))
		got := map[*OutputConstraint]string{}
		for range 3 {
			for _, i := range rng.Perm(len(specs)) {
				s := specs[i]
				con, err := compile(cc, s)
				if err != nil {
					t.Fatalf("%s %q: %v", s.class, s.text, err)
				}
				if c, ok := got[con]; ok && c != s.class && !(c == "num10" && s.class == "num1e1" || c == "num1e1" && s.class == "num10") {
					t.Fatalf("%q (%s) served the constraint of class %s", s.text, s.class, c)
				}
				got[con] = s.class
				fresh, _ := compile(nil, s)
				for _, p := range probes {
					if a, b := conAccepts(con, p), conAccepts(fresh, p); a != b {
						t.Fatalf("%s %q: cached accepts %q: %v, fresh: %v", s.class, s.text, p, a, b)
					}
				}
			}
		}
	}
}

// TestConstraintCacheOversizedKeepsOthers: a constraint larger than the
// whole budget is served but not kept, and it does not push the others
// out (the budget is not exceeded by keeping them).
func TestConstraintCacheOversizedKeepsOthers(t *testing.T) {
	small := func() *OutputConstraint { return JSONObjectConstraint() }
	budget := 3*(small().bytes()+200) + 100
	cc := newConstraintCache(budget, 8)
	for _, k := range []string{"a", "b", "c"} {
		if _, err := cc.get(k, func() (*OutputConstraint, error) { return small(), nil }); err != nil {
			t.Fatal(err)
		}
	}
	if n, _, _ := cc.stats(); n != 3 {
		t.Fatalf("%d entries kept, want 3", n)
	}
	big, err := cc.regex("[a-z]{0,300}[0-9]{0,300}")
	if err != nil || big == nil {
		t.Fatal(err)
	}
	if big.bytes() <= budget {
		t.Fatalf("the big constraint has %d bytes, within the budget %d", big.bytes(), budget)
	}
	if n, _, _ := cc.stats(); n != 3 {
		t.Fatalf("after an oversized constraint: %d entries kept, want the 3 small ones", n)
	}
	// A kept constraint that grows past the budget (its masks, while a
	// request decodes) goes alone at the next use.
	a, _ := cc.get("a", nil)
	toks := make([][]byte, 64*int(budget/8+64))
	for i := range toks {
		toks[i] = []byte{byte('a' + i%26), byte('a' + i/26%26)}
	}
	cv := &constraintVocab{bytes: toks, v: jsongrammar.NewVocab(toks)}
	c := newConstrained(a, cv, -1, nil)
	logits := make([]float32, len(toks))
	c.mask(logits, make([]float32, len(toks)), nil)
	if a.bytes() <= budget {
		t.Fatal("the mask did not grow the constraint past the budget")
	}
	_, _ = cc.get("b", nil)
	if n, _, _ := cc.stats(); n != 2 || cc.entries["a"] != nil {
		t.Fatalf("after a grew past the budget: %d entries (a kept: %v), want b and c", n, cc.entries["a"] != nil)
	}
	if total := cc.totalBytes(); total > budget {
		t.Fatalf("%d bytes kept, budget %d", total, budget)
	}
}

// TestConstraintCacheMemoryBounded: many distinct large schemas, each
// used by a request whose masks grow its entry, under a small budget:
// the bytes the cache counts stay within the budget after each use, and
// the heap (runtime.MemStats, after GC, the requests gone) grows by no
// more than the budget plus a margin.
func TestConstraintCacheMemoryBounded(t *testing.T) {
	const budget = 8 << 20
	cc := newConstraintCache(budget, MaxConstraintCacheEntries)
	words := 512 // 4 KiB masks
	toks := make([][]byte, 64*words)
	for i := range toks {
		toks[i] = []byte{"{}\"ab:,0123456789 "[i%18], byte('a' + i/18%26), byte('a' + i/468%26)}
	}
	toks[0], toks[1], toks[2], toks[3] = []byte("{"), []byte("}"), []byte("\""), []byte(":")
	cv := &constraintVocab{bytes: toks, v: jsongrammar.NewVocab(toks)}
	logits := make([]float32, len(toks))
	dst := make([]float32, len(toks))
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	for i := range 300 {
		// A large schema: 60 properties with long names, distinct per i.
		var b []byte
		b = append(b, `{"type":"object","properties":{`...)
		for p := range 60 {
			if p > 0 {
				b = append(b, ',')
			}
			b = fmt.Appendf(b, `"property_%d_%d_%s":{"type":"string","maxLength":%d}`, i, p, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 5+p)
		}
		b = append(b, `}}`...)
		con, err := compileSchema(cc, b, "p")
		if err != nil {
			t.Fatal(err)
		}
		c := newConstrained(con, cv, -1, nil)
		for _, tok := range []int32{0, 2} { // '{', then '"': two states' masks
			c.mask(logits, dst, nil)
			c.observe(tok, false)
		}
		c.mask(logits, dst, nil)
		if total := cc.totalBytes(); total > budget+con.bytes()+2048 {
			t.Fatalf("schema %d: %d bytes kept, budget %d", i, total, budget)
		}
	}
	cc.get("x", func() (*OutputConstraint, error) { return JSONObjectConstraint(), nil }) // a use trims
	if total := cc.totalBytes(); total > budget {
		t.Fatalf("%d bytes kept, budget %d", total, budget)
	}
	n, _, misses := cc.stats()
	if misses != 301 || n < 2 {
		t.Fatalf("%d entries, %d compilations", n, misses)
	}
	if grown := int64(heap()) - int64(before); grown > 2*budget+(4<<20) {
		t.Fatalf("the heap grew by %d bytes with a cache budget of %d", grown, budget)
	} else {
		t.Logf("heap grew by %d bytes (budget %d, %d entries kept, %d counted)", grown, budget, n, cc.totalBytes())
	}
	runtime.KeepAlive(cc)
}

// TestConstraintCachePanicWaiters: a compilation that panics leaves its
// concurrent waiters an error (no hang, no entry), and the key compiles
// again later.
func TestConstraintCachePanicWaiters(t *testing.T) {
	cc := newConstraintCache(DefaultConstraintCacheBytes, MaxConstraintCacheEntries)
	started, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer func() {
			if recover() == nil {
				t.Error("the compiling request's panic vanished")
			}
		}()
		_, _ = cc.get("k", func() (*OutputConstraint, error) {
			close(started)
			<-release
			panic("compile")
		})
	})
	<-started
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			_, err := cc.get("k", func() (*OutputConstraint, error) { return JSONObjectConstraint(), nil })
			errs <- err
		})
	}
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		// A waiter that arrived after the panic compiles again (nil).
		if err != nil && !errors.Is(err, errConstraintCompile) {
			t.Fatalf("waiter got %v", err)
		}
	}
	if con, err := cc.get("k", func() (*OutputConstraint, error) { return JSONObjectConstraint(), nil }); err != nil || con == nil {
		t.Fatalf("after the panic: %v", err)
	}
}

package dsv4

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsv4go/dsv4go/internal/jsongrammar"
	"github.com/dsv4go/dsv4go/internal/regexgrammar"
)

// TestConstraintCacheKeys checks what the cache tells apart: a schema is
// found again whatever its insignificant whitespace, but not with its keys
// in another order (the grammar follows it); kinds with the same text are
// different entries; the exported constructors do not use the cache.
func TestConstraintCacheKeys(t *testing.T) {
	cc := newConstraintCache(DefaultConstraintCacheBytes, MaxConstraintCacheEntries)
	a, err := compileSchema(cc, []byte(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}}}`), "p")
	if err != nil {
		t.Fatal(err)
	}
	b, err := compileSchema(cc, []byte("{ \"type\" : \"object\",\n\t\"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {\"type\": \"string\"}}}"), "p")
	if err != nil || b != a {
		t.Fatalf("same schema, other whitespace: %p %p %v", a, b, err)
	}
	c, err := compileSchema(cc, []byte(`{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}}`), "p")
	if err != nil || c == a {
		t.Fatalf("keys reordered: got the same constraint (%v)", err)
	}
	r, err := compileRegex(cc, "a", "p")
	if err != nil {
		t.Fatal(err)
	}
	ch, err := compileChoice(cc, []string{"a"}, "p")
	if err != nil || ch == r {
		t.Fatalf("choice and regex with the same text share an entry (%v)", err)
	}
	// Choices are told apart by their boundaries.
	x, _ := compileChoice(cc, []string{"ab", "c"}, "p")
	y, _ := compileChoice(cc, []string{"a", "bc"}, "p")
	if x == y || x == nil {
		t.Fatal("choices ab|c and a|bc share an entry")
	}
	if o1, o2 := cc.jsonObject(), cc.jsonObject(); o1 != o2 {
		t.Fatal("json_object compiled twice")
	}
	if n, hits, misses := cc.stats(); n != 7 || hits != 2 || misses != 7 {
		t.Fatalf("entries %d, hits %d, misses %d; want 7, 2, 7", n, hits, misses)
	}
	if s1, _ := JSONSchemaConstraint([]byte(`{"type":"integer"}`)); s1 == nil {
		t.Fatal("JSONSchemaConstraint failed")
	}
	if n, _, _ := cc.stats(); n != 7 {
		t.Fatal("JSONSchemaConstraint used an engine's cache")
	}
}

// TestConstraintCacheErrors: a failed compilation is not kept (not even
// for the requests waiting on it), the error comes back each time with the
// caller's param, and a key whose compilation failed compiles again.
func TestConstraintCacheErrors(t *testing.T) {
	cc := newConstraintCache(DefaultConstraintCacheBytes, MaxConstraintCacheEntries)
	for _, param := range []string{"response_format.json_schema.schema", "structured_outputs.json"} {
		_, err := compileSchema(cc, []byte(`{"type":"object","allOf":[]}`), param)
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Param != param {
			t.Fatalf("got %v, want a *ParamError on %s", err, param)
		}
	}
	if _, err := compileRegex(cc, "a(?=b)", "structured_outputs.regex"); err == nil {
		t.Fatal("lookahead accepted")
	}
	if n, _, misses := cc.stats(); n != 0 || misses != 3 {
		t.Fatalf("after failures: %d entries, %d compilations; want 0, 3", n, misses)
	}
	// The same key failing once (a compile func that fails the first time)
	// and then succeeding.
	fail := errors.New("boom")
	if _, err := cc.get("k", func() (*OutputConstraint, error) { return nil, fail }); err != fail {
		t.Fatalf("got %v", err)
	}
	con, err := cc.get("k", func() (*OutputConstraint, error) { return JSONObjectConstraint(), nil })
	if err != nil || con == nil {
		t.Fatalf("second compile: %v", err)
	}
	if again, _ := cc.get("k", nil); again != con {
		t.Fatal("not kept after success")
	}
	// A panicking compilation leaves no entry behind; its waiters get an
	// error.
	func() {
		defer func() { _ = recover() }()
		_, _ = cc.get("p", func() (*OutputConstraint, error) { panic("compile") })
	}()
	if _, err := cc.get("p", func() (*OutputConstraint, error) { return nil, fail }); err != fail {
		t.Fatalf("after a panic: %v", err)
	}
}

// TestConstraintCacheConcurrent: requests for the same constraint at once
// compile it once and share it; the compiled constraint is then used by
// all of them at once (cursors and masks over one vocabulary; -race).
func TestConstraintCacheConcurrent(t *testing.T) {
	cc := newConstraintCache(DefaultConstraintCacheBytes, MaxConstraintCacheEntries)
	var compiles atomic.Int32
	release := make(chan struct{})
	const n = 16
	got := make([]*OutputConstraint, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c, err := cc.get("s", func() (*OutputConstraint, error) {
				compiles.Add(1)
				<-release
				g, err := jsongrammar.Compile([]byte(`{"type":"object","properties":{"k":{"type":"string","pattern":"[a-c]{1,3}"},"n":{"type":"integer","minimum":-20,"maximum":20}},"required":["k","n"]}`))
				return &OutputConstraint{g: g}, err
			})
			if err != nil {
				t.Error(err)
			}
			got[i] = c
		})
	}
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	if compiles.Load() != 1 {
		t.Fatalf("compiled %d times", compiles.Load())
	}
	toks := [][]byte{[]byte("{"), []byte("}"), []byte(`"k"`), []byte(":"), []byte(`"ab"`), []byte(`"`), []byte("a"), []byte(","), []byte(`"n"`), []byte("-1"), []byte("7"), []byte(" "), nil}
	cv := &constraintVocab{bytes: toks, v: jsongrammar.NewVocab(toks)}
	text := []int32{0, 2, 3, 4, 7, 8, 3, 9, 10, 1} // {"k":"ab","n":-17}
	for i := range n {
		wg.Go(func() {
			if got[i] != got[0] {
				t.Error("different constraints")
				return
			}
			c := newConstrained(got[i], cv, -1, []int32{12})
			logits := make([]float32, len(toks))
			dst := make([]float32, len(toks))
			for _, tok := range text {
				c.mask(logits, dst, nil)
				if dst[tok] != 0 {
					t.Errorf("token %q masked", toks[tok])
					return
				}
				c.observe(tok, false)
			}
			if !c.st.accepting() {
				t.Error("not complete")
			}
		})
	}
	wg.Wait()
}

// TestConstraintCacheBounds: at most maxEntries constraints, the least
// recently used evicted first; the bytes counted include the masks cached
// since an entry was added, and an entry larger than the budget alone is
// served but not kept.
func TestConstraintCacheBounds(t *testing.T) {
	cc := newConstraintCache(1<<30, 2)
	a, _ := cc.regex("a+")
	_, _ = cc.regex("b+")
	if a2, _ := cc.regex("a+"); a2 != a { // a is now the most recent
		t.Fatal("a not kept")
	}
	_, _ = cc.regex("c+")
	if n, _, _ := cc.stats(); n != 2 || cc.entries[conKindRegex+"a+"] == nil || cc.entries[conKindRegex+"c+"] == nil {
		t.Fatalf("%d entries (%v), want a+ and c+", n, cc.entries)
	}

	// Bytes: masks over a vocabulary grow a constraint after it is added.
	words := 2000
	toks := make([][]byte, 64*words)
	for i := range toks {
		toks[i] = []byte{byte('a' + i%26), byte('a' + i/26%26)}
	}
	cv := &constraintVocab{bytes: toks, v: jsongrammar.NewVocab(toks)}
	con := JSONObjectConstraint()
	before := con.bytes()
	c := newConstrained(con, cv, -1, nil)
	logits := make([]float32, len(toks))
	c.mask(logits, make([]float32, len(toks)), nil)
	if grown := con.bytes() - before; grown < int64(8*words) {
		t.Fatalf("a cached mask of %d words added %d bytes", words, grown)
	}
	small := newConstraintCache(before+int64(4*words), 8)
	if _, err := small.get("x", func() (*OutputConstraint, error) { return con, nil }); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := small.stats(); n != 0 {
		t.Fatal("a constraint over the byte budget was kept")
	}
	fresh := JSONObjectConstraint()
	small.get("y", func() (*OutputConstraint, error) { return fresh, nil })
	if n, _, _ := small.stats(); n != 1 {
		t.Fatal("a constraint within the budget was not kept")
	}
	c = newConstrained(fresh, cv, -1, nil)
	c.mask(logits, make([]float32, len(toks)), nil) // fresh grows past the budget
	small.get("y", nil)                             // a use trims it
	if n, _, _ := small.stats(); n != 0 {
		t.Fatal("a constraint grown over the budget was kept")
	}
}

// TestConstraintCacheSaturated: a regex whose DFA cache has filled up is
// compiled anew for the next request.
func TestConstraintCacheSaturated(t *testing.T) {
	cc := newConstraintCache(DefaultConstraintCacheBytes, MaxConstraintCacheEntries)
	a, err := cc.regex("[a-z]{0,1000}[0-9]{0,1000}[A-Z]{0,1000}")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := cc.regex("[a-z]{0,1000}[0-9]{0,1000}[A-Z]{0,1000}"); b != a {
		t.Fatal("not kept")
	}
	st := a.rg.Start()
	text := slices.Concat(bytes.Repeat([]byte("a"), 1000), bytes.Repeat([]byte("0"), 1000), bytes.Repeat([]byte("A"), regexgrammar.MaxCachedStates-1990))
	if !st.FeedBytes(text) || !a.saturated() {
		t.Fatal("the DFA cache did not fill up")
	}
	if b, _ := cc.regex("[a-z]{0,1000}[0-9]{0,1000}[A-Z]{0,1000}"); b == a || b.saturated() {
		t.Fatal("a saturated regex was served again")
	}
}

// TestChatConstraintCompiledOnce: a chat request's constraints are
// compiled once (validation and the run share them), and a repeated
// request takes them from the engine's cache; with the cache off, each
// request still compiles them once.
func TestChatConstraintCompiledOnce(t *testing.T) {
	e := newFakeEngine(&fakeBackend{}, EngineOptions{})
	defer closeEngine(t, e)
	tools := []Tool{
		{Type: "function", Function: FunctionDecl{Name: "get", Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer"}}}`)}},
		{Type: "function", Function: FunctionDecl{Name: "put"}},
	}
	reqs := []func() *ChatRequest{
		func() *ChatRequest {
			r := chatReq("q")
			r.ResponseFormat = json.RawMessage(`{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"a":{"type":"string"}}}}}`)
			return r
		},
		func() *ChatRequest {
			r := chatReq("q")
			r.Tools, r.ToolChoice = tools, &ToolChoice{Mode: "required"}
			return r
		},
		func() *ChatRequest {
			r := chatReq("q")
			r.Tools, r.ToolChoice = tools, &ToolChoice{Mode: "function", Function: "get"}
			return r
		},
		func() *ChatRequest {
			r := chatReq("q")
			r.StructuredOutputs = &StructuredOutputs{Regex: ptr("[0-9]+")}
			return r
		},
	}
	for i, req := range reqs {
		if _, err := e.ChatPrompt(req()); err != nil {
			t.Fatal(err)
		}
		if _, hits, misses := e.cons.stats(); hits != int64(i) || misses != int64(i+1) {
			t.Fatalf("request %d: hits %d, compilations %d; want %d, %d", i, hits, misses, i, i+1)
		}
		if _, err := e.ChatPrompt(req()); err != nil {
			t.Fatal(err)
		}
		if _, hits, misses := e.cons.stats(); hits != int64(i+1) || misses != int64(i+1) {
			t.Fatalf("request %d again: hits %d, compilations %d; want %d, %d", i, hits, misses, i+1, i+1)
		}
	}
	off := newFakeEngine(&fakeBackend{}, EngineOptions{ConstraintCacheBytes: -1})
	defer closeEngine(t, off)
	if off.cons != nil {
		t.Fatal("cache on with ConstraintCacheBytes -1")
	}
	if _, err := off.ChatPrompt(reqs[0]()); err != nil {
		t.Fatal(err)
	}
}

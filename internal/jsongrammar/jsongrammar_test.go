package jsongrammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// accepts feeds s whole and reports whether every byte was accepted and
// the result is complete.
func accepts(g *Grammar, s string) (fed, complete bool) {
	st := g.Start()
	if !st.FeedBytes([]byte(s)) {
		return false, false
	}
	return true, st.Accepting()
}

func TestJSONObject(t *testing.T) {
	g := JSONObject()
	cases := []struct {
		in       string
		fed, end bool
	}{
		{`{}`, true, true},
		{`{ }`, true, true},
		{"{\n\t\"a\" : 1 }", true, true},
		{"{\"a\":\"x\ny\"}", false, false}, // raw newline in a string
		{`{"a":[1,2.5,-3e+4,{"b":null}],"c":"x\"y\\u00e9\\n"}`, true, true},
		{`{"a":true,"b":false,"c":"é😀"}`, true, true},
		{`{"a":"\u00e9"}`, true, true},
		{`{"a":"\uZZ"}`, false, false},
		{`{"a":01}`, false, false},
		{`{"a":-0}`, true, true},
		{`{"a":1.}`, false, false},
		{`{"a":.5}`, false, false},
		{`{"a":1e5,"b":1E-5,"c":0.25}`, true, true},
		{`{"a":[]}`, true, true},
		{`{"a":[[[]]]}`, true, true},
		{`{"a":[1,]}`, false, false},
		{`{"a":1,}`, false, false},
		{`{"a" 1}`, false, false},
		{`{"a":1`, true, false},
		{`{"a":nul`, true, false},
		{`{"a":nulx`, false, false},
		{`[1]`, false, false},
		{`"x"`, false, false},
		{` {}`, false, false},
		{`{} `, false, false},
		{"{\r}", false, false},
		{"{\"a\":\"\x01\"}", false, false},
		{"{\"a\":\"\xff\"}", false, false},
		{"{\"a\":\"\xed\xa0\x80\"}", false, false}, // UTF-8 surrogate
		{"{\"a\":\"\xc3\"}", false, false},         // truncated UTF-8
		{"{" + strings.Repeat(" ", MaxWhitespace) + "}", true, true},
		{"{" + strings.Repeat(" ", MaxWhitespace+1) + "}", false, false},
		{`{"a":` + strings.Repeat("9", MaxIntDigits) + `}`, true, true},
		{`{"a":` + strings.Repeat("9", MaxIntDigits+1) + `}`, false, false},
		{`{"a":` + strings.Repeat("[", MaxNesting) + strings.Repeat("]", MaxNesting) + `}`, false, false},
		{`{"a":` + strings.Repeat("[", MaxNesting-1) + strings.Repeat("]", MaxNesting-1) + `}`, true, true},
	}
	for _, c := range cases {
		fed, end := accepts(g, c.in)
		if fed != c.fed || end != c.end {
			t.Errorf("%q: fed %v complete %v, want %v %v", c.in, fed, end, c.fed, c.end)
		}
		if end && !json.Valid([]byte(c.in)) {
			t.Errorf("%q accepted but not valid JSON", c.in)
		}
	}
}

func TestSchemas(t *testing.T) {
	// A chain of 30 definitions, each an anyOf of the next twice: 2^30
	// paths, compiled in linear time.
	var diamond strings.Builder
	diamond.WriteString(`{"$ref":"#/$defs/d0","$defs":{`)
	for i := range 30 {
		fmt.Fprintf(&diamond, `"d%d":{"anyOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]},`, i, i+1, i+1)
	}
	diamond.WriteString(`"d30":{"type":"integer"}}}`)
	cases := []schemaCase{
		{`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"]}`,
			[]string{`{"name":"Bo","age":3}`, `{ "name" : "" , "age" : -12 }`},
			[]string{`{"age":3,"name":"Bo"}`, `{"name":"Bo"}`, `{"name":"Bo","age":3.5}`, `{"name":"Bo","age":3,"x":1}`, `{}`, `{"nam":"Bo","age":3}`}},
		{`{"properties":{"a":{"type":"boolean"},"b":{"type":"null"},"c":{"type":"number"}},"required":["c"]}`,
			[]string{`{"c":1}`, `{"a":true,"c":1.5}`, `{"a":false,"b":null,"c":-2e3}`, `{"b":null,"c":0}`},
			[]string{`{"c":1,"a":true}`, `{"a":true}`, `{"a":1,"c":1}`}},
		{`{"type":"string","enum":["red","green","gr"]}`,
			[]string{`"red"`, `"green"`, `"gr"`},
			[]string{`"gre"`, `"blue"`, `red`}},
		{`{"enum":[1,10,"a",null,{"x":[1,2]}]}`,
			[]string{`1`, `10`, `"a"`, `null`, `{"x":[1,2]}`},
			[]string{`100`, `{"x": [1,2]}`, `2`}},
		{`{"const":"on"}`, []string{`"on"`}, []string{`"off"`}},
		{`{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3}`,
			[]string{`[1]`, `[1,2,3]`, `[ 1 , 2 ]`},
			[]string{`[]`, `[1,2,3,4]`, `[1.5]`, `["a"]`}},
		{`{"type":"array","items":{"type":"array","items":{"type":"boolean"}}}`,
			[]string{`[]`, `[[],[true,false]]`},
			[]string{`[[1]]`, `[true]`}},
		{`{"type":"string","minLength":2,"maxLength":3}`,
			[]string{`"ab"`, `"abc"`, `"é\n"`, `"😀😀"`, `"\u00e9x"`},
			[]string{`"a"`, `"abcd"`, `""`}},
		{`{"anyOf":[{"type":"string"},{"type":"null"},{"type":"integer"},{"type":"number"}]}`,
			[]string{`"x"`, `null`, `1`, `1.5`},
			[]string{`true`, `{}`}},
		{`{"type":["string","null"]}`, []string{`"x"`, `null`}, []string{`1`}},
		{`{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"]}},"$ref":"#/$defs/node"}`,
			[]string{`{"v":1,"next":null}`, `{"v":1,"next":{"v":2,"next":null}}`},
			[]string{`{"v":1}`, `{"v":1,"next":{"v":2}}`}},
		{`{"type":"object","additionalProperties":{"type":"integer"}}`,
			[]string{`{}`, `{"a":1,"b":2}`},
			[]string{`{"a":"x"}`}},
		{`{"type":"object"}`, []string{`{}`, `{"a":[1,{"b":"c"}]}`}, []string{`[]`}},
		{`{}`, []string{`{}`, `[1]`, `"s"`, `1`, `true`, `null`}, []string{`tru`, `nul`, ``}},
		{`true`, []string{`1`}, nil},
		{diamond.String(), []string{`12`}, []string{`1.5`, `"a"`}},
		{`{"type":"integer","minimum":10,"maximum":200}`,
			[]string{`10`, `99`, `150`, `200`, `19`},
			[]string{`9`, `201`, `0`, `-1`, `1000`, `05`, `300`, `2000`, `10.5`}},
		{`{"type":"integer","exclusiveMinimum":0}`, []string{`1`, `5`, `123456789`}, []string{`0`, `-1`, `-0`}},
		{`{"type":"integer","minimum":-5,"maximum":-2}`, []string{`-2`, `-5`, `-3`}, []string{`-1`, `-6`, `-0`, `0`, `2`, `-50`}},
		{`{"type":"integer","maximum":3.5}`, []string{`-100`, `3`, `0`, `-0`}, []string{`4`, `10`}},
		{`{"type":"integer","exclusiveMaximum":9223372036854775807}`, []string{`9223372036854775806`}, []string{`99999999999999999999`}},
		{`{"type":["integer","null"],"minimum":1}`, []string{`1`, `null`}, []string{`0`}},
		// number ranges, as xgrammar's range expression: no exponent, at
		// most 6 fraction digits, bounds exact on that grid
		{`{"type":"number","minimum":0.5,"maximum":2}`,
			[]string{`0.5`, `0.50`, `1`, `1.999999`, `2`, `2.000000`, `0.500001`},
			[]string{`0.499999`, `2.000001`, `0.4`, `3`, `-1`, `1e0`, `1.5E0`, `1.0000001`, `-0`, `0`, `20`}},
		{`{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1}`,
			[]string{`0.000001`, `0.5`, `0.999999`},
			[]string{`0`, `0.0`, `-0.5`, `1`, `1.0`, `0.0000001`, `-0`}},
		{`{"type":"number","minimum":-1.25}`,
			[]string{`-1.25`, `-1.2`, `-0`, `0`, `-0.000`, `12345678901234567`, `3.141592`},
			[]string{`-1.250001`, `-1.3`, `-2`, `-12`, `3.1415926`, `1e3`}},
		{`{"type":"number","maximum":-0.001}`, []string{`-0.001`, `-5`, `-1000.5`}, []string{`-0.0009`, `-0`, `0`, `1`}},
		{`{"type":"number","exclusiveMaximum":1e-7}`, []string{`0`, `-0`, `-3.5`}, []string{`0.000001`, `1`}},
		{`{"type":"number","maximum":1e400,"minimum":-1e400}`, []string{`-9223372036854775807.999999`, `9223372036854775807.999999`, `0`}, []string{`9223372036854775808`, `1e400`}},
		{`{"type":["number","integer"],"minimum":2,"maximum":3}`, []string{`2`, `2.5`, `3`}, []string{`1`, `3.5`, `4`}},
		{`{"anyOf":[{"type":"number","maximum":1},{"type":"integer","minimum":10}]}`, []string{`0.5`, `1`, `10`, `11`}, []string{`1.5`, `10.5`, `5`}},
		{`{"type":"object","properties":{"q\"k":{"type":"string"}},"required":["q\"k"]}`,
			[]string{`{"q\"k":""}`}, []string{`{"qk":""}`}},
	}
	runSchemaCases(t, cases)
}

// manyObjects is an anyOf of n objects, each with a property of its own.
func manyObjects(n int) string {
	var b strings.Builder
	b.WriteString(`{"anyOf":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"object","properties":{"p%d":{"type":"integer"}},"required":["p%d"]}`, i, i)
	}
	b.WriteString(`]}`)
	return b.String()
}

// anyOfSchemas are anyOf and oneOf schemas whose alternatives start alike
// (several live alternatives at once).
var anyOfSchemas = []schemaCase{
	{`{"anyOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},{"type":"object","properties":{"b":{"type":"string"}},"required":["b"]}]}`,
		[]string{`{"a":1}`, `{"b":"x"}`, `{ "b" : "" }`},
		[]string{`{"a":"x"}`, `{"b":1}`, `{}`, `{"a":1,"b":"x"}`, `{"c":1}`}},
	{`{"oneOf":[{"properties":{"kind":{"const":"circle"},"r":{"type":"number"}},"required":["kind","r"]},{"properties":{"kind":{"const":"rect"},"w":{"type":"number"},"h":{"type":"number"}},"required":["kind","w","h"]}]}`,
		[]string{`{"kind":"circle","r":1.5}`, `{"kind":"rect","w":1,"h":2}`},
		[]string{`{"kind":"circle","w":1,"h":2}`, `{"kind":"rect","r":1}`, `{"kind":"rect","w":1}`, `{"kind":"square","r":1}`}},
	{`{"anyOf":[{"properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"a":{"type":"string"},"b":{"type":"null"}},"required":["a"]}]}`,
		[]string{`{"a":1}`, `{"a":"x"}`, `{"a":"x","b":null}`},
		[]string{`{"a":1,"b":null}`, `{"b":null}`, `{"a":null}`}},
	{`{"anyOf":[{"enum":["red","green"]},{"enum":["blue","greenish"]},{"type":"string","maxLength":2}]}`,
		[]string{`"red"`, `"green"`, `"greenish"`, `"blue"`, `"gr"`, `""`},
		[]string{`"gree"`, `"abc"`, `"greenis"`, `"blues"`}},
	{`{"anyOf":[{"type":"array","items":{"type":"integer"}},{"type":"array","items":{"type":"string"},"minItems":2}]}`,
		[]string{`[]`, `[1,2]`, `["a","b"]`},
		[]string{`["a"]`, `[1,"a"]`, `["a",1]`}},
	{`{"anyOf":[{"const":10},{"type":"integer","minimum":100},{"enum":[1.5,"x"]}]}`,
		[]string{`10`, `100`, `150`, `1.5`, `"x"`},
		[]string{`11`, `99`, `1`, `10.5`, `1.50`}},
	{`{"type":"array","items":{"anyOf":[{"type":"string","maxLength":3},{"type":"string","minLength":5}]}}`,
		[]string{`["ab","abcdef",""]`, `["abc","abcde"]`},
		[]string{`["abcd"]`}},
	{`{"type":"array","minItems":1,"items":{"anyOf":[{"properties":{"name":{"enum":["f"]},"parameters":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}},"required":["name","parameters"]},{"properties":{"name":{"enum":["fg"]},"parameters":{"type":"object"}},"required":["name","parameters"]}]}}`,
		[]string{`[{"name":"f","parameters":{"x":1}},{"name":"fg","parameters":{}}]`, `[{"name":"fg","parameters":{"y":[1]}}]`},
		[]string{`[]`, `[{"name":"f","parameters":{}}]`, `[{"name":"h","parameters":{}}]`, `[{"parameters":{},"name":"f"}]`}},
	{`{"anyOf":[{},{"type":"object","properties":{"a":{"type":"null"}}}]}`,
		[]string{`{}`, `{"a":1}`, `[1]`, `"s"`, `null`}, nil},
	{`{"oneOf":[{"type":"null"},{"const":null},{"type":["null","boolean"]}]}`,
		[]string{`null`, `true`}, []string{`nul`, `1`}},
	{`{"$defs":{"t":{"anyOf":[{"type":"object","properties":{"l":{"$ref":"#/$defs/t"},"r":{"$ref":"#/$defs/t"}},"required":["l","r"]},{"type":"object","properties":{"v":{"type":"integer"}},"required":["v"]}]}},"$ref":"#/$defs/t"}`,
		[]string{`{"v":1}`, `{"l":{"v":1},"r":{"l":{"v":2},"r":{"v":3}}}`},
		[]string{`{"l":{"v":1}}`, `{"v":1,"l":{"v":1}}`}},
	{manyObjects(MaxLive),
		[]string{`{"p0":1}`, fmt.Sprintf(`{"p%d":1}`, MaxLive-1)},
		[]string{`{"p0":"x"}`, fmt.Sprintf(`{"p%d":1}`, MaxLive)}},
}

// TestAnyOf checks anyOf and oneOf alternatives that start alike, and that
// a State never follows more than MaxLive threads: nested alternatives
// that would multiply past it keep the first ones, and what they accept
// still matches the schema.
func TestAnyOf(t *testing.T) {
	runSchemaCases(t, anyOfSchemas)
	walks := rand.New(rand.NewPCG(7, 8))
	for _, c := range anyOfSchemas {
		g, err := Compile([]byte(c.schema))
		if err != nil {
			continue // reported by runSchemaCases
		}
		complete := 0
		for i := range 4 {
			if _, ok := walk(t, g, c.schema, walks, []int{0, 5, 40, 400}[i]); ok {
				complete++
			}
		}
		if complete == 0 {
			t.Errorf("%.80s: no walk completed", c.schema)
		}
	}
	// 12 objects, each of whose "a" is one of 12 objects: 144 threads
	// after `{"a":{`, capped at MaxLive.
	var b strings.Builder
	b.WriteString(`{"$defs":{"in":` + manyObjects(12) + `},"anyOf":[`)
	for i := range 12 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"object","properties":{"a":{"$ref":"#/$defs/in"},"q%d":{"type":"null"}},"required":["a","q%d"]}`, i, i)
	}
	b.WriteString(`]}`)
	schema := b.String()
	g, err := Compile([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	st := g.Start()
	if !st.FeedBytes([]byte(`{"a":{`)) {
		t.Fatal("prefix rejected")
	}
	if n := len(st.ends); n != MaxLive {
		t.Fatalf("%d threads, want %d", n, MaxLive)
	}
	ok := `{"a":{"p0":1},"q0":null}`
	if fed, end := accepts(g, ok); !fed || !end {
		t.Fatalf("%s not accepted", ok)
	}
	checkValid(t, schema, ok)
	// A key that only the dropped threads (outer 11, inner 8..11) would take.
	if fed, _ := accepts(g, `{"a":{"p11":1},"q11":null}`); fed {
		t.Fatal("a dropped alternative was followed")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, dive := range []int{5, 40} {
		walk(t, g, schema, rng, dive)
	}
}

func TestCompileErrors(t *testing.T) {
	deep := strings.Repeat(`{"type":"array","items":`, MaxSchemaDepth) + `{}` + strings.Repeat(`}`, MaxSchemaDepth)
	cases := []struct{ schema, keyword, msg string }{
		{`{"type":"string","pattern":"a\\bb"}`, "pattern", "word boundaries"},
		{`{"type":"string","pattern":"a(?=b)"}`, "pattern", "lookaround"},
		{`{"type":"string","format":"date","pattern":"x"}`, "pattern", `with format "date": unsupported intersection`},
		{`{"type":"string","pattern":"x","maxLength":3}`, "maxLength", "together with pattern"},
		{`{"allOf":[{}]}`, "allOf", "not supported"},
		{`{"type":"array","prefixItems":[{}]}`, "prefixItems", "not supported"},
		{`{"type":"object","properties":{"a":{}},"additionalProperties":true}`, "additionalProperties", "only false"},
		{`{"type":"thing"}`, "type", "unknown type"},
		{manyObjects(MaxLive + 1), "anyOf", "more than 128"},
		{`{"$ref":"http://x"}`, "$ref", "only #"},
		{`{"$ref":"#/$defs/missing"}`, "$ref", "not found"},
		{`{"type":"object","required":["x"]}`, "required", "not among"},
		{`{"enum":[]}`, "enum", "non-empty"},
		{`{"type":"string","minLength":3,"maxLength":2}`, "maxLength", "less than"},
		{`{"type":"integer","minimum":3,"maximum":2.5}`, "minimum", "no integer"},
		{`{"type":"number","minimum":1,"maximum":0.5}`, "minimum", "no number of at most 6 fraction digits"},
		{`{"type":"number","exclusiveMinimum":1,"exclusiveMaximum":1.0000001}`, "minimum", "no number of at most 6 fraction digits"},
		{`{"type":"number","minimum":1e30}`, "minimum", "64-bit integer part"},
		{`{"type":"number","exclusiveMinimum":1e400}`, "exclusiveMinimum", "64-bit integer part"},
		{`{"type":"number","maximum":-1e30}`, "maximum", "64-bit integer part"},
		{`{"type":"number","maximum":"1"}`, "maximum", "must be a number"},
		{`{"type":"integer","minimum":"0"}`, "minimum", "must be a number"},
		{`false`, "", "accepts nothing"},
		{`[1]`, "", "must be an object"},
		{`{"type":`, "", "not valid JSON"},
		{`{} {}`, "", "data after"},
		{deep, "", "nested deeper"},
		{`{"description":"` + strings.Repeat("x", MaxSchemaBytes) + `"}`, "", "bytes, more than"},
		{`{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`, "anyOf", "refer to themselves"},
	}
	for _, c := range cases {
		_, err := Compile([]byte(c.schema))
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%.60s: err %v, want *Error", c.schema, err)
			continue
		}
		if e.Keyword != c.keyword || !strings.Contains(e.Error(), c.msg) {
			t.Errorf("%.60s: %v (keyword %q), want keyword %q and %q", c.schema, err, e.Keyword, c.keyword, c.msg)
		}
	}
}

// FuzzGrammar compiles arbitrary schemas and feeds arbitrary outputs: no
// panic, and every output the automaton accepts as complete is valid JSON
// (encoding/json).
func FuzzGrammar(f *testing.F) {
	f.Add(`{"type":"object","properties":{"a":{"type":"string","maxLength":3}},"required":["a"]}`, `{"a":"xy"}`)
	f.Add(`{"enum":[1,"a",null,[1]]}`, `[1]`)
	f.Add(`{"anyOf":[{"type":"integer"},{"type":"array","items":{"$ref":"#"}}]}`, `[[1],[]]`)
	f.Add(`{"anyOf":[{"properties":{"a":{"type":"integer"}}},{"properties":{"a":{"type":"string"}}},{"enum":[{"a":1}]}]}`, `{"a":1}`)
	f.Add(``, `{"a":[1e5,-0.5,"\u00e9"]}`)
	f.Add(`{"type":"number","minimum":-2.5,"exclusiveMaximum":1e1}`, `-2.499999`)
	f.Add(`{"type":"string","pattern":"[a-z\"]{1,3}\\d"}`, `"a\"\u00622"`)
	f.Add(`{"type":"object","properties":{"d":{"format":"date-time"},"e":{"type":"string","format":"email"}}}`, `{"d":"2024-01-01T00:00:00Z","e":"a@b.cd"}`)
	f.Add(`{"type":"string","pattern":"[\\x{10000}-\\x{10FFFF}]"}`, `"\ud83d\ude00"`)
	f.Fuzz(func(t *testing.T, schema, out string) {
		g := JSONObject()
		if schema != "" {
			var err error
			if g, err = Compile([]byte(schema)); err != nil {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("error %T %v", err, err)
				}
				return
			}
		}
		st := g.Start()
		for i := range len(out) {
			if !st.Feed(out[i]) {
				return
			}
			_ = st.AppendKey(nil)
		}
		if st.Accepting() && !json.Valid([]byte(out)) {
			t.Fatalf("schema %q: %q accepted, not valid JSON", schema, out)
		}
	})
}

package dsv4

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestArrayParser feeds tool_choice "required" array texts to arrayParser
// in pieces of every size: the calls (index order, name, arguments byte
// for byte) do not depend on the cut, each call's name comes once before
// its arguments, and elements cut before their name give nothing.
func TestArrayParser(t *testing.T) {
	type call struct{ Name, Args string }
	cases := []struct {
		text string
		want []call
	}{
		{`[{"name":"get_weather","parameters":{"city":"Paris"}}]`, []call{{"get_weather", `{"city":"Paris"}`}}},
		{"[ {\"name\": \"a\" ,\n \"parameters\" : {\"q\": \"}],{\\\"\", \"n\": [1, {\"x\": []}]} } ,{\"name\":\"b-2\",\"parameters\":{}}\t]",
			[]call{{"a", `{"q": "}],{\"", "n": [1, {"x": []}]}`}, {"b-2", `{}`}}},
		{`[{"name":"s","parameters":"text, with } ]"},{"name":"n","parameters":12.5e3},{"name":"t","parameters":true}]`,
			[]call{{"s", `"text, with } ]"`}, {"n", `12.5e3`}, {"t", `true`}}},
		{`[{"name":"a","parameters":{"x":1}},{"name":"b","parameters":{"y":`, []call{{"a", `{"x":1}`}, {"b", `{"y":`}}},
		{`[{"name":"a","parameters":{}},{"name":"b`, []call{{"a", `{}`}}},
		{`[{"name":"a"`, []call{{"a", ``}}},
		{`[`, nil},
	}
	for _, c := range cases {
		for size := 1; size <= len(c.text); size++ {
			p := &arrayParser{p: plainParser{}}
			var ds []ChatDelta
			for i := 0; i < len(c.text); i += size {
				ds = append(ds, p.Feed(c.text[i:min(i+size, len(c.text))])...)
			}
			ds = append(ds, p.Finish()...)
			var got []call
			for _, d := range ds {
				if d.Content != "" {
					t.Fatalf("%q by %d: content %q", c.text, size, d.Content)
				}
				for _, tc := range d.ToolCalls {
					switch {
					case tc.Function.Name != "":
						if tc.Index != len(got) {
							t.Fatalf("%q by %d: call %q at index %d, want %d", c.text, size, tc.Function.Name, tc.Index, len(got))
						}
						got = append(got, call{Name: tc.Function.Name})
					case tc.Index != len(got)-1:
						t.Fatalf("%q by %d: arguments for index %d, current %d", c.text, size, tc.Index, len(got)-1)
					}
					if len(got) > 0 {
						got[len(got)-1].Args += tc.Function.Arguments
					}
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("%q by %d: got %+v, want %+v", c.text, size, got, c.want)
			}
			for _, g := range got {
				if c.text[len(c.text)-1] == ']' && !json.Valid([]byte(g.Args)) {
					t.Fatalf("%q: arguments %q not JSON", c.text, g.Args)
				}
			}
		}
	}
}

// TestToolArraySchema checks tool_choice "required"'s array schema over
// several tools: each tool's parameters (none: any object) under its name,
// $defs gathered at the top, and the refusals (a conflicting $defs, a
// keyword outside the subset naming the tool, more than MaxLive tools).
func TestToolArraySchema(t *testing.T) {
	tool := func(name, params string) Tool {
		return Tool{Type: "function", Function: FunctionDecl{Name: name, Parameters: json.RawMessage(params)}}
	}
	defs := `{"$defs":{"c":{"type":"string","maxLength":4}},"type":"object","properties":{"city":{"$ref":"#/$defs/c"}},"required":["city"]}`
	r := &ChatRequest{ToolChoice: &ToolChoice{Mode: "required"}, Tools: []Tool{
		tool("get_weather", defs), tool("get_time", defs), tool("ping", ""),
		tool("get", `{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`)}}
	con, name, err := r.toolConstraint(nil)
	if err != nil || name != "" || con == nil {
		t.Fatalf("got %v %q %v", con, name, err)
	}
	for text, ok := range map[string]bool{
		`[{"name":"get_weather","parameters":{"city":"Oslo"}}]`:                              true,
		`[{"name":"get_time","parameters":{"city":"Rome"}},{"name":"ping","parameters":{}}]`: true,
		`[{"name":"ping","parameters":{"any":[1]}},{"name":"get","parameters":{"id":3}}]`:    true,
		`[{"name":"get_weather","parameters":{"city":"Paris"}}]`:                             false, // maxLength 4
		`[{"name":"get","parameters":{"city":"Oslo"}}]`:                                      false,
		`[{"name":"gets","parameters":{}}]`:                                                  false,
		`[]`:                                                                                 false,
		`[{"parameters":{},"name":"ping"}]`:                                                  false,
	} {
		st := con.g.Start()
		if got := st.FeedBytes([]byte(text)) && st.Accepting(); got != ok {
			t.Errorf("%s: accepted %v, want %v", text, got, ok)
		}
	}
	for _, c := range []struct {
		tools []Tool
		param string
	}{
		{[]Tool{tool("a", defs), tool("b", `{"$defs":{"c":{"type":"integer"}},"type":"object"}`)}, "tools[1].function.parameters"},
		{[]Tool{tool("a", `{}`), tool("b", `{"type":"object","properties":{"x":{"type":"string","pattern":"a(?=b)"}}}`)}, "tools[1].function.parameters"},
		{make([]Tool, 129), "tools"},
		{[]Tool{tool("a", `{}`), tool("b", `{"$defs":{"d/x":{"allOf":[]}},"type":"object","properties":{"y":{"$ref":"#/$defs/d~1x"}}}`)}, "tools[1].function.parameters"},
		{[]Tool{tool("a", `{}`), tool("b", `{}`), tool("c", `{"type":"object","properties":{"x":{"type":"string","format":"bogus"}}}`)}, "tools[2].function.parameters"},
	} {
		for i := range c.tools {
			if c.tools[i].Function.Name == "" {
				c.tools[i] = tool(string(rune('a'+i%26))+string(rune('a'+i/26)), "")
			}
		}
		r := &ChatRequest{ToolChoice: &ToolChoice{Mode: "required"}, Tools: c.tools}
		_, _, err := r.toolConstraint(nil)
		pe, ok := err.(*ParamError)
		if !ok || pe.Param != c.param {
			t.Errorf("got %v, want a ParamError on %s", err, c.param)
		}
		if c.param == "tools[2].function.parameters" && (pe == nil || !strings.Contains(pe.Msg, "schema at /properties/x:")) {
			t.Errorf("got %v, want the path within the tool's parameters", err)
		}
	}
}

// TestToolArrayOneTool: tool_choice "required" with exactly one tool is
// vLLM's array too (get_json_schema_from_tools builds it whatever the
// number of tools), so the one tool may be called several times; at least
// one call, and only that tool's.
func TestToolArrayOneTool(t *testing.T) {
	r := &ChatRequest{ToolChoice: &ToolChoice{Mode: "required"}, Tools: []Tool{{Type: "function", Function: FunctionDecl{Name: "get_weather",
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}}}}
	con, name, err := r.toolConstraint(nil)
	if err != nil || name != "" || con == nil {
		t.Fatalf("got %v %q %v, want the array constraint", con, name, err)
	}
	for text, ok := range map[string]bool{
		`[{"name":"get_weather","parameters":{"city":"Oslo"}}]`:                                                     true,
		`[{"name":"get_weather","parameters":{"city":"Oslo"}},{"name":"get_weather","parameters":{"city":"Rome"}}]`: true,
		`[{"name":"get_weather","parameters":{}}]`:                                                                  false,
		`[{"name":"get_time","parameters":{"city":"Oslo"}}]`:                                                        false,
		`{"city":"Oslo"}`: false,
		`[]`:              false,
	} {
		st := con.g.Start()
		if got := st.FeedBytes([]byte(text)) && st.Accepting(); got != ok {
			t.Errorf("%s: accepted %v, want %v", text, got, ok)
		}
	}
	// Two calls of the one tool come back as two calls.
	p := &arrayParser{p: plainParser{}}
	ds := p.Feed(`[{"name":"get_weather","parameters":{"city":"Oslo"}},{"name":"get_weather","parameters":{"city":"Rome"}}]`)
	ds = append(ds, p.Finish()...)
	var calls []string
	for _, d := range ds {
		for _, tc := range d.ToolCalls {
			if tc.Function.Name != "" {
				calls = append(calls, tc.Function.Name)
			}
		}
	}
	if !reflect.DeepEqual(calls, []string{"get_weather", "get_weather"}) {
		t.Fatalf("calls %v", calls)
	}
}

// TestToolArrayCost: each tool's parameters are compiled once, together,
// under one schema's pattern budget (compiled alone first, 128 tools with
// a 0.2 s pattern each took 12.9 s per compile before being refused).
func TestToolArrayCost(t *testing.T) {
	var tools []Tool
	for i := range 128 {
		p := fmt.Sprintf(`{"type":"object","properties":{"x":{"type":"string","pattern":"(\\p{L}*\\p{N}){0,250}|x%d"}}}`, i)
		tools = append(tools, Tool{Type: "function", Function: FunctionDecl{Name: fmt.Sprintf("f%d", i), Parameters: json.RawMessage(p)}})
	}
	r := &ChatRequest{ToolChoice: &ToolChoice{Mode: "required"}, Tools: tools}
	start := time.Now()
	_, _, err := r.toolConstraint(nil)
	if pe, ok := err.(*ParamError); !ok || !strings.HasPrefix(pe.Param, "tools[") || !strings.Contains(pe.Msg, "steps") {
		t.Errorf("got %v, want a ParamError on a tool's parameters over the pattern budget", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v", d)
	}
}

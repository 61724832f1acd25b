package dsv4_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dsv4go/dsv4go/dsv4"
)

// heavySchema is an object of n string properties, each with its own
// pattern: n = 36 takes about 0.35 s to compile on the 2-core dev box,
// near MaxSchemaPatternWork.
func heavySchema(n int) string {
	var props []string
	for i := range n {
		props = append(props, fmt.Sprintf(`"p%d":{"type":"string","pattern":"(\\p{Lu}\\p{Ll}*){0,40}|x%d"}`, i, i))
	}
	return `{"type":"object","properties":{` + strings.Join(props, ",") + `}}`
}

// BenchmarkConstraintSetup times the setup of a repeated chat request
// whose output is constrained (Engine.ChatPrompt: validation, the prompt's
// rendering and tokenization, and the constraint): a json_schema near the
// pattern-work limit, a small one, a regex and tool_choice "required"
// over 8 tools. Every iteration sends the same request, as a client
// repeating its schema does: with the constraint cache off (compiled once
// per request) and on (compiled by a first request, before the timing).
func BenchmarkConstraintSetup(b *testing.B) {
	m := tinyModel(b)
	engine := func(cacheBytes int64) *dsv4.Engine {
		e, err := dsv4.NewEngine(m, dsv4.EngineOptions{ConstraintCacheBytes: cacheBytes})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = e.Close(context.Background()) })
		return e
	}
	engines := []struct {
		name string
		e    *dsv4.Engine
	}{{"cache_off", engine(-1)}, {"cache_on", engine(0)}}
	var tools []dsv4.Tool
	for i := range 8 {
		tools = append(tools, dsv4.Tool{Type: "function", Function: dsv4.FunctionDecl{Name: fmt.Sprintf("tool_%d", i),
			Parameters: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"city":{"type":"string","pattern":"[A-Z][a-z]{1,20}"},"n%d":{"type":"integer","minimum":0,"maximum":%d}},"required":["city"]}`, i, 10*i+5))}})
	}
	for _, c := range []struct {
		name string
		edit func(*dsv4.ChatRequest)
	}{
		{"heavy_schema", func(r *dsv4.ChatRequest) { r.ResponseFormat = responseFormat(heavySchema(36)) }},
		{"person_schema", func(r *dsv4.ChatRequest) { r.ResponseFormat = responseFormat(structuredSchemas[1].schema) }},
		{"regex", func(r *dsv4.ChatRequest) {
			r.StructuredOutputs = &dsv4.StructuredOutputs{Regex: ptr(`(\p{Lu}\p{Ll}*){0,40}|[0-9]{3}-[0-9]{4}`)}
		}},
		{"required_8_tools", func(r *dsv4.ChatRequest) {
			r.Tools, r.ToolChoice = tools, &dsv4.ToolChoice{Mode: "required"}
		}},
	} {
		for _, en := range engines {
			b.Run(c.name+"/"+en.name, func(b *testing.B) {
				setup := func() {
					req := chatReq("Describe a person as JSON.", "", 32)
					c.edit(req)
					if _, err := en.e.ChatPrompt(req); err != nil {
						b.Fatal(err)
					}
				}
				setup()
				for b.Loop() {
					setup()
				}
			})
		}
	}
}

package dsv4_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

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

// TestConstraintCacheCancelledFirst: the request that starts compiling a
// constraint is cancelled while others wait for the same compilation:
// the waiters get the constraint and complete, none gets a context error
// (the compilation does not depend on the first request's context), and
// the constraint was compiled once.
func TestConstraintCacheCancelledFirst(t *testing.T) {
	e := tinyModelEngine(t, tinyModel(t), dsv4.EngineOptions{})
	rf := string(responseFormat(heavySchema(6)))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		stream, err := e.ChatStream(ctx, chatReq("Describe a person as JSON.", rf, 8))
		if err != nil {
			return // a cancelled context may end it at once
		}
		for _, err := range stream {
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled request: %v", err)
			}
		}
	})
	for range 4 {
		wg.Go(func() {
			time.Sleep(time.Millisecond)
			if _, err := e.Chat(context.Background(), chatReq("Describe a person as JSON.", rf, 8)); err != nil {
				t.Errorf("waiting request: %v", err)
			}
		})
	}
	wg.Wait()
	if s := e.Stats(); s.ConstraintCacheMisses != 1 || s.ConstraintCacheHits != 4 || s.ConstraintCacheEntries != 1 {
		t.Fatalf("compilations %d, hits %d, entries %d; want 1, 4, 1", s.ConstraintCacheMisses, s.ConstraintCacheHits, s.ConstraintCacheEntries)
	} else if s.ConstraintCacheBytes <= 0 || s.ConstraintCacheBytes > s.ConstraintCacheBudget || s.ConstraintCacheBudget != dsv4.DefaultConstraintCacheBytes {
		t.Fatalf("bytes %d, budget %d", s.ConstraintCacheBytes, s.ConstraintCacheBudget)
	}
	off := tinyModelEngine(t, tinyModel(t), dsv4.EngineOptions{ConstraintCacheBytes: -1})
	if _, err := off.ChatPrompt(chatReq("q", rf, 8)); err != nil {
		t.Fatal(err)
	}
	if s := off.Stats(); s.ConstraintCacheBudget != 0 || s.ConstraintCacheMisses != 0 || s.ConstraintCacheEntries != 0 {
		t.Fatalf("cache off: %+v", s)
	}
}

// TestConstraintCacheSettlesAfterRequests: a kept constraint whose masks
// grow past the cache's budget while a request decodes (each mask over
// DeepSeek-V4's vocabulary is 16 KiB) is dropped once the request ends,
// without waiting for another request to use the cache: the bytes kept
// are back within the budget.
func TestConstraintCacheSettlesAfterRequests(t *testing.T) {
	const budget = 48 << 10
	e := tinyModelEngine(t, tinyModel(t), dsv4.EngineOptions{ConstraintCacheBytes: budget})
	rf := `{"type":"json_schema","json_schema":{"name":"p","schema":{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"]}}}`
	if _, err := e.Chat(context.Background(), chatReq("Describe a person as JSON.", rf, 12)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		s := e.Stats()
		if s.ConstraintCacheBytes <= budget {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the request: %d bytes kept in %d entries, budget %d", s.ConstraintCacheBytes, s.ConstraintCacheEntries, budget)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

package main

import (
	"context"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/internal/tinymodel"
)

// TestConstraintCacheFlag: --constraint-cache-mb (MiB, default 512, 0:
// off), else vLLM's VLLM_XGRAMMAR_CACHE_MB when set, give the engine's
// ConstraintCacheBytes; bad values are errors naming their source.
func TestConstraintCacheFlag(t *testing.T) {
	def := int64(dsv4.DefaultConstraintCacheBytes >> 20)
	tests := []struct {
		mb   int64
		set  bool
		env  string
		want int64
		err  string
	}{
		{mb: def, want: dsv4.DefaultConstraintCacheBytes},
		{mb: 64, set: true, want: 64 << 20},
		{mb: 0, set: true, want: -1},
		{mb: def, env: "0", want: -1},
		{mb: def, env: " 128 ", want: 128 << 20},
		{mb: 64, set: true, env: "128", want: 64 << 20}, // the flag wins
		{mb: -1, set: true, err: "--constraint-cache-mb must be between 0"},
		{mb: 1 << 50, set: true, err: "--constraint-cache-mb must be between 0"},
		{mb: def, env: "-5", err: "VLLM_XGRAMMAR_CACHE_MB must be between 0"},
		{mb: def, env: "lots", err: "VLLM_XGRAMMAR_CACHE_MB must be an integer"},
	}
	for _, tc := range tests {
		got, err := constraintCacheBytes(tc.mb, tc.set, tc.env)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%d %v %q: got %d, %v; want an error %q", tc.mb, tc.set, tc.env, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%d %v %q: got %d, %v; want %d", tc.mb, tc.set, tc.env, got, err, tc.want)
		}
	}
}

// TestConstraintCacheMetrics: /metrics exports the engine's cache of
// compiled constraints: a json_schema request sent twice is one miss and
// one hit, one entry of some bytes, under the default budget; with the
// cache off every series is 0.
func TestConstraintCacheMetrics(t *testing.T) {
	m := tinymodel.Load(t)
	body := `{"messages":[{"role":"user","content":"Describe a person as JSON."}],"temperature":0,"max_tokens":4,` +
		`"response_format":{"type":"json_schema","json_schema":{"name":"p","schema":{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0}}}}}}`
	for _, tc := range []struct {
		cacheBytes int64
		want       map[string]string // "+": > 0
	}{
		{0, map[string]string{"dsv4_constraint_cache_misses_total": "1", "dsv4_constraint_cache_hits_total": "1",
			"dsv4_constraint_cache_entries": "1", "dsv4_constraint_cache_bytes": "+",
			"dsv4_constraint_cache_budget_bytes": strconv.Itoa(dsv4.DefaultConstraintCacheBytes)}},
		{-1, map[string]string{"dsv4_constraint_cache_misses_total": "0", "dsv4_constraint_cache_hits_total": "0",
			"dsv4_constraint_cache_entries": "0", "dsv4_constraint_cache_bytes": "0", "dsv4_constraint_cache_budget_bytes": "0"}},
	} {
		eng, err := dsv4.NewEngine(m, dsv4.EngineOptions{ConstraintCacheBytes: tc.cacheBytes})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(NewServer(eng, ServerConfig{ModelName: "dsv4-tiny"}).Handler())
		ts := srv.URL
		for range 2 {
			if code, b := post(t, ts, "/v1/chat/completions", body); code != 200 {
				t.Fatalf("%d %s", code, b)
			}
		}
		_, metrics := roundTrip(t, "GET", ts+"/metrics", "")
		for name, want := range tc.want {
			mm := regexp.MustCompile(`(?m)^` + name + `\{[^}]*\} (\S+)`).FindSubmatch(metrics)
			switch {
			case mm == nil:
				t.Errorf("cache %d: /metrics has no %s", tc.cacheBytes, name)
			case want == "+":
				if v, err := strconv.ParseFloat(string(mm[1]), 64); err != nil || v <= 0 {
					t.Errorf("cache %d: %s = %s, want > 0", tc.cacheBytes, name, mm[1])
				}
			default:
				if v, err := strconv.ParseFloat(string(mm[1]), 64); err != nil || strconv.FormatFloat(v, 'f', -1, 64) != want {
					t.Errorf("cache %d: %s = %s, want %s", tc.cacheBytes, name, mm[1], want)
				}
			}
		}
		srv.Close()
		_ = eng.Close(context.Background())
	}
}

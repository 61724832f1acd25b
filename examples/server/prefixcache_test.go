package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/internal/tinymodel"
)

// TestPrefixCacheFlags: vLLM's --enable-prefix-caching /
// --no-enable-prefix-caching (on by default, the last one wins) and
// --prefix-cache-bytes (0 turns caching off) give the engine's
// PrefixCacheBytes.
func TestPrefixCacheFlags(t *testing.T) {
	tests := []struct {
		args []string
		want int64
	}{
		{nil, dsv4.DefaultPrefixCacheBytes},
		{[]string{"--no-enable-prefix-caching"}, -1},
		{[]string{"--no-enable-prefix-caching", "--enable-prefix-caching"}, dsv4.DefaultPrefixCacheBytes},
		{[]string{"--enable-prefix-caching", "--no-enable-prefix-caching"}, -1},
		{[]string{"--enable-prefix-caching=false"}, -1},
		{[]string{"--no-enable-prefix-caching=false"}, dsv4.DefaultPrefixCacheBytes},
		{[]string{"--prefix-cache-bytes", "0"}, -1},
		{[]string{"--prefix-cache-bytes", "1000000"}, 1000000},
		{[]string{"--no-enable-prefix-caching", "--prefix-cache-bytes", "1000000"}, -1},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			fs := flag.NewFlagSet("server", flag.ContinueOnError)
			var p prefixCacheFlags
			p.register(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if got := p.engineBytes(); got != tc.want {
				t.Errorf("PrefixCacheBytes %d, want %d", got, tc.want)
			}
		})
	}
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var p prefixCacheFlags
	p.register(fs)
	if err := fs.Parse([]string{"--enable-prefix-caching=maybe"}); err == nil {
		t.Error("--enable-prefix-caching=maybe accepted")
	}
}

// TestPromptTokensDetails: on the embedded tiny model, a repeated chat or
// completions request reports usage.prompt_tokens_details.cached_tokens =
// prompt_tokens with --enable-prompt-tokens-details (non-streaming and in
// the streamed usage chunk), the first request has no prompt_tokens_details,
// and without the flag no response has it; /metrics counts the queries and
// hits.
func TestPromptTokensDetails(t *testing.T) {
	m := tinymodel.Load(t)
	chat := `{"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"What is 17*23? Number only."}],"temperature":0%s}`
	compl := `{"prompt":"You are terse. 17*23=","max_tokens":3,"temperature":0%s}`
	stream := `,"stream":true,"stream_options":{"include_usage":true}`
	for _, details := range []bool{true, false} {
		t.Run("details="+strconv.FormatBool(details), func(t *testing.T) {
			eng, err := dsv4.NewEngine(m, dsv4.EngineOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close(context.Background())
			ts := httptest.NewServer(NewServer(eng, ServerConfig{ModelName: "dsv4-tiny", EnablePromptTokensDetails: details}).Handler())
			defer ts.Close()
			for _, tc := range []struct{ path, body string }{
				{"/v1/chat/completions", chat},
				{"/v1/completions", compl},
			} {
				for i, extra := range []string{"", stream, ""} {
					code, body := post(t, ts.URL, tc.path, strings.Replace(tc.body, "%s", extra, 1))
					if code != 200 {
						t.Fatalf("%s: %d %s", tc.path, code, body)
					}
					u := usageOf(t, body, extra != "")
					_, has := u["prompt_tokens_details"]
					if want := details && i > 0; has != want {
						t.Errorf("%s request %d: usage %v, want prompt_tokens_details %v", tc.path, i, u, want)
						continue
					}
					if has {
						d, _ := u["prompt_tokens_details"].(map[string]any)
						if d["cached_tokens"] != u["prompt_tokens"] {
							t.Errorf("%s request %d: usage %v, want all prompt tokens cached", tc.path, i, u)
						}
					}
				}
			}
			_, metrics := roundTrip(t, "GET", ts.URL+"/metrics", "")
			for _, name := range []string{"dsv4_prefix_cache_queries_total", "dsv4_prefix_cache_hits_total"} {
				mm := regexp.MustCompile(`(?m)^` + name + `\{[^}]*\} (\d+)`).FindSubmatch(metrics)
				if mm == nil || string(mm[1]) == "0" {
					t.Errorf("/metrics: %s missing or 0", name)
				}
			}
		})
	}
}

// usageOf returns the usage object of a response body, or of the last SSE
// event carrying one.
func usageOf(t *testing.T, body []byte, sse bool) map[string]any {
	t.Helper()
	datas := []string{string(body)}
	if sse {
		datas = nil
		for _, line := range strings.Split(string(body), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && d != "[DONE]" {
				datas = append(datas, d)
			}
		}
	}
	var u map[string]any
	for _, d := range datas {
		var v struct {
			Usage map[string]any `json:"usage"`
		}
		if err := json.Unmarshal([]byte(d), &v); err != nil {
			t.Fatalf("%v: %s", err, d)
		}
		if v.Usage != nil {
			u = v.Usage
		}
	}
	if u == nil {
		t.Fatalf("no usage in %s", body)
	}
	return u
}

// TestMockPrefixCache: the --mock backend is a dsv4.SnapshotBackend, so the
// prefix cache serves it as it serves a model (tools/openai_client_check.py
// checks cached_tokens against --mock too): a repeated prompt restores every
// prompt token, a prompt sharing a long prefix restores part of it, and the
// answers are those of the uncached engine.
func TestMockPrefixCache(t *testing.T) {
	var _ dsv4.SnapshotBackend = (*scriptBackend)(nil)
	ts := startServer(t, ServerConfig{EnablePromptTokensDetails: true}, dsv4.EngineOptions{}, 0)
	off := startServer(t, ServerConfig{}, dsv4.EngineOptions{PrefixCacheBytes: -1}, 0)
	system := strings.Repeat("You are a careful assistant. ", 30)
	body := func(user string) string {
		return `{"messages":[{"role":"system","content":"` + system + `"},{"role":"user","content":"` + user + `"}],"temperature":0}`
	}
	cached := func(u map[string]any) float64 {
		d, _ := u["prompt_tokens_details"].(map[string]any)
		f, _ := d["cached_tokens"].(float64)
		return f
	}
	for i, user := range []string{"count 5", "count 5", "count 7"} {
		code, b := post(t, ts.URL, "/v1/chat/completions", body(user))
		_, want := post(t, off.URL, "/v1/chat/completions", body(user))
		if code != 200 {
			t.Fatalf("%d: %s", code, b)
		}
		var got, ref struct {
			Choices []struct{ Message struct{ Content string } }
			Usage   map[string]any
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(want, &ref); err != nil {
			t.Fatal(err)
		}
		if got.Choices[0].Message.Content != ref.Choices[0].Message.Content {
			t.Errorf("request %d: %q, uncached %q", i, got.Choices[0].Message.Content, ref.Choices[0].Message.Content)
		}
		n, all := cached(got.Usage), got.Usage["prompt_tokens"].(float64)
		switch {
		case i == 0 && n != 0, i == 1 && n != all, i == 2 && (n <= 0 || n >= all):
			t.Errorf("request %d: usage %v", i, got.Usage)
		}
	}
}

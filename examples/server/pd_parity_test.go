package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dsv4go/dsv4go/disagg"
	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/internal/tinymodel"
	"github.com/dsv4go/dsv4go/models"
)

// parityBodyLimit is the request body limit of every server that
// startPDParity starts (ServerConfig, PrefillConfig, DecodeConfig and
// RouterConfig.MaxBodyBytes).
const parityBodyLimit = 64 << 10

// startPDParity starts, on the tiny model served as "dsv4-tiny" at the
// same context length and body limit, this server, a disagg decode server
// (with its prefill server) and a disagg router in PD mode in front of the
// pair; it returns their URLs.
func startPDParity(t *testing.T) (plainURL, decodeURL, routerURL string) {
	m := tinymodel.Load(t)
	eng, err := dsv4.NewEngine(m, dsv4.EngineOptions{MaxContext: models.TinyContextLength})
	if err != nil {
		t.Fatal(err)
	}
	p, err := disagg.NewPrefillServer(disagg.PrefillConfig{Model: m, Engine: eng, Name: "dsv4-tiny", ContextLength: models.TinyContextLength,
		MaxBodyBytes: parityBodyLimit})
	if err != nil {
		t.Fatal(err)
	}
	d, err := disagg.NewDecodeServer(disagg.DecodeConfig{Model: m, Name: "dsv4-tiny", ContextLength: models.TinyContextLength,
		MaxBodyBytes: parityBodyLimit})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	boot := p.StartBootstrap(ctx, lis)
	plain := httptest.NewServer(NewServer(eng, ServerConfig{ModelName: "dsv4-tiny", MaxBodyBytes: parityBodyLimit}).Handler())
	ps := httptest.NewServer(p.Handler())
	ds := httptest.NewServer(d.Handler())
	rt, err := disagg.NewRouter(disagg.RouterConfig{PD: true, HealthInterval: -1, Decode: []string{ds.URL}, MaxBodyBytes: parityBodyLimit,
		Prefill: []disagg.PrefillWorker{{URL: ps.URL, BootstrapPort: lis.Addr().(*net.TCPAddr).Port}}})
	if err != nil {
		t.Fatal(err)
	}
	rs := httptest.NewServer(rt.Handler())
	t.Cleanup(func() {
		for _, s := range []*httptest.Server{rs, ps, ds, plain} {
			s.Close()
		}
		rt.Close()
		cancel()
		<-boot
		p.Close()
		d.Close()
		eng.Close(context.Background())
	})

	return plain.URL, ds.URL, rs.URL
}

// TestPDErrorParity: a bad request gets the same answer (status and the
// whole OpenAI error object: message, type, param, code) from this server,
// from a disagg decode server and from a disagg router in PD mode, all
// serving the tiny model as "dsv4-tiny" at the same context length.
func TestPDErrorParity(t *testing.T) {
	plainURL, dsURL, rsURL := startPDParity(t)

	msgs := `"messages":[{"role":"user","content":"hi"}]`
	tools := `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`
	chat := func(body string) [3]string { return [3]string{"POST", "/v1/chat/completions", body} }
	cases := [][3]string{
		chat(`{`), chat(`not json`), chat(``), chat(`{"messages":`), chat(`[]`), chat(`"str"`), chat(`null`),
		chat(`{"messages":"hi"}`), chat(`{"messages":[]}`), chat(`{}`), chat(`{"messages":null}`),
		chat(`{"messages":[{"role":"wizard","content":"x"}]}`), chat(`{"messages":[{"role":"user","content":5}]}`),
		chat(`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`),
		chat(`{"messages":[1,2]}`), chat(`{"model":"gpt-4",` + msgs + `}`), chat(`{"model":5,` + msgs + `}`),
		chat(`{` + msgs + `,"max_tokens":-1}`), chat(`{` + msgs + `,"max_tokens":0}`), chat(`{` + msgs + `,"max_tokens":5000}`),
		chat(`{` + msgs + `,"max_tokens":"5"}`), chat(`{` + msgs + `,"max_tokens":1.5}`), chat(`{` + msgs + `,"max_completion_tokens":-5}`),
		chat(`{` + msgs + `,"temperature":-1}`), chat(`{` + msgs + `,"temperature":"hot"}`), chat(`{` + msgs + `,"top_p":1.5}`),
		chat(`{` + msgs + `,"top_k":-5}`), chat(`{` + msgs + `,"n":0}`), chat(`{` + msgs + `,"n":1000}`), chat(`{` + msgs + `,"n":"2"}`),
		chat(`{` + msgs + `,"n":"2","stream":true}`), chat(`{` + msgs + `,"stop":5}`), chat(`{` + msgs + `,"logit_bias":{"x":1}}`),
		chat(`{` + msgs + `,"top_logprobs":5}`), chat(`{` + msgs + `,"stream":"yes"}`), chat(`{` + msgs + `,"seed":"x"}`),
		chat(`{` + msgs + `,"tool_choice":"required"}`), chat(`{` + msgs + `,"tools":"x"}`),
		chat(`{` + msgs + `,` + tools + `,"tool_choice":{"type":"function","function":{"name":"nope"}}}`),
		chat(`{` + msgs + `,"response_format":{"type":"xml"}}`),
		chat(`{"messages":[{"role":"tool","content":"r","tool_call_id":"missing"}]}`),
		chat(`{"messages":[{"role":"user","content":"` + strings.Repeat("hello world ", 3000) + `"}]}`),
		// over the body limit: 413 request_too_large, also before a worker
		chat(`{"messages":[{"role":"user","content":"` + strings.Repeat("a", parityBodyLimit) + `"}]}`),
		{"POST", "/tokenize", `{"prompt":"` + strings.Repeat("a", parityBodyLimit) + `"}`},
		{"GET", "/nope", ""}, {"POST", "/v1/embeddings", "{}"}, {"GET", "/v1/chat/completions", ""}, {"POST", "/v1/models", ""},
	}
	answer := func(base string, c [3]string) string {
		resp, b := roundTrip(t, c[0], base+c[1], c[2])
		var e struct{ Error json.RawMessage }
		if json.Unmarshal(b, &e) != nil || e.Error == nil {
			return resp.Status + " (not an OpenAI error object) " + string(b)
		}
		return resp.Status + " " + string(e.Error)
	}
	for _, c := range cases {
		want := answer(plainURL, c)
		short := c[0] + " " + c[1] + " " + c[2]
		if len(short) > 100 {
			short = short[:100] + "…"
		}
		if strings.HasPrefix(want, "200") {
			t.Errorf("%s: this server answers %s", short, want)
		}
		for _, tg := range []struct{ name, url string }{{"decode", dsURL}, {"router", rsURL}} {
			if got := answer(tg.url, c); got != want {
				t.Errorf("%s:\n%s:\t%s\nserver:\t%s", short, tg.name, got, want)
			}
		}
	}
}

// TestPDTokenizeParity: POST /tokenize and /detokenize answer the same
// bytes (status, Content-Type and body) from this server, from a disagg
// decode server (the same code: internal/tokenizeapi) and through a disagg
// router in PD mode (forwarded to the decode server), for prompts, chats
// and bad requests.
func TestPDTokenizeParity(t *testing.T) {
	plainURL, dsURL, rsURL := startPDParity(t)
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	asst := `"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y"}]`
	tools := `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`
	tok := func(body string) [2]string { return [2]string{"/tokenize", body} }
	detok := func(body string) [2]string { return [2]string{"/detokenize", body} }
	cases := [][2]string{
		// answers
		tok(`{"prompt":"Hello, world! héllo 世界"}`), tok(`{"prompt":""}`),
		tok(`{"model":"dsv4-tiny","prompt":"x","add_special_tokens":false}`),
		tok(`{"prompt":"<｜begin▁of▁sentence｜>hi"}`),
		tok(`{` + msgs + `}`), tok(`{` + msgs + `,"add_generation_prompt":false}`),
		tok(`{` + msgs + `,` + tools + `}`), tok(`{` + msgs + `,"reasoning_effort":"max","chat_template_kwargs":{"thinking":true}}`),
		tok(`{` + asst + `,"continue_final_message":true,"add_generation_prompt":false}`),
		tok(`{"prompt":"x <｜User｜>","return_token_strs":true}`), tok(`{` + msgs + `,"return_token_strs":true}`),
		detok(`{"tokens":[]}`), detok(`{"tokens":[0,1,2,100,128821,128822]}`), detok(`{"model":"dsv4-tiny","tokens":[5000,6000]}`),
		// errors
		tok(`{"prompt":`), tok(`[1]`), tok(`null`), tok(``), tok(`{"model":"gpt-4","prompt":"x"}`), tok(`{"model":5,"prompt":"x"}`),
		tok(`{"prompt":["a","b"]}`), tok(`{"prompt":[1,2]}`), tok(`{}`), tok(`{"prompt":"x",` + msgs + `}`),
		tok(`{"prompt":"x","add_special_tokens":"yes"}`),
		tok(`{"messages":[]}`), tok(`{"messages":[{"role":"robot","content":"x"}]}`),
		tok(`{"tools":[{"type":"function","function":{"name":"bad name!"}}],` + msgs + `}`),
		tok(`{"continue_final_message":true,"add_generation_prompt":true,` + asst + `}`),
		tok(`{"continue_final_message":true,` + msgs + `}`),
		detok(`{"tokens":`), detok(`{}`), detok(`{"tokens":null}`), detok(`{"tokens":[1,"a"]}`), detok(`{"tokens":[99999999999]}`),
		detok(`{"tokens":[1,1000000]}`), detok(`{"tokens":[-1]}`), detok(`{"tokens":[129280]}`),
		detok(`{"model":"gpt-4","tokens":[1]}`),
	}
	answer := func(base, method string, c [2]string) string {
		resp, b := roundTrip(t, method, base+c[0], c[1])
		return resp.Status + " " + resp.Header.Get("Content-Type") + " " + resp.Header.Get("Allow") + "\n" + string(b)
	}
	ok := 0
	for _, c := range cases {
		want := answer(plainURL, http.MethodPost, c)
		if strings.HasPrefix(want, "200") {
			ok++
		}
		for _, tg := range []struct{ name, url string }{{"decode", dsURL}, {"router", rsURL}} {
			if got := answer(tg.url, http.MethodPost, c); got != want {
				t.Errorf("%s %s:\n%s:\t%s\nserver:\t%s", c[0], c[1], tg.name, got, want)
			}
		}
	}
	if ok != 14 {
		t.Errorf("%d of the 14 answer cases were answered 200 by this server", ok)
	}
	for _, path := range []string{"/tokenize", "/detokenize"} {
		want := answer(plainURL, http.MethodGet, [2]string{path, ""})
		if !strings.HasPrefix(want, "405") {
			t.Errorf("GET %s: %s", path, want)
		}
		if got := answer(dsURL, http.MethodGet, [2]string{path, ""}); got != want {
			t.Errorf("GET %s:\ndecode:\t%s\nserver:\t%s", path, got, want)
		}
	}
}

// TestPDPingAndLiteralJSON: GET and POST /ping answer 200 with an empty
// body (vLLM: /ping is /health) on this server, the disagg decode server
// and the router; and their JSON writes '<', '>' and '&' as themselves
// (vLLM's pydantic JSON), not \u003c..., the same bytes on all three: a
// /detokenize of V4's role tokens, a model_not_found error naming "<x>&",
// and a streamed and a whole chat answer (text and logprob tokens).
func TestPDPingAndLiteralJSON(t *testing.T) {
	plainURL, dsURL, rsURL := startPDParity(t)
	urls := map[string]string{"server": plainURL, "decode": dsURL, "router": rsURL}
	for name, u := range urls {
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			resp, b := roundTrip(t, m, u+"/ping", "")
			if resp.StatusCode != http.StatusOK || len(b) != 0 {
				t.Errorf("%s: %s /ping: %d %q", name, m, resp.StatusCode, b)
			}
		}
		for _, c := range [][2]string{
			{"/detokenize", `{"tokens":[128803,128804]}`},
			{"/v1/chat/completions", `{"model":"<x>&","messages":[{"role":"user","content":"hi"}]}`},
			{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Say <b>&"}],"max_tokens":8,"temperature":0,"logprobs":true,"top_logprobs":2}`},
			{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Say <b>&"}],"max_tokens":8,"temperature":0,"logprobs":true,"stream":true}`},
		} {
			_, b := post(t, u, c[0], c[1])
			if strings.Contains(string(b), `\u003c`) || strings.Contains(string(b), `\u003e`) || strings.Contains(string(b), `\u0026`) {
				t.Errorf("%s: %s %s: HTML escapes in %s", name, c[0], c[1], b)
			}
		}
	}
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/dsv4go/dsv4go/disagg"
	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/internal/vllmmetrics"
)

// scrape parses url's /metrics into metric families by name.
func scrape(t testing.TB, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// family returns the family name, checking its type and that each of its
// series carries exactly vLLM's labels (model_name, engine "0") plus extra
// label names.
func family(t testing.TB, fams map[string]*dto.MetricFamily, name string, typ dto.MetricType, model string, extra ...string) *dto.MetricFamily {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("/metrics has no %s", name)
	}
	if f.GetType() != typ {
		t.Errorf("%s: type %v, want %v", name, f.GetType(), typ)
	}
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		if got["model_name"] != model || got["engine"] != "0" || len(got) != 2+len(extra) {
			t.Errorf("%s: labels %v, want model_name=%q engine=0 and %v", name, got, model, extra)
		}
		for _, e := range extra {
			if _, ok := got[e]; !ok {
				t.Errorf("%s: no label %s in %v", name, e, got)
			}
		}
	}
	return f
}

// value is the counter or gauge value of f's series whose label key is val
// (key "": its only series).
func value(t testing.TB, f *dto.MetricFamily, key, val string) float64 {
	t.Helper()
	for _, m := range f.GetMetric() {
		match := key == ""
		for _, lp := range m.GetLabel() {
			if lp.GetName() == key && lp.GetValue() == val {
				match = true
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		}
	}
	t.Fatalf("%s: no series %s=%q", f.GetName(), key, val)
	return 0
}

func hist(t testing.TB, fams map[string]*dto.MetricFamily, name, model string) *dto.Histogram {
	t.Helper()
	f := family(t, fams, name, dto.MetricType_HISTOGRAM, model)
	if len(f.GetMetric()) != 1 {
		t.Fatalf("%s: %d series", name, len(f.GetMetric()))
	}
	return f.GetMetric()[0].GetHistogram()
}

// TestVLLMMetrics: /metrics exports vLLM's V1 series (names, types, labels
// model_name and engine, vLLM's buckets) beside the dsv4_* ones, and they
// count per choice as vLLM counts engine requests: finish reasons
// (tool_calls as stop), prompt tokens once per choice at its first token,
// generated tokens, TTFT / e2e / per-request histograms once per finished
// choice, a client disconnect as abort, and the engine gauges.
func TestVLLMMetrics(t *testing.T) {
	const model = "dsv4-script"
	ts := startServer(t, ServerConfig{}, dsv4.EngineOptions{StateMemory: 1 << 30}, 2*time.Millisecond)

	// Before any request: every series exists, request_success at 0 for
	// each of vLLM's finish reasons.
	fams := scrape(t, ts.URL)
	succ := family(t, fams, vllmmetrics.RequestSuccess, dto.MetricType_COUNTER, model, "finished_reason")
	for _, r := range vllmmetrics.FinishReasons {
		if v := value(t, succ, "finished_reason", r); v != 0 {
			t.Errorf("request_success{%s} = %v before any request", r, v)
		}
	}
	for _, name := range []string{vllmmetrics.NumRequestsRunning, vllmmetrics.NumRequestsWaiting, vllmmetrics.KVCacheUsagePerc} {
		if v := value(t, family(t, fams, name, dto.MetricType_GAUGE, model), "", ""); v != 0 {
			t.Errorf("%s = %v idle", name, v)
		}
	}
	ttft := hist(t, fams, vllmmetrics.TimeToFirstToken, model)
	if b := ttft.GetBucket(); len(b) != len(vllmmetrics.TTFTBuckets)+1 || b[21].GetUpperBound() != 2560 { // and +Inf
		t.Errorf("TTFT buckets %v", ttft.GetBucket())
	}
	ptok := hist(t, fams, vllmmetrics.RequestPromptTokensHist, model)
	if b := ptok.GetBucket(); len(b) != 13 || b[11].GetUpperBound() != 5000 { // 1-2-5 up to the mock's 8192, +Inf
		t.Errorf("request_prompt_tokens buckets %v", b)
	}

	// n=2 non-streamed (stop), a streamed cut by max_tokens (length), a
	// tool call (tool_calls: vLLM's engine says stop), a completion.
	type usage struct{ Prompt, Completion int }
	var prompt, gen int
	run := func(path, body string, choices int) {
		code, b := post(t, ts.URL, path, body)
		if code != 200 {
			t.Fatalf("%s: %d %s", body, code, b)
		}
		var u usage
		if strings.Contains(body, `"stream":true`) {
			for _, line := range strings.Split(string(b), "\n") {
				var ev struct {
					Usage *struct {
						P int `json:"prompt_tokens"`
						C int `json:"completion_tokens"`
					}
				}
				if d, ok := strings.CutPrefix(line, "data: "); ok && json.Unmarshal([]byte(d), &ev) == nil && ev.Usage != nil {
					u = usage{ev.Usage.P, ev.Usage.C}
				}
			}
		} else {
			var r struct {
				Usage struct {
					P int `json:"prompt_tokens"`
					C int `json:"completion_tokens"`
				}
			}
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			u = usage{r.Usage.P, r.Usage.C}
		}
		if u.Prompt == 0 || u.Completion == 0 {
			t.Fatalf("%s: usage %+v", body, u)
		}
		prompt += u.Prompt * choices // usage counts a prompt once; vLLM once per choice
		gen += u.Completion
	}
	run("/v1/chat/completions", `{"messages":[{"role":"user","content":"hello there"}],"n":2}`, 2)
	run("/v1/chat/completions", `{"messages":[{"role":"user","content":"count 9"}],"max_tokens":4,"stream":true,"stream_options":{"include_usage":true}}`, 1)
	run("/v1/chat/completions", `{"messages":[{"role":"user","content":"weather in Oslo"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`, 1)
	run("/v1/completions", `{"prompt":"count 3","max_tokens":50}`, 1)
	const finished = 5

	fams = scrape(t, ts.URL)
	succ = family(t, fams, vllmmetrics.RequestSuccess, dto.MetricType_COUNTER, model, "finished_reason")
	for r, want := range map[string]float64{"stop": 4, "length": 1, "abort": 0, "error": 0} {
		if v := value(t, succ, "finished_reason", r); v != want {
			t.Errorf("request_success{%s} = %v, want %v", r, v, want)
		}
	}
	if len(succ.GetMetric()) != len(vllmmetrics.FinishReasons) {
		t.Errorf("request_success has %d series (tool_calls must count as stop)", len(succ.GetMetric()))
	}
	if v := value(t, family(t, fams, vllmmetrics.PromptTokens, dto.MetricType_COUNTER, model), "", ""); v != float64(prompt) {
		t.Errorf("prompt_tokens_total = %v, want %d", v, prompt)
	}
	if v := value(t, family(t, fams, vllmmetrics.GenerationTokens, dto.MetricType_COUNTER, model), "", ""); v != float64(gen) {
		t.Errorf("generation_tokens_total = %v, want %d", v, gen)
	}
	for _, name := range []string{vllmmetrics.TimeToFirstToken, vllmmetrics.E2ERequestLatency, vllmmetrics.RequestTimePerOutputToken,
		vllmmetrics.RequestPromptTokensHist, vllmmetrics.RequestGenerationTokensHist} {
		if h := hist(t, fams, name, model); h.GetSampleCount() != finished {
			t.Errorf("%s count %d, want %d", name, h.GetSampleCount(), finished)
		}
	}
	if s := hist(t, fams, vllmmetrics.RequestPromptTokensHist, model).GetSampleSum(); s != float64(prompt) {
		t.Errorf("request_prompt_tokens sum %v, want %d", s, prompt)
	}
	if s := hist(t, fams, vllmmetrics.RequestGenerationTokensHist, model).GetSampleSum(); s != float64(gen) {
		t.Errorf("request_generation_tokens sum %v, want %d", s, gen)
	}
	// one interval per chunk after a choice's first: at least one, at most
	// one per token after each choice's first
	if c := hist(t, fams, vllmmetrics.InterTokenLatency, model).GetSampleCount(); c == 0 || c > uint64(gen-finished) {
		t.Errorf("inter_token_latency count %d (generated %d in %d choices)", c, gen, finished)
	}
	if tp := hist(t, fams, vllmmetrics.RequestTimePerOutputToken, model); tp.GetSampleSum() <= 0 {
		t.Errorf("request_time_per_output_token sum %v with a 2 ms decode step", tp.GetSampleSum())
	}
	// the prefix cache counters are the engine's, as dsv4_prefix_cache_*
	q := value(t, family(t, fams, vllmmetrics.PrefixCacheQueries, dto.MetricType_COUNTER, model), "", "")
	h := value(t, family(t, fams, vllmmetrics.PrefixCacheHits, dto.MetricType_COUNTER, model), "", "")
	if q <= 0 || q != metricValue(t, ts.URL, "dsv4_prefix_cache_queries_total") || h != metricValue(t, ts.URL, "dsv4_prefix_cache_hits_total") {
		t.Errorf("prefix cache queries %v hits %v", q, h)
	}
	// the dsv4_* series are still there, per HTTP request
	if v := metricValue(t, ts.URL, `dsv4_request_success_total{finished_reason="tool_calls",model_name="dsv4-script"}`); v != 1 {
		t.Errorf("dsv4_request_success_total{tool_calls} = %v", v)
	}

	// A client that goes away mid-stream: running 1 and KV usage > 0
	// meanwhile, then abort 1 and the gauges back to 0.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := streamChat(t, ctx, ts.URL, `{"messages":[{"role":"user","content":"count 400"}],"stream":true}`)
	br := bufio.NewReader(resp.Body)
	for range 6 {
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	fams = scrape(t, ts.URL)
	if v := value(t, fams[vllmmetrics.NumRequestsRunning], "", ""); v != 1 {
		t.Errorf("num_requests_running mid-stream = %v", v)
	}
	if v := value(t, fams[vllmmetrics.KVCacheUsagePerc], "", ""); v <= 0 || v > 1 {
		t.Errorf("kv_cache_usage_perc mid-stream = %v", v)
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		fams = scrape(t, ts.URL)
		if value(t, fams[vllmmetrics.RequestSuccess], "finished_reason", "abort") == 1 &&
			value(t, fams[vllmmetrics.NumRequestsRunning], "", "") == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the disconnect did not count as finished_reason abort")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if v := value(t, fams[vllmmetrics.KVCacheUsagePerc], "", ""); v != 0 {
		t.Errorf("kv_cache_usage_perc after the disconnect = %v", v)
	}
	if v := value(t, fams[vllmmetrics.RequestSuccess], "finished_reason", "stop"); v != 4 {
		t.Errorf("request_success{stop} = %v after the abort", v)
	}
}

// TestVLLMMetricsNoBudget: without a state budget there is no KV share to
// report, so vllm:kv_cache_usage_perc is absent rather than a made-up 0.
func TestVLLMMetricsNoBudget(t *testing.T) {
	ts := startServer(t, ServerConfig{}, dsv4.EngineOptions{}, 0)
	fams := scrape(t, ts.URL)
	if _, ok := fams[vllmmetrics.KVCacheUsagePerc]; ok {
		t.Error("kv_cache_usage_perc exported without a budget")
	}
	family(t, fams, vllmmetrics.NumRequestsRunning, dto.MetricType_GAUGE, "dsv4-script")
}

// TestRouterVLLMMetricsParity: a disagg router in front of this server
// counts the same vllm:request_success_total series, prompt and generation
// token counters and finished choices (e2e count) as the server, for
// non-streamed answers (n = 2, a tool call, a completion with two
// prompts) and a stream with its usage; model_name is the served name on
// both.
func TestRouterVLLMMetricsParity(t *testing.T) {
	const model = "dsv4-script"
	ts := startServer(t, ServerConfig{}, dsv4.EngineOptions{}, 0)
	rt, err := disagg.NewRouter(disagg.RouterConfig{Workers: []string{ts.URL}, HealthInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	rs := httptest.NewServer(rt.Handler())
	t.Cleanup(func() { rs.Close(); rt.Close() })
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hello there"}],"n":2}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"count 9"}],"max_tokens":4,"stream":true,"stream_options":{"include_usage":true}}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"weather in Oslo"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`},
		{"/v1/completions", `{"prompt":["count 3","count 5"],"max_tokens":50,"n":2}`},
	} {
		if code, b := post(t, rs.URL, c.path, c.body); code != 200 {
			t.Fatalf("%s: %d %s", c.body, code, b)
		}
	}
	srv, via := scrape(t, ts.URL), scrape(t, rs.URL)
	for _, r := range vllmmetrics.FinishReasons {
		a := value(t, family(t, srv, vllmmetrics.RequestSuccess, dto.MetricType_COUNTER, model, "finished_reason"), "finished_reason", r)
		b := value(t, family(t, via, vllmmetrics.RequestSuccess, dto.MetricType_COUNTER, model, "finished_reason"), "finished_reason", r)
		if a != b {
			t.Errorf("request_success{%s}: server %v, router %v", r, a, b)
		}
	}
	for _, name := range []string{vllmmetrics.PromptTokens, vllmmetrics.GenerationTokens} {
		a := value(t, family(t, srv, name, dto.MetricType_COUNTER, model), "", "")
		b := value(t, family(t, via, name, dto.MetricType_COUNTER, model), "", "")
		if a != b || a == 0 {
			t.Errorf("%s: server %v, router %v", name, a, b)
		}
	}
	a, b := hist(t, srv, vllmmetrics.E2ERequestLatency, model).GetSampleCount(), hist(t, via, vllmmetrics.E2ERequestLatency, model).GetSampleCount()
	if a != b || a != 2+1+1+4 {
		t.Errorf("e2e count: server %d, router %d, want 8", a, b)
	}
	if c := hist(t, via, vllmmetrics.TimeToFirstToken, model).GetSampleCount(); c != 1 {
		t.Errorf("router TTFT count %d, want 1 (the stream)", c)
	}
}

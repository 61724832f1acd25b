package disagg

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/dsv4go/dsv4go/internal/vllmmetrics"
)

// vllmSeries scrapes url's /metrics and returns, for each vllm:* family,
// its value (counters), or count and sum (histograms), by a key of the
// family name and its labels other than model_name and engine, checking
// that every series has model_name want and engine "0".
func vllmSeries(t *testing.T, url, want string) map[string]float64 {
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
	out := map[string]float64{}
	for name, f := range fams {
		if !strings.HasPrefix(name, "vllm:") {
			continue
		}
		for _, m := range f.GetMetric() {
			key := name
			lab := map[string]string{}
			for _, lp := range m.GetLabel() {
				lab[lp.GetName()] = lp.GetValue()
				if lp.GetName() != "model_name" && lp.GetName() != "engine" {
					key += "{" + lp.GetName() + "=" + lp.GetValue() + "}"
				}
			}
			if lab["model_name"] != want || lab["engine"] != "0" {
				t.Errorf("%s: labels %v", name, lab)
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key+"_count"] = float64(m.GetHistogram().GetSampleCount())
				out[key+"_sum"] = m.GetHistogram().GetSampleSum()
			default:
				t.Errorf("%s: type %v", name, f.GetType())
			}
		}
	}
	return out
}

// TestRouterVLLMMetrics: the router's vllm:* series count what it forwards
// per choice as vLLM counts engine requests: a non-streamed n=2 answer
// (stop and tool_calls: 2 stop, e2e twice, prompt tokens x n, no token
// times), a stream (TTFT once, one ITL per later output chunk, its
// length finish and the final usage chunk's tokens; running usage on the
// chunks not counted), a rejected request (nothing), a stream the worker
// cuts (error) and one the client leaves (abort); labels are the
// responses' model name and engine "0"; only vLLM's relay series exist.
func TestRouterVLLMMetrics(t *testing.T) {
	var rec recorder
	release := make(chan struct{})
	worker := fakeServer(t, &rec, func(w http.ResponseWriter, body map[string]json.RawMessage) {
		var content string
		var msgs []struct{ Content string }
		json.Unmarshal(body["messages"], &msgs)
		if len(msgs) > 0 {
			content = msgs[0].Content
		}
		sse := func(events ...string) {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, e := range events {
				fmt.Fprintf(w, "data: %s\n\n", e)
				w.(http.Flusher).Flush()
				time.Sleep(2 * time.Millisecond)
			}
		}
		chunk := func(delta string, finish string) string {
			f := "null"
			if finish != "" {
				f = `"` + finish + `"`
			}
			return `{"id":"c","object":"chat.completion.chunk","model":"m1","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + `}],"usage":{"prompt_tokens":5,"completion_tokens":1}}`
		}
		switch content {
		case "json":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"x","object":"chat.completion","model":"m1","choices":[`+
				`{"index":0,"message":{"role":"assistant","content":"a"},"finish_reason":"stop"},`+
				`{"index":1,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}],`+
				`"usage":{"prompt_tokens":7,"completion_tokens":9,"total_tokens":16}}`)
		case "stream":
			sse(chunk(`{"role":"assistant","content":""}`, ""), chunk(`{"content":"a"}`, ""), chunk(`{"reasoning_content":"b"}`, ""),
				chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}`, ""), chunk(`{}`, "length"),
				`{"id":"c","object":"chat.completion.chunk","model":"m1","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`, "[DONE]")
		case "bad":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			fmt.Fprint(w, `{"error":{"message":"no","type":"invalid_request_error","param":null,"code":null}}`)
		case "cut":
			sse(chunk(`{"content":"a"}`, ""))
			panic(http.ErrAbortHandler) // the worker dies mid-stream
		case "leave":
			sse(chunk(`{"content":"a"}`, ""))
			<-release
		}
	})
	url := routerFor(t, RouterConfig{Workers: []string{worker.URL}})
	ask := func(content, extra string) int {
		resp, _ := post(t, t.Context(), url, `{"messages":[{"role":"user","content":"`+content+`"}]`+extra+`}`)
		return resp.StatusCode
	}
	if got := vllmSeries(t, url, "m1"); len(got) != 0 {
		t.Errorf("series before any answer: %v", got)
	}
	if st := ask("json", `,"n":2`); st != 200 {
		t.Fatal(st)
	}
	if st := ask("stream", `,"stream":true`); st != 200 {
		t.Fatal(st)
	}
	if st := ask("bad", ``); st != 400 {
		t.Fatal(st)
	}
	ask("cut", `,"stream":true`)
	want := map[string]float64{
		vllmmetrics.RequestSuccess + "{finished_reason=stop}":       2,
		vllmmetrics.RequestSuccess + "{finished_reason=length}":     1,
		vllmmetrics.RequestSuccess + "{finished_reason=error}":      1,
		vllmmetrics.RequestSuccess + "{finished_reason=abort}":      0,
		vllmmetrics.RequestSuccess + "{finished_reason=repetition}": 0,
		vllmmetrics.PromptTokens:                                    7*2 + 5,
		vllmmetrics.GenerationTokens:                                9 + 3,
		vllmmetrics.E2ERequestLatency + "_count":                    3,
		vllmmetrics.TimeToFirstToken + "_count":                     2, // the stream, the cut stream
		vllmmetrics.InterTokenLatency + "_count":                    2,
	}
	check := func(want map[string]float64) {
		t.Helper()
		got := vllmSeries(t, url, "m1")
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %v, want %v", k, got[k], v)
			}
		}
		for k := range got {
			if strings.HasPrefix(k, vllmmetrics.RequestPromptTokensHist) || strings.HasPrefix(k, vllmmetrics.RequestTimePerOutputToken) {
				t.Errorf("a relay exports %s", k)
			}
		}
		if got[vllmmetrics.TimeToFirstToken+"_sum"] <= 0 || got[vllmmetrics.InterTokenLatency+"_sum"] <= 0 {
			t.Errorf("token times %v", got)
		}
	}
	check(want)

	// a client that leaves mid-stream: abort
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"leave"}],"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	resp.Body.Read(buf)
	cancel()
	resp.Body.Close()
	want[vllmmetrics.RequestSuccess+"{finished_reason=abort}"] = 1
	want[vllmmetrics.TimeToFirstToken+"_count"] = 3
	deadline := time.Now().Add(5 * time.Second)
	for vllmSeries(t, url, "m1")[vllmmetrics.RequestSuccess+"{finished_reason=abort}"] != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	check(want)
}

// TestDecodeVLLMMetrics: the decode server exports vLLM's series as
// examples/server does, a transferred prompt counted at its first token;
// a PD router in front counts the same finished choices and tokens.
func TestDecodeVLLMMetrics(t *testing.T) {
	pd := startPDWith(t, PrefillConfig{}, DecodeConfig{FetchTimeout: 30 * time.Second})
	url := routerFor(t, RouterConfig{PD: true, Prefill: []PrefillWorker{{URL: pd.pURL, BootstrapPort: pd.bootPort}}, Decode: []string{pd.dURL}})
	var prompt, gen float64
	for _, body := range []string{
		`{"messages":[{"role":"user","content":"What is 17*23?"}],"max_tokens":6,"n":2}`,
		`{"messages":[{"role":"user","content":"Name a colour."}],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}`,
	} {
		resp, b := post(t, t.Context(), url, body)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		// the usage: the answer's, or the stream's usage chunk
		type usage struct {
			Usage *struct {
				P float64 `json:"prompt_tokens"`
				C float64 `json:"completion_tokens"`
			} `json:"usage"`
		}
		var u usage
		for _, part := range strings.Split(b, "\n") {
			var x usage
			if json.Unmarshal([]byte(strings.TrimPrefix(part, "data: ")), &x) == nil && x.Usage != nil {
				u = x
			}
		}
		if u.Usage == nil {
			t.Fatalf("no usage in %s", b)
		}
		n := 1.0
		if strings.Contains(body, `"n":2`) {
			n = 2
		}
		prompt += u.Usage.P * n
		gen += u.Usage.C
	}
	dec, via := vllmSeries(t, pd.dURL, "dsv4-tiny"), vllmSeries(t, url, "dsv4-tiny")
	fin := func(m map[string]float64) float64 {
		return m[vllmmetrics.RequestSuccess+"{finished_reason=stop}"] + m[vllmmetrics.RequestSuccess+"{finished_reason=length}"]
	}
	if fin(dec) != 3 || fin(via) != 3 {
		t.Errorf("finished choices: decode %v, router %v, want 3", fin(dec), fin(via))
	}
	for _, k := range []string{vllmmetrics.PromptTokens, vllmmetrics.GenerationTokens} {
		want := prompt
		if k == vllmmetrics.GenerationTokens {
			want = gen
		}
		if dec[k] != want || via[k] != want {
			t.Errorf("%s: decode %v, router %v, want %v", k, dec[k], via[k], want)
		}
	}
	for _, k := range []string{vllmmetrics.TimeToFirstToken + "_count", vllmmetrics.RequestGenerationTokensHist + "_count"} {
		if dec[k] != 3 {
			t.Errorf("decode %s = %v, want 3", k, dec[k])
		}
	}
	// The engine drops a finished request from its running set after the
	// response's last bytes are written: wait for the gauge (a loaded machine
	// read 1 right after the response once).
	v, ok := dec[vllmmetrics.NumRequestsRunning]
	for deadline := time.Now().Add(10 * time.Second); ok && v != 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		v, ok = vllmSeries(t, pd.dURL, "dsv4-tiny")[vllmmetrics.NumRequestsRunning]
	}
	if !ok || v != 0 {
		t.Errorf("decode num_requests_running %v %v", v, ok)
	}
}

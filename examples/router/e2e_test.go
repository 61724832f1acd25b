package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/internal/tinymodel"
)

// The end-to-end tests run prefill, decode and router servers as separate
// processes on 127.0.0.1 (binaries built into t.TempDir()), on the
// embedded trained dsv4-tiny model, and compare with a co-located engine.

var pdBin, routeBin, serverBin string

// buildBins builds examples/pd, examples/router and examples/server into
// t.TempDir() (with -race when the test runs under it).
func buildBins(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	args := []string{"build", "-o", dir + string(os.PathSeparator)}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./examples/pd", "./examples/router", "./examples/server")...)
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	pdBin, routeBin, serverBin = filepath.Join(dir, "pd"), filepath.Join(dir, "router"), filepath.Join(dir, "server")
}

type proc struct {
	cmd       *exec.Cmd
	url, boot string
	bootPort  string
	stderr    *strings.Builder
	killed    bool
	mu        sync.Mutex
	exited    chan struct{}
}

// start runs bin with args and waits for its "listening" line.
func start(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, stderr: &strings.Builder{}, exited: make(chan struct{})}
	cmd.Stderr = &lockedWriter{w: p.stderr, mu: &p.mu}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.kill()
		p.mu.Lock()
		defer p.mu.Unlock()
		if log := p.stderr.String(); strings.Contains(log, "WARNING: DATA RACE") {
			t.Errorf("%s reported a data race:\n%s", filepath.Base(bin), log)
		}
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "listening ") {
				line <- sc.Text()
			}
		}
		close(line)
	}()
	select {
	case l, ok := <-line:
		if !ok {
			p.mu.Lock()
			defer p.mu.Unlock()
			t.Fatalf("%s exited: %s", filepath.Base(bin), p.stderr.String())
		}
		for _, f := range strings.Fields(l)[1:] {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "http":
				p.url = "http://" + v
			case "bootstrap":
				p.boot = v
				p.bootPort = v[strings.LastIndex(v, ":")+1:]
			}
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not start", filepath.Base(bin))
	}
	return p
}

func (p *proc) kill() {
	if p.cmd.Process != nil {
		p.cmd.Process.Kill()
		<-p.exited
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// startColocated runs examples/server (the co-located reference server),
// which logs "msg=serving addr=HOST:PORT" on stderr.
func startColocated(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(serverBin, "--port", "0", "--served-model-name", "dsv4-tiny")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	var raced atomic.Bool
	done := make(chan struct{}) // the scanner has read stderr to its end
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if _, a, ok := strings.Cut(sc.Text(), " addr="); ok && strings.Contains(sc.Text(), "msg=serving") {
				select {
				case addr <- strings.Fields(a)[0]:
				default: // only the first address is wanted; keep reading
				}
			}
			if strings.Contains(sc.Text(), "WARNING: DATA RACE") {
				raced.Store(true)
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done // Wait closes the pipe: read every line (a late race report) first
		cmd.Wait()
		if raced.Load() {
			t.Error("examples/server reported a data race")
		}
	})
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(60 * time.Second):
		t.Fatal("examples/server did not start")
	}
	return ""
}

func startPrefill(t *testing.T, extra ...string) *proc {
	return start(t, pdBin, append([]string{"--disaggregation-mode", "prefill", "--port", "0", "--disaggregation-bootstrap-port", "0"}, extra...)...)
}

func startDecode(t *testing.T) *proc {
	return start(t, pdBin, "--disaggregation-mode", "decode", "--port", "0")
}

func postJSON(ctx context.Context, url, body string) (int, string, error) {
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// metric reads one unlabeled metric value from a /metrics page.
func metric(t *testing.T, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	total := 0.0
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, name+" ") || strings.HasPrefix(l, name+"{") {
			var v float64
			fmt.Sscan(l[strings.LastIndex(l, " ")+1:], &v)
			total += v
		}
	}
	return total
}

func waitUntil(t *testing.T, what string, f func() bool) {
	t.Helper()
	for i := 0; i < 600; i++ {
		if f() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

type conv struct {
	Name     string            `json:"name"`
	Thinking bool              `json:"thinking"`
	Tools    json.RawMessage   `json:"tools"`
	Messages []json.RawMessage `json:"messages"`
}

// cases are the three requests, built from the training data.
func cases(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.ReadFile("../../tools/train_tiny/conversations.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{
		"arith": `{"model":"dsv4-tiny","messages":[{"role":"user","content":"What is 17*23? Number only."}],"temperature":0,"max_tokens":64,"x_passthrough":{"kept":true}}`,
	}
	for _, l := range strings.Split(string(f), "\n") {
		var c conv
		if json.Unmarshal([]byte(l), &c) != nil {
			continue
		}
		var name string
		switch c.Name {
		case "think_00":
			name = "thinking"
		case "tool_weather_parallel_paris_tokyo":
			name = "weather"
		default:
			continue
		}
		req := map[string]any{"model": "dsv4-tiny", "temperature": 0, "max_tokens": 200}
		// Up to the first assistant turn.
		for i, m := range c.Messages {
			if strings.Contains(string(m), `"role": "assistant"`) {
				req["messages"] = c.Messages[:i]
				break
			}
		}
		if c.Tools != nil {
			req["tools"] = c.Tools
		}
		if c.Thinking {
			req["chat_template_kwargs"] = map[string]any{"thinking": true}
		}
		b, _ := json.Marshal(req)
		out[name] = string(b)
	}
	if len(out) != 3 {
		t.Fatalf("training conversations not found: %d cases", len(out))
	}
	return out
}

type result struct {
	Reasoning, Content string
	Calls              []string // name(arguments)
	Finish             string
}

func parseResponse(t *testing.T, body string) result {
	t.Helper()
	var r struct {
		Choices []struct {
			Message struct {
				Content          *string         `json:"content"`
				ReasoningContent *string         `json:"reasoning_content"`
				ToolCalls        []dsv4.ToolCall `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("bad response %v: %s", err, body)
	}
	c := r.Choices[0]
	var out result
	if c.Message.Content != nil {
		out.Content = *c.Message.Content
	}
	if c.Message.ReasoningContent != nil {
		out.Reasoning = *c.Message.ReasoningContent
	}
	for _, tc := range c.Message.ToolCalls {
		out.Calls = append(out.Calls, tc.Function.Name+canon(tc.Function.Arguments))
	}
	out.Finish = c.FinishReason
	return out
}

func canon(s string) string {
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func parseSSE(t *testing.T, body string) result {
	t.Helper()
	var out result
	var args []string
	var names []string
	done := false
	for _, l := range strings.Split(body, "\n") {
		d, ok := strings.CutPrefix(l, "data: ")
		if !ok {
			continue
		}
		if d == "[DONE]" {
			done = true
			continue
		}
		var ch struct {
			Choices []struct {
				Delta        dsv4.ChatDelta `json:"delta"`
				FinishReason *string        `json:"finish_reason"`
			} `json:"choices"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(d), &ch); err != nil || ch.Error != nil {
			t.Fatalf("bad SSE event %q", d)
		}
		for _, c := range ch.Choices {
			out.Reasoning += c.Delta.ReasoningContent
			out.Content += c.Delta.Content
			for _, tc := range c.Delta.ToolCalls {
				for len(names) <= tc.Index {
					names = append(names, "")
					args = append(args, "")
				}
				names[tc.Index] += tc.Function.Name
				args[tc.Index] += tc.Function.Arguments
			}
			if c.FinishReason != nil {
				out.Finish = *c.FinishReason
			}
		}
	}
	if !done {
		t.Fatalf("SSE without [DONE]: %s", body)
	}
	for i := range names {
		out.Calls = append(out.Calls, names[i]+canon(args[i]))
	}
	return out
}

// colocated answers every case with one in-process engine (the reference).
func colocated(t *testing.T, cs map[string]string) map[string]result {
	t.Helper()
	m := tinymodel.Load(t)
	e, err := dsv4.NewEngine(m, dsv4.EngineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	out := map[string]result{}
	for name, body := range cs {
		var req dsv4.ChatRequest
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			t.Fatal(err)
		}
		resp, err := e.Chat(context.Background(), &req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(resp)
		out[name] = parseResponse(t, string(b))
	}
	return out
}

func checkCase(t *testing.T, name string, got result) {
	t.Helper()
	switch name {
	case "arith":
		if got.Content != "391" || got.Finish != "stop" {
			t.Errorf("%s: %+v, want content 391", name, got)
		}
	case "thinking":
		if got.Reasoning == "" || got.Content == "" || strings.Contains(got.Content, "</think>") {
			t.Errorf("%s: reasoning and content not separated: %+v", name, got)
		}
	case "weather":
		want := []string{`get_weather{"location":"Paris"}`, `get_weather{"location":"Tokyo"}`}
		if got.Finish != "tool_calls" || strings.Join(got.Calls, ",") != strings.Join(want, ",") {
			t.Errorf("%s: %+v, want tool_calls %v", name, got, want)
		}
	}
}

func withField(body, k string, v any) string {
	var m map[string]json.RawMessage
	json.Unmarshal([]byte(body), &m)
	b, _ := json.Marshal(v)
	m[k] = b
	out, _ := json.Marshal(m)
	return string(out)
}

// TestPDEndToEnd: router in PD mode (concurrent and sequential) over
// separate prefill and decode processes gives the co-located answers,
// streaming and not; then the fault cases.
func TestPDEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs servers")
	}
	buildBins(t)
	cs := cases(t)
	ref := colocated(t, cs)
	for name, r := range ref {
		checkCase(t, name, r)
	}
	// The co-located reference server (examples/server) answers the same.
	srv := startColocated(t)
	for name, body := range cs {
		code, out, err := postJSON(context.Background(), srv, body)
		if err != nil || code != 200 {
			t.Fatalf("co-located server: %d %v %s", code, err, out)
		}
		if got := parseResponse(t, out); fmt.Sprint(got) != fmt.Sprint(ref[name]) {
			t.Fatalf("%s: examples/server %+v, engine %+v", name, got, ref[name])
		}
	}
	p1, p2 := startPrefill(t), startPrefill(t)
	d1, d2 := startDecode(t), startDecode(t)
	rc := start(t, routeBin, "--port", "0", "--pd-disaggregation", "--prefill", p1.url, p1.bootPort,
		"--prefill", p2.url, "--decode", d1.url, "--decode", d2.url,
		"--prefill-policy", "round_robin", "--decode-policy", "power_of_two", "--health-check-interval", "200ms",
		"--health-failure-threshold", "1")
	rs := start(t, routeBin, "--port", "0", "--pd-disaggregation", "--sequential", "--prefill", p1.url, p1.bootPort,
		"--decode", d1.url, "--policy", "cache_aware")
	ctx := context.Background()
	for _, rt := range []struct {
		name string
		p    *proc
	}{{"concurrent", rc}, {"sequential", rs}} {
		for name, body := range cs {
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/stream=%v", rt.name, name, stream), func(t *testing.T) {
					b := body
					if stream {
						b = withField(b, "stream", true)
					}
					code, out, err := postJSON(ctx, rt.p.url, b)
					if err != nil || code != 200 {
						t.Fatalf("%d %v %s", code, err, out)
					}
					var got result
					if stream {
						got = parseSSE(t, out)
					} else {
						got = parseResponse(t, out)
					}
					checkCase(t, name, got)
					if fmt.Sprint(got) != fmt.Sprint(ref[name]) {
						t.Errorf("PD %+v\nco-located %+v", got, ref[name])
					}
				})
			}
		}
	}
	// Every decode server admitted its prompts from transferred state.
	if n := metric(t, d1.url, "dsv4_disagg_restored_prompts_total") + metric(t, d2.url, "dsv4_disagg_restored_prompts_total"); n < 12 {
		t.Errorf("%v prompts restored from transfers, want ≥ 12", n)
	}

	t.Run("client_disconnects", func(t *testing.T) {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 10)
		long := withField(withField(cs["thinking"], "stream", true), "max_tokens", 400)
		long = withField(long, "ignore_eos", true)
		for i := range 100 {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				ctx, cancel := context.WithCancel(ctx)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, "POST", rc.url+"/v1/chat/completions", strings.NewReader(long))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return
				}
				if i%2 == 0 { // half leave after the first bytes, half at once
					buf := make([]byte, 64)
					resp.Body.Read(buf)
				}
				resp.Body.Close()
			}()
		}
		wg.Wait()
		for _, p := range []*proc{p1, p2} {
			waitUntil(t, "prefill rooms to drain", func() bool {
				var info struct {
					Live int `json:"live_rooms"`
				}
				getJSON(t, p.url+"/server_info", &info)
				return info.Live == 0 && metric(t, p.url, "dsv4_disagg_prefill_rooms") == 0
			})
		}
		for _, d := range []*proc{d1, d2} {
			waitUntil(t, "decode state to drain", func() bool {
				return metric(t, d.url, "dsv4_disagg_decode_rooms") == 0 && metric(t, d.url, "dsv4_engine_live_sequences") == 0
			})
		}
	})

	t.Run("config_mismatch_refused", func(t *testing.T) {
		bad := startPrefill(t, "--model-path", "../../dsv4/testdata/ckpt_hf_bf16", "--served-model-name", "other")
		body := withField(withField(withField(cs["arith"], "bootstrap_host", "127.0.0.1"), "bootstrap_port", atoi(bad.bootPort)), "bootstrap_room", 77)
		code, out, _ := postJSON(ctx, d1.url, body)
		if code != http.StatusBadGateway || !strings.Contains(out, "incompatible_peer") {
			t.Fatalf("decode paired with a foreign prefill: %d %s", code, out)
		}
		// A router given only that pair reports it unhealthy and serves nothing.
		rb := start(t, routeBin, "--port", "0", "--prefill", bad.url, bad.bootPort, "--decode", d1.url, "--health-check-interval", "100ms")
		var ws []struct {
			URL     string `json:"url"`
			Healthy bool   `json:"healthy"`
			Reason  string `json:"reason"`
		}
		waitUntil(t, "mismatched prefill marked unhealthy", func() bool {
			getJSON(t, rb.url+"/workers", &ws)
			return !ws[0].Healthy && strings.Contains(ws[0].Reason, "incompatible")
		})
		if code, out, _ := postJSON(ctx, rb.url, cs["arith"]); code != http.StatusServiceUnavailable {
			t.Fatalf("router with a mismatched pair: %d %s", code, out)
		}
	})

	t.Run("prefill_killed", func(t *testing.T) {
		p2.kill()
		for range 4 { // round robin hits the dead one: retried on p1 before any byte
			code, out, err := postJSON(ctx, rc.url, cs["arith"])
			if err != nil || code != 200 {
				t.Fatalf("%d %v %s", code, err, out)
			}
			checkCase(t, "arith", parseResponse(t, out))
		}
		waitUntil(t, "dead prefill marked unhealthy", func() bool { return !workerHealthy(t, rc.url, p2.url) })
		for _, d := range []*proc{d1, d2} {
			waitUntil(t, "decode rooms released", func() bool { return metric(t, d.url, "dsv4_disagg_decode_rooms") == 0 })
		}
	})

	t.Run("prefill_killed_mid_transfer", func(t *testing.T) {
		// p3 sends its KV frames slowly; the router tries it first.
		p3 := startPrefill(t, "--kv-chunk-bytes", "16384", "--kv-debug-frame-delay", "40ms")
		r3 := start(t, routeBin, "--port", "0", "--prefill", p3.url, p3.bootPort, "--prefill", p1.url, p1.bootPort,
			"--decode", d1.url, "--prefill-policy", "round_robin", "--health-check-interval", "1h")
		type res struct {
			code int
			out  string
			err  error
		}
		done := make(chan res, 1)
		go func() {
			c, o, e := postJSON(ctx, r3.url, cs["arith"])
			done <- res{c, o, e}
		}()
		waitUntil(t, "a transfer in flight on p3", func() bool {
			return labeled(t, p3.url, `dsv4_disagg_prefill_rooms{state="transferring"}`) == 1
		})
		p3.kill()
		r := <-done
		if r.err != nil || r.code != 200 {
			t.Fatalf("request after prefill died mid-transfer: %d %v %s", r.code, r.err, r.out)
		}
		checkCase(t, "arith", parseResponse(t, r.out))
		if metric(t, r3.url, "dsv4_router_retries_total") != 1 {
			t.Error("expected exactly one retry")
		}
		waitUntil(t, "decode rooms released", func() bool {
			return metric(t, d1.url, "dsv4_disagg_decode_rooms") == 0 && metric(t, d1.url, "dsv4_engine_live_sequences") == 0
		})
		if metric(t, d1.url, "dsv4_disagg_decode_failures_total") == 0 {
			t.Error("decode counted no failed fetch")
		}
	})

	t.Run("decode_killed", func(t *testing.T) {
		d2.kill()
		for range 4 {
			code, out, err := postJSON(ctx, rc.url, withField(cs["arith"], "stream", true))
			if err != nil || code != 200 {
				t.Fatalf("%d %v %s", code, err, out)
			}
			checkCase(t, "arith", parseSSE(t, out))
		}
		waitUntil(t, "dead decode marked unhealthy", func() bool { return !workerHealthy(t, rc.url, d2.url) })
		before := metric(t, d1.url, "dsv4_disagg_restored_prompts_total")
		for range 3 {
			if code, out, _ := postJSON(ctx, rc.url, cs["arith"]); code != 200 {
				t.Fatalf("%d %s", code, out)
			}
		}
		if after := metric(t, d1.url, "dsv4_disagg_restored_prompts_total"); after-before != 3 {
			t.Fatalf("the live decode server got %v of 3 requests", after-before)
		}
		// Whether a request met the dead server (and was retried) before the 200 ms
		// health check marked it down depends on timing and on power_of_two's picks,
		// so retries are not asserted here; the retry path is asserted exactly in
		// prefill_killed_mid_transfer.
		t.Logf("router retries after the decode kill: %v", metric(t, rc.url, "dsv4_router_retries_total"))
	})
}

// labeled reads one labeled sample (exact series name) from /metrics.
func labeled(t *testing.T, base, series string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return 0
}

func atoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

func workerHealthy(t *testing.T, router, url string) bool {
	var ws []struct {
		URL     string `json:"url"`
		Healthy bool   `json:"healthy"`
	}
	getJSON(t, router+"/workers", &ws)
	for _, w := range ws {
		if w.URL == url {
			return w.Healthy
		}
	}
	t.Fatalf("worker %s not listed", url)
	return false
}

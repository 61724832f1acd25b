package disagg

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/models"
)

var (
	tinyOnce sync.Once
	tinyM    *dsv4.Model
	tinyErr  error
)

// tinyModel is the embedded trained model, loaded once for the package.
func tinyModel(t testing.TB) *dsv4.Model {
	t.Helper()
	tinyOnce.Do(func() {
		dir, err := models.TinyDir()
		if err != nil {
			tinyErr = err
			return
		}
		tinyM, tinyErr = dsv4.Load(context.Background(), dir)
	})
	if tinyErr != nil {
		t.Fatal(tinyErr)
	}
	return tinyM
}

type pdPair struct {
	p        *PrefillServer
	d        *DecodeServer
	pURL     string
	dURL     string
	bootPort int
	colo     *dsv4.Engine
}

func startPD(t *testing.T, tr Transport, lease time.Duration) *pdPair {
	t.Helper()
	return startPDtb(t, tr, lease)
}

func startPDb(b *testing.B) *pdPair { return startPDtb(b, &GRPCTransport{}, 0) }

func startPDtb(t testing.TB, tr Transport, lease time.Duration) *pdPair {
	t.Helper()
	return startPDWith(t, PrefillConfig{Transport: tr, Lease: lease, BootstrapTimeout: lease},
		DecodeConfig{Transport: tr, FetchTimeout: 20 * time.Second})
}

// startPDWith starts a prefill and a decode server of the tiny model with
// configs pc and dc (Model and Name are filled in).
func startPDWith(t testing.TB, pc PrefillConfig, dc DecodeConfig) *pdPair {
	t.Helper()
	m := tinyModel(t)
	pc.Model, pc.Name = m, "dsv4-tiny"
	dc.Model, dc.Name = m, "dsv4-tiny"
	p, err := NewPrefillServer(pc)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDecodeServer(dc)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.ServeBootstrap(ctx, lis) }()
	ps := httptest.NewServer(p.Handler())
	ds := httptest.NewServer(d.Handler())
	colo, err := dsv4.NewEngine(m, dsv4.EngineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ps.Close()
		ds.Close()
		cancel()
		<-done
		p.Close()
		d.Close()
		colo.Close(context.Background())
	})
	return &pdPair{p: p, d: d, pURL: ps.URL, dURL: ds.URL, bootPort: lis.Addr().(*net.TCPAddr).Port, colo: colo}
}

func post(t *testing.T, ctx context.Context, url, body string) (*http.Response, string) {
	t.Helper()
	return send(t, ctx, "POST", url+"/v1/chat/completions", body)
}

// send makes one JSON request and returns the response (body closed) and its body.
func send(t *testing.T, ctx context.Context, method, url, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

type chatOut struct {
	Choices []struct {
		Message struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			ToolCalls        []struct {
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage dsv4.Usage `json:"usage"`
}

// summary is what must be equal between PD and co-located answers.
func (c chatOut) summary() string {
	var sb strings.Builder
	for _, ch := range c.Choices {
		m := ch.Message
		if m.ReasoningContent != nil {
			sb.WriteString("R:" + *m.ReasoningContent + "|")
		}
		if m.Content != nil {
			sb.WriteString("C:" + *m.Content + "|")
		}
		for _, tc := range m.ToolCalls {
			sb.WriteString("T:" + tc.Function.Name + tc.Function.Arguments + "|")
		}
		sb.WriteString("F:" + ch.FinishReason)
	}
	return sb.String()
}

func parseChat(t *testing.T, s string) chatOut {
	t.Helper()
	var c chatOut
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	return c
}

// sseSummary folds an SSE stream into the summary form.
func sseSummary(t *testing.T, s string) string {
	t.Helper()
	var r, c, tcs, fin string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	done := false
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			done = true
			continue
		}
		var ch struct {
			Choices []struct {
				Delta        dsv4.ChatDelta `json:"delta"`
				FinishReason *string        `json:"finish_reason"`
			} `json:"choices"`
			Error any `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &ch); err != nil || ch.Error != nil {
			t.Fatalf("bad event %q: %v", line, err)
		}
		for _, x := range ch.Choices {
			r += x.Delta.ReasoningContent
			c += x.Delta.Content
			for _, tc := range x.Delta.ToolCalls {
				if tc.Function.Name != "" {
					tcs += "|T:" + tc.Function.Name
				}
				tcs += tc.Function.Arguments
			}
			if x.FinishReason != nil {
				fin = *x.FinishReason
			}
		}
	}
	if !done {
		t.Fatalf("stream without [DONE]: %s", s)
	}
	var sb strings.Builder
	if r != "" {
		sb.WriteString("R:" + r + "|")
	}
	if c != "" || tcs == "" {
		sb.WriteString("C:" + c + "|")
	}
	if tcs != "" {
		sb.WriteString(strings.TrimPrefix(tcs, "|") + "|")
	}
	sb.WriteString("F:" + fin)
	return sb.String()
}

// TestServerInfoWhileBootstrapStarts: /server_info reports the bootstrap
// port that ServeBootstrap, started in another goroutine, records; under
// go test -race the two used to race on the field (found by the -race build
// of examples/pd in examples/router's end-to-end test).
func TestServerInfoWhileBootstrapStarts(t *testing.T) {
	p, err := NewPrefillServer(PrefillConfig{Model: tinyModel(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	lis := listen(t)
	want := lis.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.ServeBootstrap(ctx, lis) }()
	defer func() { cancel(); <-done }()
	h := p.Handler()
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/server_info", nil))
		var info struct {
			Port int `json:"bootstrap_port"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &info); err != nil {
			t.Fatal(err)
		}
		if info.Port == want {
			return
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("bootstrap_port %d, want %d", info.Port, want)
		}
	}
}

// TestStartBootstrapPort (regression: /server_info reported bootstrap_port
// 0 until ServeBootstrap's goroutine ran, and the router had to re-poll):
// once StartBootstrap returns, the first /server_info and a sequential-mode
// kv_transfer_params already carry the listener's port, with no wait; the
// service stops with ctx and its channel yields the result, then closes.
func TestStartBootstrapPort(t *testing.T) {
	p, err := NewPrefillServer(PrefillConfig{Model: tinyModel(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	h := p.Handler()
	port := func(method, path, body, field string) int {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
		var out map[string]json.RawMessage
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || rec.Code != 200 {
			t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
		if field != "" {
			if err := json.Unmarshal(out[field], &out); err != nil {
				t.Fatalf("%s: %s", field, rec.Body)
			}
		}
		var n int
		if err := json.Unmarshal(out["bootstrap_port"], &n); err != nil {
			t.Fatalf("bootstrap_port: %s", rec.Body)
		}
		return n
	}
	if got := port("GET", "/server_info", "", ""); got != 0 {
		t.Fatalf("bootstrap_port %d before any listener, want 0", got)
	}
	lis := listen(t)
	want := lis.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithCancel(context.Background())
	errc := p.StartBootstrap(ctx, lis)
	for _, tc := range []struct{ method, path, body, field string }{
		{"GET", "/server_info", "", ""},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":1}`, "kv_transfer_params"},
	} {
		if got := port(tc.method, tc.path, tc.body, tc.field); got != want {
			t.Errorf("%s %s: bootstrap_port %d right after StartBootstrap, want %d", tc.method, tc.path, got, want)
		}
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("bootstrap service: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("bootstrap service still running after ctx ended")
	}
	if _, open := <-errc; open {
		t.Error("result channel not closed")
	}
}

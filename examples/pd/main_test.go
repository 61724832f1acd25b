package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsv4go/dsv4go/models"
)

// lineWriter hands the first line written to it to a channel.
type lineWriter struct{ c chan string }

func (w lineWriter) Write(b []byte) (int, error) {
	select {
	case w.c <- strings.TrimSpace(string(b)):
	default:
	}
	return len(b), nil
}

// startDecode runs the example as a decode server on a free port with the
// extra flags (startPD).
func startDecode(t *testing.T, extra ...string) string {
	t.Helper()
	return startPD(t, append([]string{"--disaggregation-mode", "decode", "--port", "0"}, extra...)...)
}

// startPD runs the example with args, waits for its listening line and
// returns it without "listening http=" ("HOST:PORT" or "HOST:PORT
// bootstrap=HOST:PORT"); the server is stopped, and its exit error reported,
// when the test ends.
func startPD(t *testing.T, args ...string) string {
	t.Helper()
	lines := make(chan string, 1)
	stdout = lineWriter{lines}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, args)
	}()
	exited := false
	t.Cleanup(func() {
		cancel()
		if exited {
			return
		}
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	select {
	case l := <-lines:
		return strings.TrimPrefix(l, "listening http=")
	case err := <-done:
		exited = true
		t.Fatalf("run: %v", err)
	case <-time.After(90 * time.Second):
		t.Fatal("no listening line")
	}
	return ""
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// captureStderr sends the example's log and usage to a buffer for the rest
// of the test.
func captureStderr(t *testing.T) *syncBuffer {
	var buf syncBuffer
	old := stderr
	stderr = &buf
	t.Cleanup(func() { stderr = old })
	return &buf
}

// postChat posts body to addr's /v1/chat/completions and returns the status
// and the body.
func postChat(t *testing.T, addr, body string) (int, string) {
	t.Helper()
	resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// apiError is an OpenAI error object.
type apiError struct {
	Error struct {
		Message string `json:"message"`
		Code    string `json:"code"`
	} `json:"error"`
}

// TestAllowedBootstrapHosts (BREAKER F18): --allowed-bootstrap-hosts is
// checked at start-up, and a decode server started with it refuses a
// bootstrap_host outside the list with 403 without dialling it (port 1 would
// give 502 connection refused), naming the flag in the error and logging one
// warning with the host and the room, while local requests still work.
func TestAllowedBootstrapHosts(t *testing.T) {
	if err := run(context.Background(), []string{"--disaggregation-mode", "decode", "--allowed-bootstrap-hosts", "10.0.0.0/99"}); err == nil ||
		!strings.Contains(err.Error(), "--allowed-bootstrap-hosts") {
		t.Fatalf("bad list: %v", err)
	}

	logs := captureStderr(t)
	addr := startDecode(t, "--allowed-bootstrap-hosts", "10.9.9.9,prefill.internal")
	msg := `"messages":[{"role":"user","content":"What is 17*23?"}],"max_tokens":3`
	st, b := postChat(t, addr, fmt.Sprintf(`{%s,"bootstrap_host":"127.0.0.1","bootstrap_port":1,"bootstrap_room":5}`, msg))
	var e apiError
	if json.Unmarshal([]byte(b), &e); st != 403 || e.Error.Code != "bootstrap_host_not_allowed" ||
		!strings.Contains(e.Error.Message, "--allowed-bootstrap-hosts") || !strings.Contains(e.Error.Message, `"127.0.0.1"`) {
		t.Fatalf("disallowed host: %d %s", st, b)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 || !strings.Contains(logs.String(), "host=127.0.0.1 room=5") {
		t.Errorf("want one warning with the host and the room, got %d:\n%s", n, logs)
	}
	if st, b := postChat(t, addr, "{"+msg+"}"); st != 200 {
		t.Fatalf("local request: %d %s", st, b)
	}
}

// TestDecodeBootstrapDefault: without --allowed-bootstrap-hosts a decode
// server dials loopback prefill servers only (a request naming another host
// gets 403 without a connection), and one on a non-loopback --host refuses
// to start, saying why, before loading the model; "*" cannot be mixed with
// other entries.
func TestDecodeBootstrapDefault(t *testing.T) {
	for _, host := range []string{"0.0.0.0", "::", "10.1.2.3"} {
		err := run(context.Background(), []string{"--disaggregation-mode", "decode", "--host", host, "--port", "0"})
		if err == nil || !strings.Contains(err.Error(), "--allowed-bootstrap-hosts is required") || !strings.Contains(err.Error(), `"*"`) {
			t.Errorf("--host %s without the flag: %v", host, err)
		}
	}
	if err := run(context.Background(), []string{"--disaggregation-mode", "decode", "--allowed-bootstrap-hosts", "*,10.0.0.1"}); err == nil ||
		!strings.Contains(err.Error(), "--allowed-bootstrap-hosts") {
		t.Errorf("mixed list: %v", err)
	}
	for host, want := range map[string]bool{"127.0.0.1": true, "::1": true, "[::1]": true, "localhost": true, "0.0.0.0": false, "": false, "example.com": false} {
		if isLoopback(host) != want {
			t.Errorf("isLoopback(%q) != %v", host, want)
		}
	}

	addr := startDecode(t)
	body := `{"messages":[{"role":"user","content":"What is 17*23?"}],"max_tokens":3,"bootstrap_host":"10.1.2.3","bootstrap_port":1,"bootstrap_room":5}`
	resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(b), "bootstrap_host_not_allowed") {
		t.Fatalf("non-loopback bootstrap_host by default: %d %s", resp.StatusCode, b)
	}
}

// TestRoleFlags: flags that do not apply to the --disaggregation-mode, and a
// prefill server on a wildcard --host without --bootstrap-host, and a
// negative --context-length or a --max-body-bytes below 1 (as
// examples/server's), are refused at start-up (before the model is
// loaded) with a message naming the flag.
func TestRoleFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--disaggregation-mode", "prefill", "--host", "0.0.0.0"}, "--bootstrap-host is required"},
		{[]string{"--disaggregation-mode", "prefill", "--host", "::"}, "--bootstrap-host is required"},
		{[]string{"--disaggregation-mode", "prefill", "--host", "[::]"}, "--bootstrap-host is required"},
		{[]string{"--disaggregation-mode", "prefill", "--host", ""}, "--bootstrap-host is required"},
		{[]string{"--disaggregation-mode", "prefill", "--host", "0.0.0.0", "--bootstrap-host", "0.0.0.0"}, "wildcard"},
		{[]string{"--disaggregation-mode", "prefill", "--bootstrap-host", ""}, "wildcard"},
		{[]string{"--disaggregation-mode", "prefill", "--allowed-bootstrap-hosts", "10.0.0.1"}, "only applies to decode servers"},
		{[]string{"--disaggregation-mode", "null", "--allowed-bootstrap-hosts", "*"}, "only applies to decode servers"},
		{[]string{"--disaggregation-mode", "decode", "--bootstrap-host", "10.0.0.1"}, "only applies to prefill servers"},
		{[]string{"--disaggregation-mode", "both"}, "--disaggregation-mode must be"},
		{[]string{"--port", "0", "extra"}, "unexpected arguments"},
		{[]string{"--port", "0", "--context-length", "-5"}, "--context-length must be >= 0"},
		{[]string{"--disaggregation-mode", "decode", "--context-length", "-1"}, "--context-length must be >= 0"},
		{[]string{"--port", "0", "--max-body-bytes", "0"}, "--max-body-bytes must be >= 1, got 0"},
		{[]string{"--disaggregation-mode", "prefill", "--max-body-bytes", "-5"}, "--max-body-bytes must be >= 1, got -5"},
		{[]string{"--disaggregation-mode", "prefill", "--max-parked-states", "0"}, "--max-parked-states and --max-parked-bytes must be >= 1, got 0 and"},
		{[]string{"--disaggregation-mode", "prefill", "--max-parked-bytes", "-1"}, "must be >= 1, got 256 and -1"},
		{[]string{"--disaggregation-mode", "decode", "--max-parked-states", "4"}, "--max-parked-states only applies to prefill servers"},
		{[]string{"--disaggregation-mode", "null", "--max-parked-bytes", "4096"}, "--max-parked-bytes only applies to prefill servers"},
	} {
		err := run(context.Background(), tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
	for host, want := range map[string]bool{"": true, "0.0.0.0": true, "::": true, "[::]": true, "::ffff:0.0.0.0": true,
		"127.0.0.1": false, "10.0.0.5": false, "prefill-0.internal": false, "localhost": false} {
		if isWildcard(host) != want {
			t.Errorf("isWildcard(%q) != %v", host, want)
		}
	}
}

// TestSequentialBootstrapHost: a prefill server advertises --bootstrap-host
// (default --host) as bootstrap_host in its sequential-mode
// kv_transfer_params, and a decode server handed those fetches the state
// and answers.
func TestSequentialBootstrapHost(t *testing.T) {
	for _, tc := range []struct {
		extra []string
		want  string
	}{
		{nil, "127.0.0.1"},
		{[]string{"--bootstrap-host", "localhost"}, "localhost"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			line := startPD(t, append([]string{"--disaggregation-mode", "prefill", "--port", "0", "--disaggregation-bootstrap-port", "0"}, tc.extra...)...)
			paddr, _, _ := strings.Cut(line, " ")
			daddr := startDecode(t)
			st, b := postChat(t, paddr, `{"messages":[{"role":"user","content":"What is 17*23?"}],"max_tokens":3}`)
			var pr struct {
				KV json.RawMessage `json:"kv_transfer_params"`
			}
			var bs struct {
				Host string `json:"bootstrap_host"`
			}
			if json.Unmarshal([]byte(b), &pr); st != 200 || json.Unmarshal(pr.KV, &bs) != nil || bs.Host != tc.want {
				t.Fatalf("prefill: %d %s, want bootstrap_host %q", st, b, tc.want)
			}
			st, b = postChat(t, daddr, `{"messages":[{"role":"user","content":"What is 17*23?"}],"max_tokens":3,"kv_transfer_params":`+string(pr.KV)+`}`)
			if st != 200 || !strings.Contains(b, `"choices":[{`) {
				t.Fatalf("decode: %d %s", st, b)
			}
		})
	}
}

// TestServerInfoBootstrapPort (regression: /server_info of a prefill server
// could report bootstrap_port 0 until the bootstrap service's goroutine ran,
// and the router re-polled): the first /server_info after the listening line
// reports the announced bootstrap port.
func TestServerInfoBootstrapPort(t *testing.T) {
	line := startPD(t, "--disaggregation-mode", "prefill", "--port", "0", "--disaggregation-bootstrap-port", "0")
	paddr, boot, ok := strings.Cut(line, " bootstrap=")
	if !ok {
		t.Fatalf("listening line %q has no bootstrap address", line)
	}
	resp, err := http.Get("http://" + paddr + "/server_info")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info struct {
		Port int `json:"bootstrap_port"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		t.Fatal(err)
	}
	if want := boot[strings.LastIndex(boot, ":")+1:]; fmt.Sprint(info.Port) != want {
		t.Fatalf("first /server_info: bootstrap_port %d, want %s (announced %s)", info.Port, want, boot)
	}
}

// TestTinyContextLength: with the embedded model and no --context-length,
// pd serves models.TinyContextLength tokens as examples/server does (a
// request needing more gets 400 context_length_exceeded); an explicit
// --context-length still wins.
func TestTinyContextLength(t *testing.T) {
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":"What is 17*23?"}],"max_tokens":%d}`, models.TinyContextLength)
	var e apiError
	st, b := postChat(t, startDecode(t), body)
	if json.Unmarshal([]byte(b), &e); st != 400 || e.Error.Code != "context_length_exceeded" {
		t.Fatalf("default: %d %s", st, b)
	}
	st, b = postChat(t, startDecode(t, "--context-length", "64"), `{"messages":[{"role":"user","content":"What is 17*23?"}],"max_tokens":60}`)
	if json.Unmarshal([]byte(b), &e); st != 400 || e.Error.Code != "context_length_exceeded" {
		t.Fatalf("--context-length 64: %d %s", st, b)
	}
}

// TestMaxBodyBytesFlag: --max-body-bytes bounds the request body as
// examples/server's flag does: one byte over gets 413 request_too_large
// with examples/server's message; the limit itself is served.
func TestMaxBodyBytesFlag(t *testing.T) {
	const limit = 200
	addr := startDecode(t, "--max-body-bytes", fmt.Sprint(limit))
	body := func(n int) string {
		head, tail := `{"messages":[{"role":"user","content":"`, `"}],"max_tokens":1}`
		return head + strings.Repeat("a", n-len(head)-len(tail)) + tail
	}
	var e apiError
	st, b := postChat(t, addr, body(limit+1))
	if json.Unmarshal([]byte(b), &e); st != 413 || e.Error.Code != "request_too_large" || e.Error.Message != "request body over 200 bytes" {
		t.Errorf("%d bytes: %d %s", limit+1, st, b)
	}
	if st, b := postChat(t, addr, body(limit)); st != 200 {
		t.Errorf("%d bytes: %d %s", limit, st, b)
	}
}

// TestHelp: -h prints the usage, every flag included, and exits 0.
func TestHelp(t *testing.T) {
	out := captureStderr(t)
	err := run(context.Background(), []string{"-h"})
	if !errors.Is(err, flag.ErrHelp) || exitCode(err) != 0 {
		t.Fatalf("-h: %v (exit %d)", err, exitCode(err))
	}
	for _, f := range []string{"-bootstrap-host", "-allowed-bootstrap-hosts", "-context-length", "-disaggregation-mode", "-max-body-bytes"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("usage lacks %s:\n%s", f, out)
		}
	}
	if exitCode(errors.New("x")) != 1 || exitCode(nil) != 0 {
		t.Error("exitCode")
	}
}

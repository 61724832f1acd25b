package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
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
// extra flags, waits for its listening line and returns the address; the
// server is stopped, and its exit error reported, when the test ends.
func startDecode(t *testing.T, extra ...string) string {
	t.Helper()
	lines := make(chan string, 1)
	stdout = lineWriter{lines}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"--disaggregation-mode", "decode", "--port", "0"}, extra...))
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

// TestAllowedBootstrapHosts (BREAKER F18): --allowed-bootstrap-hosts is
// checked at start-up, and a decode server started with it refuses a
// bootstrap_host outside the list with 403 without dialling it (port 1 would
// give 502 connection refused), while local requests still work.
func TestAllowedBootstrapHosts(t *testing.T) {
	if err := run(context.Background(), []string{"--disaggregation-mode", "decode", "--allowed-bootstrap-hosts", "10.0.0.0/99"}); err == nil ||
		!strings.Contains(err.Error(), "--allowed-bootstrap-hosts") {
		t.Fatalf("bad list: %v", err)
	}

	addr := startDecode(t, "--allowed-bootstrap-hosts", "10.9.9.9,prefill.internal")
	postJSON := func(body string) (int, string) {
		resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	msg := `"messages":[{"role":"user","content":"What is 17*23?"}],"max_tokens":3`
	st, b := postJSON(fmt.Sprintf(`{%s,"bootstrap_host":"127.0.0.1","bootstrap_port":1,"bootstrap_room":5}`, msg))
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(b), &e); st != 403 || e.Error.Code != "bootstrap_host_not_allowed" {
		t.Fatalf("disallowed host: %d %s", st, b)
	}
	if st, b := postJSON("{" + msg + "}"); st != 200 {
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

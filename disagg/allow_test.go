package disagg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestHostAllowList(t *testing.T) {
	l, err := ParseHostAllowList(" 10.0.0.0/8, prefill-0.Internal ,::1,192.168.1.7 ")
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"10.1.2.3": true, "11.0.0.1": false, "prefill-0.internal": true, "PREFILL-0.internal.": true,
		"prefill-1.internal": false, "::1": true, "[::1]": true, "::2": false, "192.168.1.7": true,
		"::ffff:192.168.1.7": true, "192.168.1.8": false, "": false, "127.0.0.1": false,
	} {
		if got := l.Allows(host); got != want {
			t.Errorf("Allows(%q) = %v", host, got)
		}
	}
	if s := l.String(); s != "10.0.0.0/8,::1,192.168.1.7,prefill-0.internal" {
		t.Errorf("String() = %q", s)
	}
	// The empty list allows the loopback hosts only; "*" allows any host.
	empty, err := ParseHostAllowList(" , ")
	if err != nil || !empty.Empty() || empty.Any() || empty.String() != "" {
		t.Errorf("empty list: %v %v", empty, err)
	}
	for host, want := range map[string]bool{
		"127.0.0.1": true, "127.3.4.5": true, "::1": true, "[::1]": true, "::ffff:127.0.0.1": true, "localhost": true,
		"LocalHost.": true, "10.0.0.1": false, "prefill-0.internal": false, "0.0.0.0": false, "::": false, "": false,
	} {
		if empty.Allows(host) != want || (HostAllowList{}).Allows(host) != want {
			t.Errorf("empty list: Allows(%q) != %v", host, want)
		}
	}
	anyHost, err := ParseHostAllowList(" * ")
	if err != nil || !anyHost.Any() || anyHost.Empty() || !anyHost.Allows("anything") || !AnyHost.Allows("10.1.2.3") || anyHost.String() != "*" {
		t.Errorf("any host: %v %v", anyHost, err)
	}
	for _, bad := range []string{"10.0.0.0/99", "a b", "1.2.3.4:80", "[::1", "*,10.0.0.1"} {
		if _, err := ParseHostAllowList(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// recordHandler is a slog.Handler that keeps the records it is given.
type recordHandler struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}

// warnings returns the warning records' "host", "room" and "suppressed"
// attributes, one "host room suppressed" string each.
func (h *recordHandler) warnings() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.recs {
		if r.Level != slog.LevelWarn {
			continue
		}
		var host, room, suppressed string
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "host":
				host = a.Value.String()
			case "room":
				room = a.Value.String()
			case "suppressed":
				suppressed = a.Value.String()
			}
			return true
		})
		out = append(out, host+" "+room+" "+suppressed)
	}
	return out
}

// TestBootstrapNotAllowedError: the refusal names the host and the setting
// that allows it, and matches ErrBootstrapNotAllowed (HTTP 403
// bootstrap_host_not_allowed).
func TestBootstrapNotAllowedError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want []string
	}{
		{&BootstrapNotAllowedError{Host: "10.1.2.3"}, []string{`"10.1.2.3"`, "--allowed-bootstrap-hosts", "DecodeConfig.AllowedBootstrapHosts", "not resolved"}},
		{fmt.Errorf("decode: %w", &BootstrapNotAllowedError{Host: "localhost"}), []string{`"localhost"`, "bootstrap_host not allowed"}},
	} {
		if !errors.Is(tc.err, ErrBootstrapNotAllowed) {
			t.Errorf("%v: not ErrBootstrapNotAllowed", tc.err)
		}
		var e *BootstrapNotAllowedError
		if !errors.As(tc.err, &e) {
			t.Errorf("%v: not a *BootstrapNotAllowedError", tc.err)
		}
		for _, w := range tc.want {
			if !strings.Contains(tc.err.Error(), w) {
				t.Errorf("%q lacks %q", tc.err, w)
			}
		}
		if e := apiError(tc.err); e.Status != 403 || e.Code != "bootstrap_host_not_allowed" || e.Param != "bootstrap_host" {
			t.Errorf("%v: %d %s %s", tc.err, e.Status, e.Code, e.Param)
		}
	}
}

// TestDecodeAllowedBootstrapHosts (BREAKER F18): a decode server with an
// allow-list refuses a bootstrap_host outside it with 403 at once, without
// dialling (port 1 would answer 502 connection refused), saying how to allow
// it and logging a warning with the host and the room for the first refusal
// of the host, then at most one a minute (on an injected clock) that counts
// the refusals not logged, and serves one inside it.
func TestDecodeAllowedBootstrapHosts(t *testing.T) {
	ctx := context.Background()
	other, _ := ParseHostAllowList("10.9.9.9")
	logs := &recordHandler{}
	pd := startPDWith(t, PrefillConfig{}, DecodeConfig{AllowedBootstrapHosts: other, FetchTimeout: 30 * time.Second, Logger: slog.New(logs)})
	var clock atomic.Int64 // minutes past start
	start := time.Now()
	pd.d.refusals.now = func() time.Time { return start.Add(time.Duration(clock.Load()) * time.Minute) }
	body := `{"messages":[{"role":"user","content":"What is 17*23?"}],"max_tokens":4}`
	for i, b := range []string{withBootstrap(body, 1, 7), withBootstrap(body, pd.bootPort, 8),
		`{"messages":[{"role":"user","content":"hi"}],"kv_transfer_params":{"bootstrap_host":"127.0.0.1","bootstrap_port":1,"bootstrap_room":9}}`,
		withBootstrap(body, 1, 10), withBootstrap(body, 1, 11)} {
		if i == 3 {
			clock.Store(1)
		}
		t0 := time.Now()
		resp, out := post(t, ctx, pd.dURL, b)
		if resp.StatusCode != 403 || errCode(t, out) != "bootstrap_host_not_allowed" || time.Since(t0) > fast ||
			!strings.Contains(out, "--allowed-bootstrap-hosts") {
			t.Fatalf("%d after %v: %s", resp.StatusCode, time.Since(t0), out)
		}
	}
	if got, want := logs.warnings(), []string{"127.0.0.1 7 0", "127.0.0.1 10 2"}; !slices.Equal(got, want) {
		t.Errorf("warnings %q, want %q", got, want)
	}
	// Requests without bootstrap fields (decode-only fallback) are unaffected.
	if resp, out := post(t, ctx, pd.dURL, body); resp.StatusCode != 200 {
		t.Fatalf("local request: %d %s", resp.StatusCode, out)
	}

	loop, _ := ParseHostAllowList("127.0.0.0/8")
	pd2 := startPDWith(t, PrefillConfig{}, DecodeConfig{AllowedBootstrapHosts: loop, FetchTimeout: 30 * time.Second})
	b := withBootstrap(body, pd2.bootPort, 10)
	pc := make(chan int, 1)
	go func() {
		resp, _ := post(t, ctx, pd2.pURL, b)
		pc <- resp.StatusCode
	}()
	if resp, out := post(t, ctx, pd2.dURL, b); resp.StatusCode != 200 || len(parseChat(t, out).Choices) != 1 {
		t.Fatalf("allowed host: %d %s", resp.StatusCode, out)
	}
	if st := <-pc; st != 200 {
		t.Fatalf("prefill: %d", st)
	}
}

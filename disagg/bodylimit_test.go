package disagg

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestMaxBodyBytes: PrefillConfig, DecodeConfig and RouterConfig.MaxBodyBytes
// bound the request body as examples/server's --max-body-bytes does: a body
// of the limit is read, one byte more is 413 with the OpenAI error object
// {type invalid_request_error, param null, code request_too_large, message
// "request body over N bytes"} (examples/server TestPDErrorParity checks the
// objects are the same bytes), on the chat endpoint, on /tokenize and at
// the router before any worker; 0 is MaxBodyBytes, a negative limit an
// error from the constructor.
func TestMaxBodyBytes(t *testing.T) {
	const limit = 300
	pd := startPDWith(t, PrefillConfig{MaxBodyBytes: limit}, DecodeConfig{MaxBodyBytes: limit, FetchTimeout: 30 * time.Second})
	var rec recorder
	worker := fakeServer(t, &rec, func(w http.ResponseWriter, _ map[string]json.RawMessage) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"x","object":"chat.completion","choices":[]}`)
	})
	targets := []struct{ name, url string }{
		{"prefill", pd.pURL},
		{"decode", pd.dURL},
		{"router", routerFor(t, RouterConfig{Workers: []string{worker.URL}, MaxBodyBytes: limit})},
	}
	// body returns a chat body of exactly n bytes.
	body := func(n int) string {
		head, tail := `{"messages":[{"role":"user","content":"`, `"}],"max_tokens":1}`
		return head + strings.Repeat("a", n-len(head)-len(tail)) + tail
	}
	for _, tg := range targets {
		resp, b := post(t, t.Context(), tg.url, body(limit+1))
		var e struct{ Error *apiErr }
		if err := json.Unmarshal([]byte(b), &e); err != nil || e.Error == nil || resp.StatusCode != http.StatusRequestEntityTooLarge ||
			e.Error.Type != "invalid_request_error" || e.Error.Param != nil || orNull(e.Error.Code) != `"request_too_large"` ||
			e.Error.Message != fmt.Sprintf("request body over %d bytes", limit) {
			t.Errorf("%s: %d bytes: %d %s", tg.name, limit+1, resp.StatusCode, b)
		}
		if tg.name == "prefill" {
			continue // a whole prefill request of this size needs a decode side
		}
		if resp, b := post(t, t.Context(), tg.url, body(limit)); resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d bytes: %d %s", tg.name, limit, resp.StatusCode, b)
		}
	}
	if n := rec.calls.Load(); n != 1 { // the body of the limit; never the larger one
		t.Errorf("the worker got %d requests", n)
	}
	resp, b := send(t, t.Context(), "POST", pd.dURL+"/tokenize", `{"prompt":"`+strings.Repeat("a", limit)+`"}`)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(b, `"request_too_large"`) {
		t.Errorf("decode /tokenize over the limit: %d %s", resp.StatusCode, b)
	}

	// the default, and a negative limit
	rt, err := NewRouter(RouterConfig{Workers: []string{worker.URL}, HealthInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	rt.Close()
	if rt.cfg.MaxBodyBytes != MaxBodyBytes {
		t.Errorf("default router limit %d", rt.cfg.MaxBodyBytes)
	}
	m := tinyModel(t)
	for name, err := range map[string]error{
		"router":  second(NewRouter(RouterConfig{Workers: []string{worker.URL}, HealthInterval: -1, MaxBodyBytes: -1})),
		"prefill": second(NewPrefillServer(PrefillConfig{Model: m, MaxBodyBytes: -1})),
		"decode":  second(NewDecodeServer(DecodeConfig{Model: m, MaxBodyBytes: -1})),
	} {
		if err == nil || !strings.Contains(err.Error(), "MaxBodyBytes must be >= 0") {
			t.Errorf("%s with MaxBodyBytes -1: %v", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

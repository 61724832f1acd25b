package disagg

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestPing: the prefill and decode servers answer GET and POST /ping as
// /health (vLLM's api_server.py serves /ping, SageMaker's health check,
// with its health handler): 200, an empty body, no API key needed.
func TestPing(t *testing.T) {
	m := tinyModel(t)
	p, err := NewPrefillServer(PrefillConfig{Model: m, APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDecodeServer(DecodeConfig{Model: m, APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	defer p.Close()
	for name, h := range map[string]http.Handler{"prefill": p.Handler(), "decode": d.Handler()} {
		srv := httptest.NewServer(h)
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			req, _ := http.NewRequest(method, srv.URL+"/ping", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || len(b) != 0 {
				t.Errorf("%s: %s /ping: %d %q", name, method, resp.StatusCode, b)
			}
		}
		srv.Close()
	}
}

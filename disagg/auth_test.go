package disagg

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestRouterAPIKey: with RouterConfig.APIKey set, the OpenAI surface needs
// the client's Bearer key (401 invalid_api_key otherwise, and nothing reaches
// a worker); the worker gets RouterConfig.WorkerAPIKey, or else the client's
// header; /health, /version and /metrics stay open.
func TestRouterAPIKey(t *testing.T) {
	var mu sync.Mutex
	var got []string // Authorization headers the worker saw on /v1/chat/completions
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" {
			mu.Lock()
			got = append(got, r.Header.Get("Authorization"))
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","choices":[]}`)
	}))
	defer worker.Close()
	const body = `{"messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name, workerKey, auth string
		status                int
		forwarded             string // the worker's Authorization ("-": not reached)
	}{
		{"no header", "", "", http.StatusUnauthorized, "-"},
		{"wrong key", "", "Bearer nope", http.StatusUnauthorized, "-"},
		{"lower-case scheme", "", "bearer sekret", http.StatusUnauthorized, "-"},
		{"client key forwarded", "", "Bearer sekret", http.StatusOK, "Bearer sekret"},
		{"worker key sent", "wkey", "Bearer sekret", http.StatusOK, "Bearer wkey"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			rt, err := NewRouter(RouterConfig{Workers: []string{worker.URL}, HealthInterval: -1,
				APIKey: "sekret", WorkerAPIKey: tc.workerKey})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			srv := httptest.NewServer(rt.Handler())
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			if tc.status == http.StatusUnauthorized && !strings.Contains(string(b), `"code":"invalid_api_key"`) {
				t.Errorf("401 body %s lacks code invalid_api_key", b)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case tc.forwarded == "-" && len(got) != 0:
				t.Errorf("the worker was reached: %q", got)
			case tc.forwarded != "-" && (len(got) != 1 || got[0] != tc.forwarded):
				t.Errorf("worker saw Authorization %q, want %q", got, tc.forwarded)
			}
			for _, path := range []string{"/health", "/version", "/metrics"} {
				resp, err := http.Get(srv.URL + path)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusUnauthorized {
					t.Errorf("%s needs the key; it should stay open", path)
				}
			}
		})
	}
}

// TestDecodeServerAPIKey: DecodeConfig.APIKey guards /v1/* and leaves
// /health open.
func TestDecodeServerAPIKey(t *testing.T) {
	d, err := NewDecodeServer(DecodeConfig{Model: tinyModel(t), Name: "dsv4-tiny", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	srv := httptest.NewServer(d.Handler())
	defer srv.Close()
	for _, tc := range []struct {
		path, auth string
		status     int
	}{
		{"/v1/models", "", http.StatusUnauthorized},
		{"/v1/models", "Bearer x", http.StatusUnauthorized},
		{"/v1/models", "Bearer k", http.StatusOK},
		{"/v1/models/dsv4-tiny", "Bearer k", http.StatusOK},
		{"/health", "", http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+tc.path, nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("GET %s with %q: %d, want %d", tc.path, tc.auth, resp.StatusCode, tc.status)
		}
	}
}

package disagg

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func get(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s %s: Content-Type %q: %s", method, url, ct, b)
	}
	return resp.StatusCode, string(b)
}

// modelIDs parses an OpenAI model list; every entry's "root" must be its id.
func modelIDs(t *testing.T, body string) []string {
	t.Helper()
	var l struct {
		Object string `json:"object"`
		Data   []struct {
			ID     string `json:"id"`
			Object string `json:"object"`
			Root   string `json:"root"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &l); err != nil || l.Object != "list" {
		t.Fatalf("not a model list: %v: %s", err, body)
	}
	var ids []string
	for _, m := range l.Data {
		if m.Object != "model" || m.Root != m.ID {
			t.Fatalf("bad model object: %s", body)
		}
		ids = append(ids, m.ID)
	}
	return ids
}

// maxModelLen returns the first entry's max_model_len of an OpenAI model list
// (0 when absent).
func maxModelLen(t *testing.T, body string) int {
	t.Helper()
	var l struct {
		Data []struct {
			MaxModelLen int `json:"max_model_len"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &l); err != nil || len(l.Data) == 0 {
		t.Fatalf("not a model list: %v: %s", err, body)
	}
	return l.Data[0].MaxModelLen
}

// TestModelsAndErrors (BREAKER F17): the servers and the router answer GET
// /v1/models with an OpenAI list (the router from a worker, else from its own
// view), unknown paths and PD-mode /v1/completions with 404 OpenAI error
// objects.
func TestModelsAndErrors(t *testing.T) {
	pd := startPDWith(t, PrefillConfig{}, DecodeConfig{})
	for _, u := range []string{pd.pURL, pd.dURL} {
		if st, b := get(t, "GET", u+"/v1/models"); st != 200 || strings.Join(modelIDs(t, b), ",") != "dsv4-tiny" || maxModelLen(t, b) <= 0 {
			t.Errorf("%s/v1/models: %d %s", u, st, b)
		}
		if st, b := get(t, "GET", u+"/nope"); st != 404 || errCode(t, b) != "" || !strings.Contains(b, `"type":"not_found_error"`) {
			t.Errorf("%s/nope: %d %s", u, st, b)
		}
	}

	// PD router over the real pair: the decode server's list.
	rpd := routerFor(t, RouterConfig{PD: true, Prefill: []PrefillWorker{{URL: pd.pURL, BootstrapPort: pd.bootPort}}, Decode: []string{pd.dURL}})
	if st, b := get(t, "GET", rpd+"/v1/models"); st != 200 || strings.Join(modelIDs(t, b), ",") != "dsv4-tiny" {
		t.Errorf("router /v1/models: %d %s", st, b)
	}
	req, _ := http.NewRequest("POST", rpd+"/v1/completions", strings.NewReader(`{"prompt":"hi","max_tokens":3}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || errCode(t, string(b)) != "unsupported_endpoint" {
		t.Errorf("PD /v1/completions: %d %s", resp.StatusCode, b)
	}
	for _, tc := range []struct {
		method, path string
		st           int
		code         string
	}{{"GET", "/nope", 404, ""}, {"GET", "/v1/embeddings", 404, ""}, {"POST", "/v1/models", 405, "method_not_allowed"}} {
		if st, b := get(t, tc.method, rpd+tc.path); st != tc.st || errCode(t, b) != tc.code {
			t.Errorf("%s %s: %d %s", tc.method, tc.path, st, b)
		}
	}

	// Workers without /v1/models (plain-text 404): the router's own config.
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(bare.Close)
	for _, tc := range []struct {
		cfg  RouterConfig
		want string
	}{
		{RouterConfig{Workers: []string{bare.URL}, ModelName: "my-model"}, "my-model"},
		{RouterConfig{Workers: []string{bare.URL}}, "dsv4"},
	} {
		u := routerFor(t, tc.cfg)
		if st, b := get(t, "GET", u+"/v1/models"); st != 200 || strings.Join(modelIDs(t, b), ",") != tc.want {
			t.Errorf("fallback /v1/models: %d %s, want %s", st, b, tc.want)
		}
	}
}

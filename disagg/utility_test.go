package disagg

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/internal/openaiwire"
)

// utilityWorker is a regular worker that records each request's method,
// path and body and answers the utility endpoints as examples/server does.
type utilityWorker struct {
	*httptest.Server
	mu  sync.Mutex
	got []string // "METHOD path body"
}

func startUtilityWorker(t *testing.T) *utilityWorker {
	u := &utilityWorker{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" || r.URL.Path == "/server_info" {
			io.WriteString(w, `{}`)
			return
		}
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.got = append(u.got, r.Method+" "+r.URL.EscapedPath()+" "+string(b))
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/tokenize":
			io.WriteString(w, `{"count":2,"max_model_len":4096,"tokens":[5,6],"token_strs":null}`)
		case "/detokenize":
			if strings.Contains(string(b), "999999") {
				w.WriteHeader(400)
				io.WriteString(w, `{"error":{"message":"token id 999999 is not in the vocabulary","type":"invalid_request_error","param":"tokens","code":null}}`)
				return
			}
			io.WriteString(w, `{"prompt":"hi"}`)
		case "/version":
			io.WriteString(w, `{"version":"v1.2.3"}`)
		case "/v1/models/w-model", "/v1/models/alias/path":
			io.WriteString(w, `{"id":"w-model","object":"model","created":1,"owned_by":"dsv4go","root":"w-model","max_model_len":4096}`)
		default:
			if strings.HasPrefix(r.URL.Path, "/v1/models/") {
				w.WriteHeader(404)
				io.WriteString(w, `{"error":{"message":"no such model","type":"invalid_request_error","param":"model","code":"model_not_found"}}`)
				return
			}
			w.WriteHeader(404)
			io.WriteString(w, `{"error":{"message":"no route","type":"not_found_error","param":null,"code":null}}`)
		}
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *utilityWorker) last() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.got) == 0 {
		return ""
	}
	return u.got[len(u.got)-1]
}

func do(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	resp, b := send(t, context.Background(), method, url, body)
	return resp.StatusCode, b
}

// TestRouterUtilityEndpoints: in regular mode the router forwards POST
// /tokenize and /detokenize (body as sent, answer and status as the worker
// gave them) and GET /version and /v1/models/{id} (a worker's 404
// model_not_found included); PD mode answers /tokenize, /detokenize and
// /version 404 unsupported_endpoint.
func TestRouterUtilityEndpoints(t *testing.T) {
	wk := startUtilityWorker(t)
	url := routerFor(t, RouterConfig{Workers: []string{wk.URL}})
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		wantBody, wantSeen       string
	}{
		{"tokenize", "POST", "/tokenize", `{"prompt":"héllo","add_special_tokens":false}`, 200,
			`"tokens":[5,6]`, `POST /tokenize {"add_special_tokens":false,"prompt":"héllo"}`},
		{"tokenize chat", "POST", "/tokenize", `{"messages":[{"role":"user","content":"x"}]}`, 200,
			`"count":2`, `POST /tokenize {"messages":[{"role":"user","content":"x"}]}`},
		{"detokenize", "POST", "/detokenize", `{"tokens":[5,6]}`, 200, `{"prompt":"hi"}`, `POST /detokenize {"tokens":[5,6]}`},
		{"detokenize 400", "POST", "/detokenize", `{"tokens":[999999]}`, 400, `"param":"tokens"`, `POST /detokenize {"tokens":[999999]}`},
		{"version", "GET", "/version", ``, 200, `{"version":"v1.2.3"}`, `GET /version `},
		{"model", "GET", "/v1/models/w-model", ``, 200, `"id":"w-model"`, `GET /v1/models/w-model `},
		{"model alias with slash", "GET", "/v1/models/alias%2Fpath", ``, 200, `"id":"w-model"`, `GET /v1/models/alias%2Fpath `},
		{"model unknown", "GET", "/v1/models/nope", ``, 404, `"code":"model_not_found"`, `GET /v1/models/nope `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, b := do(t, tc.method, url+tc.path, tc.body)
			if st != tc.status || !strings.Contains(b, tc.wantBody) {
				t.Errorf("%d %s; want %d with %s", st, b, tc.status, tc.wantBody)
			}
			if got := wk.last(); got != tc.wantSeen {
				t.Errorf("worker saw %q, want %q", got, tc.wantSeen)
			}
		})
	}
	// Bad bodies are refused by the router before forwarding, as for chat.
	n := len(wk.got)
	if st, b := do(t, "POST", url+"/tokenize", `{"prompt":`); st != 400 || !strings.Contains(b, "malformed JSON") {
		t.Errorf("malformed: %d %s", st, b)
	}
	if st, b := do(t, "GET", url+"/tokenize", ``); st != 405 || errCode(t, b) != "method_not_allowed" {
		t.Errorf("GET /tokenize: %d %s", st, b)
	}
	if st, b := do(t, "POST", url+"/version", `{}`); st != 405 || errCode(t, b) != "method_not_allowed" {
		t.Errorf("POST /version: %d %s", st, b)
	}
	if len(wk.got) != n {
		t.Errorf("refused requests reached the worker: %v", wk.got[n:])
	}

	// A worker without /v1/models/{id}: the router's own view.
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(bare.Close)
	u := routerFor(t, RouterConfig{Workers: []string{bare.URL}, ModelName: "my-model"})
	if st, b := get(t, "GET", u+"/v1/models/my-model"); st != 200 || !strings.Contains(b, `"id":"my-model"`) || !strings.Contains(b, `"object":"model"`) {
		t.Errorf("fallback model: %d %s", st, b)
	}
	if st, b := get(t, "GET", u+"/v1/models/other"); st != 404 || errCode(t, b) != "model_not_found" {
		t.Errorf("fallback unknown model: %d %s", st, b)
	}
	if st, b := get(t, "GET", u+"/version"); st != 503 || errCode(t, b) != "no_workers" {
		t.Errorf("version without a worker answer: %d %s", st, b)
	}
}

// TestPDUtilityEndpoints: the prefill and decode servers answer GET
// /v1/models/{id} (name and aliases; 404 model_not_found otherwise), a PD
// router relays the decode server's answer; the decode server answers POST
// /tokenize and /detokenize (the decode engine's ids and text) and a PD
// router forwards them to it (same status and body), while /version and
// /v1/completions stay 404 unsupported_endpoint in PD mode.
func TestPDUtilityEndpoints(t *testing.T) {
	pd := startPDWith(t, PrefillConfig{Aliases: []string{"models/dsv4-tiny"}}, DecodeConfig{Aliases: []string{"models/dsv4-tiny"}})
	rpd := routerFor(t, RouterConfig{PD: true, Prefill: []PrefillWorker{{URL: pd.pURL, BootstrapPort: pd.bootPort}}, Decode: []string{pd.dURL}})
	for _, u := range []string{pd.pURL, pd.dURL, rpd} {
		_, list := get(t, "GET", u+"/v1/models")
		var l struct {
			Data []json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal([]byte(list), &l); err != nil || len(l.Data) != 1 {
			t.Fatalf("%s/v1/models: %s", u, list)
		}
		for _, id := range []string{"dsv4-tiny", "models/dsv4-tiny", "models%2Fdsv4-tiny"} {
			if st, b := get(t, "GET", u+"/v1/models/"+id); st != 200 || strings.TrimSpace(b) != strings.TrimSpace(string(l.Data[0])) {
				t.Errorf("%s/v1/models/%s: %d %s, list entry %s", u, id, st, b, l.Data[0])
			}
		}
		if st, b := get(t, "GET", u+"/v1/models/gpt-4"); st != 404 || errCode(t, b) != "model_not_found" {
			t.Errorf("%s unknown model: %d %s", u, st, b)
		}
		if st, b := do(t, "POST", u+"/v1/models/dsv4-tiny", `{}`); st != 405 || errCode(t, b) != "method_not_allowed" {
			t.Errorf("%s POST /v1/models/{id}: %d %s", u, st, b)
		}
	}
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/version", ``}, {"POST", "/v1/completions", `{"prompt":"x"}`},
	} {
		if st, b := do(t, tc.method, rpd+tc.path, tc.body); st != 404 || errCode(t, b) != "unsupported_endpoint" {
			t.Errorf("PD %s %s: %d %s", tc.method, tc.path, st, b)
		}
	}

	eng := pd.d.Engine()
	promptIDs, err := eng.Tokenize("héllo world")
	if err != nil {
		t.Fatal(err)
	}
	var chatReq dsv4.ChatRequest
	if err := json.Unmarshal([]byte(`{"messages":[{"role":"user","content":"x"}]}`), &chatReq); err != nil {
		t.Fatal(err)
	}
	chatIDs, err := eng.ChatPrompt(&chatReq)
	if err != nil {
		t.Fatal(err)
	}
	text, err := eng.Detokenize(chatIDs)
	if err != nil {
		t.Fatal(err)
	}
	idsJSON := func(ids []int32) string { b, _ := json.Marshal(ids); return string(b) }
	for _, tc := range []struct {
		name, path, body string
		status           int
		want             string // the whole body (200) or the error code / param
	}{
		{"tokenize prompt", "/tokenize", `{"prompt":"héllo world","add_special_tokens":true}`, 200,
			`{"count":` + strconv.Itoa(len(promptIDs)) + `,"max_model_len":` + strconv.Itoa(eng.MaxContext()) + `,"tokens":` + idsJSON(promptIDs) + `,"token_strs":null}`},
		{"tokenize chat", "/tokenize", `{"model":"models/dsv4-tiny","messages":[{"role":"user","content":"x"}]}`, 200,
			`{"count":` + strconv.Itoa(len(chatIDs)) + `,"max_model_len":` + strconv.Itoa(eng.MaxContext()) + `,"tokens":` + idsJSON(chatIDs) + `,"token_strs":null}`},
		{"detokenize", "/detokenize", `{"tokens":` + idsJSON(chatIDs) + `}`, 200, `{"prompt":` + jsonText(text) + `}`},
		{"tokenize unknown model", "/tokenize", `{"model":"gpt-4","prompt":"x"}`, 404, "model_not_found"},
		{"tokenize neither", "/tokenize", `{}`, 400, "prompt"},
		{"detokenize out of vocab", "/detokenize", `{"tokens":[999999]}`, 400, "tokens"},
		{"detokenize missing", "/detokenize", `{}`, 400, "tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, b := do(t, "POST", pd.dURL+tc.path, tc.body)
			switch {
			case st != tc.status:
				t.Errorf("decode: %d %s; want %d", st, b, tc.status)
			case st == 200 && strings.TrimSpace(b) != tc.want:
				t.Errorf("decode: %s; want %s", b, tc.want)
			case st != 200 && errCode(t, b) != tc.want && errParam(t, b) != tc.want:
				t.Errorf("decode: %s; want code or param %q", b, tc.want)
			}
			if rst, rb := do(t, "POST", rpd+tc.path, tc.body); rst != st || rb != b {
				t.Errorf("router: %d %s; decode server: %d %s", rst, rb, st, b)
			}
		})
	}
	if st, b := do(t, "GET", pd.dURL+"/tokenize", ``); st != 405 || errCode(t, b) != "method_not_allowed" {
		t.Errorf("decode GET /tokenize: %d %s", st, b)
	}
	if st, b := do(t, "GET", rpd+"/detokenize", ``); st != 405 || errCode(t, b) != "method_not_allowed" {
		t.Errorf("router GET /detokenize: %d %s", st, b)
	}
}

// TestPDTokenizeAuth: a decode server with an APIKey guards /tokenize and
// /detokenize (401 invalid_api_key); a PD router forwards them with
// WorkerAPIKey (or else the client's Authorization), as it forwards chat.
func TestPDTokenizeAuth(t *testing.T) {
	pd := startPDWith(t, PrefillConfig{APIKey: "wk"}, DecodeConfig{APIKey: "wk"})
	pw := []PrefillWorker{{URL: pd.pURL, BootstrapPort: pd.bootPort}}
	authed := func(url, path, body, key string) (int, string) {
		req, _ := http.NewRequest("POST", url+path, strings.NewReader(body))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/tokenize", "/detokenize"} {
		body := `{"prompt":"x"}`
		if path == "/detokenize" {
			body = `{"tokens":[1]}`
		}
		if st, b := authed(pd.dURL, path, body, ""); st != 401 || errCode(t, b) != "invalid_api_key" {
			t.Errorf("decode %s without a key: %d %s", path, st, b)
		}
		if st, b := authed(pd.dURL, path, body, "wk"); st != 200 {
			t.Errorf("decode %s with its key: %d %s", path, st, b)
		}
		withWorkerKey := routerFor(t, RouterConfig{PD: true, APIKey: "rk", WorkerAPIKey: "wk", Prefill: pw, Decode: []string{pd.dURL}})
		if st, b := authed(withWorkerKey, path, body, ""); st != 401 || errCode(t, b) != "invalid_api_key" {
			t.Errorf("router %s without a key: %d %s", path, st, b)
		}
		if st, b := authed(withWorkerKey, path, body, "rk"); st != 200 {
			t.Errorf("router %s with WorkerAPIKey: %d %s", path, st, b)
		}
		passThrough := routerFor(t, RouterConfig{PD: true, Prefill: pw, Decode: []string{pd.dURL}})
		if st, b := authed(passThrough, path, body, "wk"); st != 200 {
			t.Errorf("router %s passing the client's key: %d %s", path, st, b)
		}
		if st, b := authed(passThrough, path, body, "bad"); st != 401 || errCode(t, b) != "invalid_api_key" {
			t.Errorf("router %s passing a bad key: %d %s", path, st, b)
		}
	}
}

// jsonText is s as a JSON string, escaped as the servers' json.Encoder
// writes it.
func jsonText(s string) string {
	b, _ := openaiwire.Marshal(s) // '<', '>', '&' as themselves, as vLLM writes them
	return string(b)
}

// errParam is the param of an OpenAI error body ("" if none).
func errParam(t *testing.T, body string) string {
	t.Helper()
	var e struct {
		Error struct {
			Param *string `json:"param"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Param == nil {
		return ""
	}
	return *e.Error.Param
}

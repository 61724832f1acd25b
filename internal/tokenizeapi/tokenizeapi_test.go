package tokenizeapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dsv4go/dsv4go/dsv4"
)

// stubEngine tokenizes a prompt as its bytes and refuses chats.
type stubEngine struct{}

func (stubEngine) Tokenize(s string) ([]int32, error) {
	ids := make([]int32, len(s))
	for i := range len(s) {
		ids[i] = int32(s[i])
	}
	return ids, nil
}

func (stubEngine) Detokenize(ids []int32) (string, error) {
	b := make([]byte, len(ids))
	for i, id := range ids {
		if id < 0 || id > 255 {
			return "", fmt.Errorf("%w: id %d", dsv4.ErrInvalidParams, id)
		}
		b[i] = byte(id)
	}
	return string(b), nil
}

func (stubEngine) ChatPrompt(*dsv4.ChatRequest) ([]int32, error) { return nil, dsv4.ErrNoChat }

func (stubEngine) TokenStrings(ids []int32) ([]string, error) {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = fmt.Sprintf("t%d", id)
	}
	return out, nil
}

// TestAPI: answers, refusals (with OnError's kinds), the body limit and
// the method check.
func TestAPI(t *testing.T) {
	var kinds []string
	a := &API{Engine: stubEngine{}, Model: "m", Aliases: []string{"a"}, MaxModelLen: 64, MaxBodyBytes: 64,
		OnError: func(ep Endpoint, kind string, err error) { kinds = append(kinds, string(ep)+":"+kind) }}
	h := http.NewServeMux()
	h.Handle("/tokenize", a.TokenizeHandler())
	h.Handle("/detokenize", a.DetokenizeHandler())
	for _, tc := range []struct {
		method, path, body string
		status             int
		want, kind         string
	}{
		{"POST", "/tokenize", `{"prompt":"hi","model":"a"}`, 200, `{"count":2,"max_model_len":64,"tokens":[104,105],"token_strs":null}`, ""},
		{"POST", "/tokenize", `{"prompt":""}`, 200, `{"count":0,"max_model_len":64,"tokens":[],"token_strs":null}`, ""},
		{"POST", "/tokenize", `{"prompt":"hi","return_token_strs":true}`, 200, `{"count":2,"max_model_len":64,"tokens":[104,105],"token_strs":["t104","t105"]}`, ""},
		{"POST", "/tokenize", `{"prompt":"hi","return_token_strs":false}`, 200, `{"count":2,"max_model_len":64,"tokens":[104,105],"token_strs":null}`, ""},
		{"POST", "/tokenize", `{"prompt":"","return_token_strs":true}`, 200, `{"count":0,"max_model_len":64,"tokens":[],"token_strs":[]}`, ""},
		{"POST", "/detokenize", `{"tokens":[104,105]}`, 200, `{"prompt":"hi"}`, ""},
		{"POST", "/tokenize", `{"prompt":"x","model":"z"}`, 404, `"code":"model_not_found"`, "tokenize:400"},
		{"POST", "/tokenize", `{}`, 400, `"param":"prompt"`, "tokenize:400"},
		{"POST", "/tokenize", `{"messages":[]}`, 501, `"type":"invalid_request_error"`, "tokenize:engine"},
		{"POST", "/detokenize", `{"tokens":[300]}`, 400, `id 300`, "detokenize:engine"},
		{"POST", "/detokenize", `{}`, 400, `"param":"tokens"`, "detokenize:400"},
		{"POST", "/tokenize", `{"prompt":"` + strings.Repeat("a", 100) + `"}`, 413, `"code":"request_too_large"`, ""},
		{"GET", "/tokenize", ``, 405, `"code":"method_not_allowed"`, ""},
	} {
		kinds = nil
		req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		b := strings.TrimSpace(rec.Body.String())
		if rec.Code != tc.status || (tc.status == 200 && b != tc.want) || !strings.Contains(b, tc.want) {
			t.Errorf("%s %s %s: %d %s; want %d %s", tc.method, tc.path, tc.body, rec.Code, b, tc.status, tc.want)
		}
		if got := strings.Join(kinds, ","); got != tc.kind {
			t.Errorf("%s %s: OnError %q, want %q", tc.path, tc.body, got, tc.kind)
		}
	}
}

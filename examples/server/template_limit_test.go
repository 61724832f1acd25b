package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/template"
)

// TestTemplateLimit: a --chat-template that hits a sandbox limit (here the
// range bound) answers 400 invalid_request_error with code
// template_limit_exceeded, not context_length_exceeded (BREAKER F25).
func TestTemplateLimit(t *testing.T) {
	j, err := template.ParseJinja(`{% for m in messages %}{{ m.content }}{% endfor %}{% for i in range(999999999) %}x{% endfor %}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, ServerConfig{}, dsv4.EngineOptions{
		Renderer:        &template.JinjaRenderer{Template: j},
		ReasoningParser: "none", ToolCallParser: "none",
	}, 0)
	for _, stream := range []string{"false", "true"} {
		resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream":`+stream+`}`))
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
				Code    string `json:"code"`
			} `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		e := body.Error
		if resp.StatusCode != http.StatusBadRequest || e.Type != "invalid_request_error" ||
			e.Code != "template_limit_exceeded" || !strings.Contains(e.Message, "template") {
			t.Errorf("stream %s: %d %+v, want 400 template_limit_exceeded", stream, resp.StatusCode, e)
		}
	}
}

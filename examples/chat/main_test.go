package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// The README's main command: one answer from the embedded tiny model.
func TestOneShot(t *testing.T) {
	if _, err := os.Stat("../../models/dsv4-tiny/model.safetensors"); err != nil {
		t.Skip("models/dsv4-tiny has no weights yet")
	}
	var out, errb bytes.Buffer
	if err := run([]string{"What is 17*23? Number only."}, strings.NewReader(""), &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if out.String() != "391\n" {
		t.Fatalf("got %q", out.String())
	}
	// interactive: two turns from stdin, thinking mode
	out.Reset()
	errb.Reset()
	in := "A train goes 60 km in 1.5 hours. Average speed? Answer briefly.\nWhat is 17*23? Number only.\n"
	if err := run([]string{"-think"}, strings.NewReader(in), &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if !strings.HasPrefix(out.String(), "The average speed is 40 km/h.\n") || !strings.Contains(errb.String(), "60 km / 1.5 h") {
		t.Fatalf("interactive: stdout %q stderr %q", out.String(), errb.String())
	}
}

func TestBadFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run([]string{"-no-such-flag"}, strings.NewReader(""), &out, &errb); err == nil {
		t.Fatal("no error for an unknown flag")
	}
	if err := run([]string{"-model", t.TempDir(), "hi"}, strings.NewReader(""), &out, &errb); err == nil {
		t.Fatal("no error for a directory without a model")
	}
}

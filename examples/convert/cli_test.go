package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// -h exits 0; a non-terminal stderr gets no progress bar frames.
func TestHelpAndNoBar(t *testing.T) {
	var errOut bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, &errOut); code != 0 || !strings.Contains(errOut.String(), "usage: convert") {
		t.Errorf("-h: exit %d, %q", code, errOut.String())
	}
	errOut.Reset()
	dst := filepath.Join(t.TempDir(), "out")
	if code := run(context.Background(), []string{"../../dsv4/testdata/ckpt_hf_bf16", dst}, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if s := errOut.String(); strings.Contains(s, "\r") || strings.Contains(s, "converting") || s != "wrote "+dst+"\n" {
		t.Errorf("stderr not a terminal, but: %q", s)
	}
}

package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsv4go/dsv4go/dsv4"
)

func TestRun(t *testing.T) {
	src := "../../dsv4/testdata/ckpt_hf_bf16"
	for _, f := range []struct {
		flag string
		want dsv4.Format
	}{{"mxfp4", dsv4.FormatMXFP4}, {"nvfp4", dsv4.FormatNVFP4}} {
		dst := filepath.Join(t.TempDir(), f.flag)
		var errOut bytes.Buffer
		if code := run(context.Background(), []string{"-experts", f.flag, "-input-scale", "0.25", src, dst}, &errOut); code != 0 {
			t.Fatalf("%s: exit %d: %s", f.flag, code, errOut.String())
		}
		ck, err := dsv4.OpenCheckpoint(context.Background(), dst)
		if err != nil {
			t.Fatal(err)
		}
		up := ck.Weights().Layers[2].MLP.Experts[1].Up
		if up.Format != f.want || ck.Weights().Layers[0].Attn.OAProj.Format != dsv4.FormatFP8Block {
			t.Errorf("%s: expert form %v", f.flag, up.Format)
		}
		if f.want == dsv4.FormatNVFP4 && up.InputScale != 0.25 {
			t.Errorf("input_scale %v", up.InputScale)
		}
		ck.Close()
	}
	var errOut bytes.Buffer
	if code := run(context.Background(), []string{"-experts", "int2", src, t.TempDir()}, &errOut); code != 1 || !strings.Contains(errOut.String(), "int2") {
		t.Errorf("bad format: exit %d, %q", code, errOut.String())
	}
	if code := run(context.Background(), []string{src}, &errOut); code != 2 {
		t.Errorf("usage: exit %d", code)
	}
}

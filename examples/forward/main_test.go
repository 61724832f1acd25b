package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

const model = "../../dsv4/testdata/forward/hc1-rope"

func TestRun(t *testing.T) {
	ctx := context.Background()
	run1 := func(args ...string) (map[string]json.RawMessage, error) {
		var out bytes.Buffer
		if err := run(ctx, args, &out, io.Discard); err != nil {
			return nil, err
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(out.Bytes(), &m); err != nil {
			t.Fatalf("%v: output %q is not a JSON object: %v", args, out.String(), err)
		}
		return m, nil
	}
	logits := func(m map[string]json.RawMessage) [][]float32 {
		var l [][]float32
		if err := json.Unmarshal(m["logits"], &l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	full, err := run1("-model", model, "-tokens", "5,17,3,9,40")
	if err != nil {
		t.Fatal(err)
	}
	fl := logits(full)
	if len(fl) != 5 || len(fl[0]) != 96 {
		t.Fatalf("full: %d rows of %d", len(fl), len(fl[0]))
	}
	inc, err := run1("-model", model, "-tokens", "5,17,3,9,40", "-prefill", "2")
	if err != nil {
		t.Fatal(err)
	}
	il := logits(inc)
	if len(il) != 4 {
		t.Fatalf("-prefill 2: %d rows, want 4", len(il))
	}
	for i := range il {
		for j := range il[i] {
			if il[i][j] != fl[i+1][j] { // batch invariance: bit-identical
				t.Fatalf("-prefill row %d differs from the full prefill", i)
			}
		}
	}
	gen, err := run1("-model", model, "-tokens", "5,17,3", "-generate", "4")
	if err != nil {
		t.Fatal(err)
	}
	var ids []int32
	if err := json.Unmarshal(gen["ids"], &ids); err != nil || len(ids) != 7 || ids[0] != 5 || ids[2] != 3 {
		t.Fatalf("-generate: %s (%v)", gen["ids"], err)
	}
	for _, bad := range [][]string{
		{"-tokens", "1,2"},
		{"-model", model},
		{"-model", model, "-tokens", "1,x"},
		{"-model", model, "-tokens", "1,96"},
		{"-model", model, "-tokens", "1,2", "-prefill", "3"},
		{"-model", model, "-tokens", "1,2", "-generate", "-1"},
		{"-model", "/nonexistent", "-tokens", "1"},
		{"-model", model, "-tokens", "1", "extra"},
	} {
		if _, err := run1(bad...); err == nil {
			t.Errorf("%s: no error", strings.Join(bad, " "))
		}
	}
}

// TestHelp: -h prints the usage with every flag on stderr (it printed
// nothing: the flag set wrote to io.Discard) and returns flag.ErrHelp,
// which main treats as success; an unknown flag names itself and the
// usage too.
func TestHelp(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, &out, &errb); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: got %v, want flag.ErrHelp", err)
	}
	for _, f := range []string{"-model", "-tokens", "-prefill", "-generate"} {
		if !strings.Contains(errb.String(), f) {
			t.Errorf("-h usage %q lacks %s", errb.String(), f)
		}
	}
	if out.Len() != 0 {
		t.Errorf("-h wrote %q on stdout", out.String())
	}
	errb.Reset()
	if err := run(context.Background(), []string{"-nope"}, &out, &errb); err == nil || !strings.Contains(errb.String(), "-tokens") {
		t.Errorf("-nope: got %v, usage %q", err, errb.String())
	}
}

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestInspectTiny(t *testing.T) {
	for dir, want := range map[string][]string{
		"../../dsv4/testdata/ckpt_hf_bf16":   {"compressed_sparse_attention", "hash_moe", "float BF16", "386.0K parameters"},
		"../../dsv4/testdata/ckpt_fp8_mxfp4": {"fp8-block", "4 x mxfp4", "F8_E8M0", "386.0K parameters"},
		"../../dsv4/testdata/ckpt_nvfp4":     {"nvfp4", "experts NVFP4", "386.0K parameters"},
	} {
		var out bytes.Buffer
		if err := run(context.Background(), &out, dir, false); err != nil {
			t.Fatal(err)
		}
		for _, s := range want {
			if !strings.Contains(out.String(), s) {
				t.Errorf("%s: output lacks %q:\n%s", dir, s, out.String())
			}
		}
	}
}

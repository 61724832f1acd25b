//go:build unix

package dsv4

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestShardTruncatedWhileMapped: a shard file truncated by another process
// after OpenCheckpoint (while memory-mapped) makes Float32, DequantizeRows
// and Int32s fail with ErrCheckpoint instead of killing the process with
// SIGBUS, and Raw refuses the tensor (the file size is re-checked).
func TestShardTruncatedWhileMapped(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join("testdata/ckpt_hf_bf16", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ck, err := OpenCheckpoint(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	w := ck.Weights()
	if _, err := w.Head.Float32(); err != nil { // readable before
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, "model.safetensors"), 4096); err != nil {
		t.Fatal(err)
	}
	isCheckpointErr := func(what string, err error) {
		t.Helper()
		var te *TensorError
		if !errors.Is(err, ErrCheckpoint) || !errors.As(err, &te) || filepath.Base(te.File) != "model.safetensors" {
			t.Errorf("%s: %v, want ErrCheckpoint naming the shard", what, err)
		}
	}
	faulted := 0
	for _, tn := range []*Tensor{w.Head, w.Embed, w.Layers[len(w.Layers)-1].InputNorm} {
		if tn == nil {
			continue
		}
		_, err := tn.Float32()
		if err == nil {
			continue // inside the first page, still in the file
		}
		faulted++
		isCheckpointErr("Float32 "+tn.Name, err)
		dst := make([]float32, tn.Cols())
		isCheckpointErr("DequantizeRows "+tn.Name, tn.DequantizeRows(dst, tn.Rows()-1, tn.Rows()))
	}
	if faulted == 0 {
		t.Fatal("no tensor past the new end of the file")
	}
	var tid *Tensor
	for _, l := range w.Layers {
		if l.MLP.Router.Tid2Eid != nil {
			tid = l.MLP.Router.Tid2Eid
			break
		}
	}
	if tid == nil {
		t.Fatal("no hash-routed layer")
	}
	_, err = tid.Int32s()
	isCheckpointErr("Int32s "+tid.Name, err)
	if _, err := ck.Raw(w.Head.Name); err == nil {
		t.Error("Raw of a tensor past the end: no error")
	} else {
		isCheckpointErr("Raw", err)
	}
}

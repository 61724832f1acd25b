//go:build unix

package safetensors

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOpenFIFO checks that a FIFO (which would block a reader until a
// writer appears) is refused at once with ErrNotRegular, for a shard and
// for the index.
func TestOpenFIFO(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"model.safetensors", IndexFileName} {
		p := filepath.Join(dir, name)
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		done := make(chan error, 1)
		go func() {
			var err error
			if name == IndexFileName {
				_, err = ReadIndex(p)
			} else {
				_, err = Open(p)
			}
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "FIFO") || !strings.Contains(err.Error(), p) {
				t.Errorf("%s: got %v, want ErrNotRegular naming the file", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: open of a FIFO blocked", name)
		}
	}
}

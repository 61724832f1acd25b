//go:build unix

package dsv4

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLoadConfigNotRegular: a config.json that is a FIFO or a directory is
// refused at once (ErrConfig naming the file kind), never opened: opening a
// FIFO with no writer would block Load forever.
func TestLoadConfigNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo", "config.json")
	if err := os.MkdirAll(filepath.Dir(fifo), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	asDir := filepath.Join(dir, "dir", "config.json")
	if err := os.MkdirAll(asDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, path, kind string }{
		{"fifo", fifo, "FIFO"},
		{"directory", asDir, "directory"},
		{"device", "/dev/null", "device"},
	} {
		done := make(chan error, 1)
		go func() { _, err := LoadConfig(tc.path); done <- err }()
		select {
		case err := <-done:
			var ce *ConfigError
			if !errors.Is(err, ErrConfig) || !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.kind) {
				t.Errorf("%s: err = %v, want a ConfigError naming %q", tc.name, err, tc.kind)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: LoadConfig blocked", tc.name)
		}
	}
}

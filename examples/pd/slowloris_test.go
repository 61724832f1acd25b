package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dsv4go/dsv4go/internal/httpserve/httpservetest"
)

// TestSlowBodyCutOff (BREAKER F29): a client trickling its request body is
// cut off after --body-read-timeout.
func TestSlowBodyCutOff(t *testing.T) {
	lines := make(chan string, 1)
	stdout = lineWriter{lines}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--disaggregation-mode", "decode", "--port", "0", "--body-read-timeout", "300ms"})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	var addr string
	select {
	case l := <-lines:
		addr = strings.TrimPrefix(l, "listening http=")
	case err := <-done:
		t.Fatalf("run: %v", err)
	case <-time.After(90 * time.Second):
		t.Fatal("no listening line")
	}
	if err := httpservetest.SlowBody(addr, "/v1/chat/completions", 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

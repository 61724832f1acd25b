package main

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/dsv4go/dsv4go/internal/httpserve/httpservetest"
)

// TestSlowBodyCutOff (BREAKER F29): a client trickling its request body to
// the router is cut off after --body-read-timeout.
func TestSlowBodyCutOff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--port", port, "--worker-urls", "http://127.0.0.1:1", "--body-read-timeout", "300ms"})
	}()
	defer func() {
		cancel()
		<-done
	}()
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-done:
			t.Fatalf("run: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("router not listening: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := httpservetest.SlowBody(addr, "/v1/chat/completions", 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

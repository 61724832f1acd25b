package main

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"
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
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{\"messages\""); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range 200 {
			if _, err := c.Write([]byte(" ")); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("slow-body connection still open after 5 s")
		}
	}
}

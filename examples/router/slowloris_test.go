package main

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
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
	var c net.Conn
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err = net.Dial("tcp", addr); err == nil {
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

// Package httpservetest holds a slow ("slowloris") HTTP client for tests of
// the servers built with package httpserve.
package httpservetest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// ErrStillOpen is returned by SlowBody when the server kept the connection
// open for the whole wait.
var ErrStillOpen = errors.New("httpservetest: slow connection still open")

// SlowBody connects to addr (host:port), sends a POST to path announcing a
// 100000-byte body, then one body byte every 50 ms. It returns nil once the
// server closes the connection (after any response), ErrStillOpen if it is
// still open after wait, or the dial / first write error.
func SlowBody(addr, path string, wait time.Duration) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{\"messages\"", path)
	if _, err := io.WriteString(c, head); err != nil {
		return err
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, err = io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%w after %v", ErrStillOpen, wait)
	}
	return nil
}

package httpserve

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

const short = 300 * time.Millisecond

// serve starts New(h, t) on a loopback port and returns its address.
func serve(t *testing.T, h http.Handler, to Timeouts) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := New(h, to)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// readAllBody answers 200 with the body length, or 408 on a read error.
var readAllBody = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestTimeout)
		return
	}
	fmt.Fprintf(w, "%d", len(b))
})

// waitClosed reads from c until EOF or an error and fails if that takes
// longer than limit (the server did not cut the connection).
func waitClosed(t *testing.T, c net.Conn, limit time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(limit))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("connection still open after %v", limit)
	}
}

// TestSlowloris: a client trickling its headers or its body is cut off
// after ReadHeader / Body; one idle between requests after Idle
// (BREAKER F29).
func TestSlowloris(t *testing.T) {
	addr := serve(t, readAllBody, Timeouts{ReadHeader: short, Body: short, Idle: short})
	cases := []struct {
		name  string
		first string // sent at once
		drip  string // then one byte per 50 ms
	}{
		{"headers", "POST / HTTP/1.1\r\nHost: x\r\n", strings.Repeat("X", 200)},
		{"body", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{\"messages\"", strings.Repeat(" ", 200)},
		{"chunked body", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n", strings.Repeat("1\r\n \r\n", 200)},
		{"idle", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, tc.first); err != nil {
				t.Fatal(err)
			}
			go func() {
				for i := 0; i < len(tc.drip); i++ {
					if _, err := c.Write([]byte{tc.drip[i]}); err != nil {
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}()
			t0 := time.Now()
			waitClosed(t, c, 5*time.Second)
			if d := time.Since(t0); d < short/2 {
				t.Errorf("closed after %v, before the timeout", d)
			}
		})
	}
}

// TestStreamingOutlivesBodyTimeout: a response that streams for longer than
// Body (and ReadHeader, Idle) after the body was read is neither cut nor
// cancelled; a prompt client gets its whole body.
func TestStreamingOutlivesBodyTimeout(t *testing.T) {
	const chunks = 8
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusRequestTimeout)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < chunks; i++ {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(short / 2):
			}
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	addr := serve(t, h, Timeouts{ReadHeader: short, Body: short, Idle: short})
	for _, body := range []string{`{"stream":true}`, ""} {
		resp, err := http.Post("http://"+addr+"/", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		sc := bufio.NewScanner(resp.Body)
		done := false
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				n++
				done = sc.Text() == "data: [DONE]"
			}
		}
		resp.Body.Close()
		if n != chunks+1 || !done {
			t.Errorf("body %q: %d events (done %v), want %d and [DONE]", body, n, done, chunks+1)
		}
	}
	// A normal request still works.
	resp, err := http.Post("http://"+addr+"/", "application/json", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status %d", resp.StatusCode)
	}
}

// TestDefaults: zero fields take the defaults, negative ones disable.
func TestDefaults(t *testing.T) {
	s := New(http.NotFoundHandler(), Timeouts{})
	if s.ReadHeaderTimeout != DefaultReadHeader || s.IdleTimeout != DefaultIdle || s.WriteTimeout != 0 || s.ReadTimeout != 0 {
		t.Errorf("defaults: %+v", s)
	}
	s = New(http.NotFoundHandler(), Timeouts{ReadHeader: -1, Idle: -1, Body: -1})
	if s.ReadHeaderTimeout != 0 || s.IdleTimeout != 0 {
		t.Errorf("disabled: %+v", s)
	}
}

// Package httpserve builds the http.Server of the example servers
// (examples/server, examples/pd, examples/router) with timeouts that bound
// slow clients (slowloris) without cutting long streaming (SSE) responses.
//
// Three limits apply:
//   - ReadHeader (http.Server.ReadHeaderTimeout): time to send the request
//     line and headers;
//   - Body: time to send the request body, counted from the end of the
//     headers: a per-request read deadline (http.ResponseController
//     .SetReadDeadline) set before the handler runs, so the body has its own
//     budget, separate from the headers' (http.Server.ReadTimeout would
//     count both from the connection's first byte). It is lifted once the
//     body has been read to its end (net/http does so too before its
//     background read that watches for a client going away), so a response
//     that streams for longer is neither cut nor cancelled;
//   - Idle (http.Server.IdleTimeout): how long a keep-alive connection may
//     wait for its next request.
//
// WriteTimeout stays 0: an SSE stream of a long generation may last minutes.
// A client that is too slow fails its body read: the handler sees a read
// error (a timeout) and the connection is closed.
package httpserve

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// Defaults of Timeouts' zero fields.
const (
	DefaultReadHeader = 10 * time.Second
	DefaultBody       = 60 * time.Second
	DefaultIdle       = 120 * time.Second
)

// Timeouts are the limits of New. A zero field takes its Default; a
// negative one disables that limit.
type Timeouts struct {
	ReadHeader time.Duration // request line and headers
	Body       time.Duration // request body, after the headers
	Idle       time.Duration // keep-alive wait between requests
}

func pick(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// New returns an http.Server serving h with the timeouts t (see the package
// doc); WriteTimeout and ReadTimeout are 0.
func New(h http.Handler, t Timeouts) *http.Server {
	return &http.Server{
		Handler:           BodyDeadline(h, pick(t.Body, DefaultBody)),
		ReadHeaderTimeout: pick(t.ReadHeader, DefaultReadHeader),
		IdleTimeout:       pick(t.Idle, DefaultIdle),
	}
}

// BodyDeadline wraps h so that a request's body must arrive within d of the
// handler's start (d <= 0: no limit). The read deadline is cleared when the
// body hits its end (EOF, or all Content-Length bytes read), so that a
// response streaming afterwards is not affected; a body closed unread keeps
// it (the server then discards the rest under the same deadline).
func BodyDeadline(h http.Handler, d time.Duration) http.Handler {
	if d <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(d)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc, left: r.ContentLength}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody clears the connection's read deadline once the body is done.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	left int64 // bytes still expected (< 0: unknown, chunked)
	once sync.Once
}

func (b *deadlineBody) clear() {
	b.once.Do(func() { _ = b.rc.SetReadDeadline(time.Time{}) })
}

// Read implements io.Reader.
func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.left >= 0 {
		b.left -= int64(n)
	}
	if err == io.EOF || (b.left == 0 && n > 0) {
		b.clear()
	}
	return n, err
}

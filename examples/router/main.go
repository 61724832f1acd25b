// Command router is the OpenAI-compatible front of a dsv4go fleet (package
// disagg's Router), with SGLang router's flags:
//
//	go run ./examples/router --worker-urls http://127.0.0.1:30000 --port 8000
//	go run ./examples/router --pd-disaggregation \
//	    --prefill http://127.0.0.1:30001 8998 --decode http://127.0.0.1:30002 \
//	    --policy cache_aware --port 8000
//
// --prefill takes the prefill server's URL and, optionally, its bootstrap
// port (learned from its /server_info otherwise); both --prefill and
// --decode repeat. In concurrent mode the host part of a --prefill URL is
// the bootstrap_host that decode servers dial for the KV state, so it must
// be an address they can reach and that their --allowed-bootstrap-hosts
// names as written (http://localhost:30001 sends "localhost", not
// "127.0.0.1"); in sequential mode the prefill server advertises its own
// --bootstrap-host instead. --sequential uses the prefill-then-decode coordination
// (the prefill answer's kv_transfer_params handed to decode) instead of
// concurrent dispatch. --api-key KEY requires "Authorization: Bearer KEY"
// of clients (as examples/server's --api-key); the workers get
// --worker-api-key, or else the client's header. --max-body-bytes bounds a
// client's request body (default disagg.MaxBodyBytes, 32 MiB; larger: 413
// request_too_large, as examples/server's flag). Port 0 picks a free port;
// the address is printed on stdout as "listening http=HOST:PORT".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dsv4go/dsv4go/disagg"
	"github.com/dsv4go/dsv4go/internal/cmdexit"
	"github.com/dsv4go/dsv4go/internal/httpserve"
)

// stderr receives the usage and errors (tests replace it).
var stderr io.Writer = os.Stderr

func main() {
	os.Exit(exitCode(run(context.Background(), os.Args[1:])))
}

// exitCode is the process status for run's error (cmdexit.Code: 0 for -h).
func exitCode(err error) int { return cmdexit.Code("router", stderr, err) }

type urls []string

func (u *urls) String() string     { return strings.Join(*u, ",") }
func (u *urls) Set(s string) error { *u = append(*u, strings.Split(s, ",")...); return nil }

// prefillFlag is --prefill in the flag set: splitPrefill takes the
// two-value forms out of the arguments first, so the flag set sees only
// "-prefill=URL", and lists --prefill in the usage.
type prefillFlag struct{ w *[]disagg.PrefillWorker }

func (p prefillFlag) String() string {
	if p.w == nil {
		return ""
	}
	var s []string
	for _, w := range *p.w {
		s = append(s, w.URL)
	}
	return strings.Join(s, ",")
}

func (p prefillFlag) Set(s string) error {
	*p.w = append(*p.w, disagg.PrefillWorker{URL: s})
	return nil
}

// prefillUsage is --prefill's line in the usage.
const prefillUsage = "PD mode: prefill server `URL`, optionally followed by its bootstrap port as a separate argument " +
	"(--prefill http://10.0.0.5:30001 8998; default: learned from its /server_info); repeatable. " +
	"In concurrent mode the URL's host is the bootstrap_host decode servers dial, matched as written against their --allowed-bootstrap-hosts"

// splitPrefill pulls "--prefill URL [PORT]" out of args (a two-value flag
// the flag package cannot express).
func splitPrefill(args []string) ([]disagg.PrefillWorker, []string, error) {
	var pw []disagg.PrefillWorker
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a != "--prefill" && a != "-prefill" { // --prefill=URL is left to the flag set
			rest = append(rest, a)
			continue
		}
		if i+1 >= len(args) {
			return nil, nil, errors.New("--prefill needs a URL")
		}
		w := disagg.PrefillWorker{URL: args[i+1]}
		i++
		if i+1 < len(args) {
			if p, err := strconv.Atoi(args[i+1]); err == nil {
				w.BootstrapPort = p
				i++
			}
		}
		pw = append(pw, w)
	}
	return pw, rest, nil
}

func run(ctx context.Context, args []string) error {
	prefill, args, err := splitPrefill(args)
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("router", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Var(prefillFlag{&prefill}, "prefill", prefillUsage)
	var workers, decode urls
	fs.Var(&workers, "worker-urls", "regular mode: worker URLs (repeat or comma-separate)")
	fs.Var(&decode, "decode", "PD mode: decode server URL (repeatable)")
	pd := fs.Bool("pd-disaggregation", false, "prefill-decode disaggregation mode")
	policy := fs.String("policy", "cache_aware", "random, round_robin, power_of_two or cache_aware")
	pPolicy := fs.String("prefill-policy", "", "PD mode: policy for prefill servers (default --policy)")
	dPolicy := fs.String("decode-policy", "", "PD mode: policy for decode servers (default --policy)")
	sequential := fs.Bool("sequential", false, "PD mode: prefill first, then decode with its kv_transfer_params")
	apiKey := fs.String("api-key", "", "require Authorization: Bearer KEY from clients on /v1/*, /tokenize, /detokenize and /workers")
	workerKey := fs.String("worker-api-key", "", "Bearer key sent to the workers (default: the client's Authorization header, forwarded)")
	host := fs.String("host", "127.0.0.1", "address to listen on")
	port := fs.Int("port", 8000, "HTTP port (0: any free port)")
	attempts := fs.Int("max-attempts", 3, "attempts per request (retries only before the first response byte)")
	health := fs.Duration("health-check-interval", 5*time.Second, "period of worker health checks")
	healthFails := fs.Int("health-failure-threshold", 2, "failed checks before a worker is unhealthy")
	hdrTimeout := fs.Duration("read-header-timeout", httpserve.DefaultReadHeader, "time a client has to send the request headers (negative: no limit)")
	bodyTimeout := fs.Duration("body-read-timeout", httpserve.DefaultBody, "time a client has to send the request body after its headers (negative: no limit; responses, SSE included, have no write timeout)")
	idleTimeout := fs.Duration("idle-timeout", httpserve.DefaultIdle, "how long a keep-alive connection may wait for its next request (negative: no limit)")
	maxBody := fs.Int64("max-body-bytes", disagg.MaxBodyBytes, "client request body limit; a larger body gets 413 request_too_large, as examples/server, without reaching a worker")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *maxBody < 1 { // as examples/server: refused, not read as the default
		return fmt.Errorf("--max-body-bytes must be >= 1, got %d", *maxBody)
	}
	if len(prefill) > 0 || len(decode) > 0 {
		*pd = true
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	rt, err := disagg.NewRouter(disagg.RouterConfig{PD: *pd, Workers: workers, Prefill: prefill, Decode: decode,
		Policy: *policy, PrefillPolicy: *pPolicy, DecodePolicy: *dPolicy, Sequential: *sequential,
		MaxAttempts: *attempts, HealthInterval: *health, HealthFailures: *healthFails,
		APIKey: *apiKey, WorkerAPIKey: *workerKey, Logger: log, MaxBodyBytes: *maxBody})
	if err != nil {
		return err
	}
	defer rt.Close()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	lis, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		return err
	}
	srv := httpserve.New(rt.Handler(), httpserve.Timeouts{ReadHeader: *hdrTimeout, Body: *bodyTimeout, Idle: *idleTimeout})
	fmt.Println("listening http=" + lis.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

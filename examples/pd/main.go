// Command pd runs one role of prefill/decode disaggregated serving of a
// DeepSeek-V4 model, with SGLang's flags:
//
//	go run ./examples/pd --disaggregation-mode prefill --port 30001 --disaggregation-bootstrap-port 8998
//	go run ./examples/pd --disaggregation-mode decode --port 30002
//	go run ./examples/router --pd-disaggregation --prefill http://127.0.0.1:30001 8998 --decode http://127.0.0.1:30002 --port 8000
//
// The prefill server answers POST /v1/chat/completions by prefilling the
// prompt and holding the request's KV state for the decode server, which
// fetches it over gRPC from the bootstrap port (package disagg).
// --disaggregation-mode null serves co-located (prefill and decode in one
// engine). --model-path defaults to the embedded dsv4-tiny model, served with
// --context-length models.TinyContextLength (4096) unless given, as
// examples/server does.
//
// Where a decode server gets the prefill host it dials: in concurrent mode
// the router names it (the host part of the router's --prefill URL); in
// sequential mode the prefill server advertises its --bootstrap-host (default
// --host) in each answer's kv_transfer_params. A prefill server listening on
// a wildcard --host (0.0.0.0, ::) has no address to advertise, so it refuses
// to start without --bootstrap-host.
//
// Trust model (as SGLang's): the prefill and decode servers are internal,
// reached only through the router. A decode server dials the
// bootstrap_host/bootstrap_port that a request names, and a prefill server
// parks a request's KV state until its lease ends; expose neither to
// untrusted clients. --allowed-bootstrap-hosts limits the hosts a decode
// server dials (other requests get 403 bootstrap_host_not_allowed); without
// it a decode server dials loopback prefill servers only, and one listening
// on a non-loopback --host refuses to start until the flag names its
// prefill hosts (or is "*", any host: SGLang's behaviour). A transferred
// state larger than the model's largest at the served context is refused
// before it is buffered (disagg.LimitsFor). --api-key KEY requires
// "Authorization: Bearer KEY" on /v1/* (and, on a decode server, on
// /tokenize and /detokenize; the router's --worker-api-key).
// --max-body-bytes bounds a request body (default disagg.MaxBodyBytes,
// 32 MiB; larger: 413 request_too_large, as examples/server's flag).
// --max-parked-states and --max-parked-bytes (prefill) bound the prefilled
// states held for decode servers (defaults 256 and 8 GiB); a request beyond
// gets 503 kv_pool_full, and POST /abort_request {"bootstrap_room": N}
// releases a parked state (the router calls it in sequential mode when the
// decode leg will not fetch it).
// Port 0 picks a free port; the chosen addresses are printed on stdout as
// "listening http=HOST:PORT [bootstrap=HOST:PORT]".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dsv4go/dsv4go/disagg"
	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/internal/cmdexit"
	"github.com/dsv4go/dsv4go/internal/httpserve"
	"github.com/dsv4go/dsv4go/models"
)

// stdout receives the "listening ..." line, stderr the usage and errors
// (tests replace them).
var stdout, stderr io.Writer = os.Stdout, os.Stderr

func main() {
	os.Exit(exitCode(run(context.Background(), os.Args[1:])))
}

// exitCode is the process status for run's error (cmdexit.Code: 0 for -h).
func exitCode(err error) int { return cmdexit.Code("pd", stderr, err) }

// isWildcard reports whether host is an unspecified address ("", 0.0.0.0,
// ::): one to listen on, but not one that another machine can dial.
func isWildcard(host string) bool {
	if host == "" {
		return true
	}
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && a.Unmap().IsUnspecified()
}

// isLoopback reports whether listening on host exposes the server to this
// machine only: the rule of a decode server's default (empty) allow-list, so
// that pd and the server agree on what loopback means.
func isLoopback(host string) bool {
	return disagg.HostAllowList{}.Allows(host)
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("pd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mode := fs.String("disaggregation-mode", "null", "prefill, decode or null (co-located)")
	bootPort := fs.Int("disaggregation-bootstrap-port", 8998, "prefill: port of the bootstrap (KV transfer) service")
	backend := fs.String("disaggregation-transfer-backend", "grpc", "KV transfer backend (grpc)")
	host := fs.String("host", "127.0.0.1", "address to listen on")
	bootHost := fs.String("bootstrap-host", "", "prefill: the address decode servers use to reach this server's bootstrap service, advertised as bootstrap_host in sequential-mode kv_transfer_params (default --host; required when --host is a wildcard such as 0.0.0.0 or ::)")
	port := fs.Int("port", 30000, "HTTP port (0: any free port)")
	modelPath := fs.String("model-path", "", "model directory (default: the embedded dsv4-tiny)")
	name := fs.String("served-model-name", "", "model name in the API: reported, and required in a request's \"model\" (when set; --model-path is accepted too), else 404 model_not_found, as examples/server (default: dsv4-tiny or the directory name)")
	lease := fs.Duration("kv-lease", 30*time.Second, "prefill: how long a prefilled state waits for its decode server")
	fetchTimeout := fs.Duration("kv-fetch-timeout", 60*time.Second, "decode: how long to wait for a room's state")
	chunk := fs.Int("kv-chunk-bytes", 0, "prefill: KV frame payload in bytes (0: 1 MiB)")
	frameDelay := fs.Duration("kv-debug-frame-delay", 0, "prefill: sleep before each KV frame (fault tests only)")
	maxPrefills := fs.Int("max-concurrent-prefills", 2, "prefill: prefills running at once")
	allowed := fs.String("allowed-bootstrap-hosts", "", "decode: comma-separated host names, IPs and CIDR prefixes that a request's bootstrap_host may name, or \"*\" for any host (SGLang's default; only if no one but the router reaches this server); names are matched as written, never resolved, and the list replaces the loopback default (add 127.0.0.1 to keep local prefill servers). Default: loopback prefill servers only, and a decode server on a non-loopback --host refuses to start without it")
	apiKey := fs.String("api-key", "", "require Authorization: Bearer KEY on /v1/* (decode: also /tokenize, /detokenize; give the router the same key as --worker-api-key)")
	ctxLen := fs.Int("context-length", 0, "served context in tokens; longer prompts (or prompt + max_tokens) get 400 context_length_exceeded (0: the model's; for the embedded dsv4-tiny, trained on short turns, "+strconv.Itoa(models.TinyContextLength)+", as examples/server)")
	hdrTimeout := fs.Duration("read-header-timeout", httpserve.DefaultReadHeader, "time a client has to send the request headers (negative: no limit)")
	bodyTimeout := fs.Duration("body-read-timeout", httpserve.DefaultBody, "time a client has to send the request body after its headers (negative: no limit; responses, SSE included, have no write timeout)")
	idleTimeout := fs.Duration("idle-timeout", httpserve.DefaultIdle, "how long a keep-alive connection may wait for its next request (negative: no limit)")
	maxBody := fs.Int64("max-body-bytes", disagg.MaxBodyBytes, "request body limit; a larger body gets 413 request_too_large, as examples/server")
	maxParked := fs.Int("max-parked-states", disagg.DefaultMaxParkedStates, "prefill: most prefilled states held for decode servers (parked or being sent); a request beyond gets 503 kv_pool_full")
	maxParkedBytes := fs.Int64("max-parked-bytes", disagg.DefaultMaxParkedBytes, "prefill: most bytes of prefilled states held for decode servers; a request beyond gets 503 kv_pool_full (a state is accepted whatever its size when none is held)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *ctxLen < 0 { // as examples/server: refused, not read as "the model's"
		return fmt.Errorf("--context-length must be >= 0 (0: the model's), got %d", *ctxLen)
	}
	if *maxBody < 1 { // as examples/server: refused, not read as the default
		return fmt.Errorf("--max-body-bytes must be >= 1, got %d", *maxBody)
	}
	if *maxParked < 1 || *maxParkedBytes < 1 {
		return fmt.Errorf("--max-parked-states and --max-parked-bytes must be >= 1, got %d and %d", *maxParked, *maxParkedBytes)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := checkRoleFlags(*mode, *host, *bootHost, set); err != nil {
		return err
	}
	if *bootHost == "" {
		*bootHost = *host
	}
	allow, err := disagg.ParseHostAllowList(*allowed)
	if err != nil {
		return fmt.Errorf("--allowed-bootstrap-hosts: %w", err)
	}
	if *mode == "decode" && allow.Empty() && !isLoopback(*host) {
		return fmt.Errorf("--allowed-bootstrap-hosts is required for a decode server on --host %s: "+
			"it fetches KV state from whatever prefill host a request names, so a network-exposed one "+
			"must name its prefill hosts (e.g. --allowed-bootstrap-hosts 10.0.0.0/8,prefill-0.internal), "+
			"or \"*\" for any host (SGLang's behaviour: only when no one but the router can reach it); "+
			"without the flag only loopback prefill servers are allowed", *host)
	}
	if *backend != "grpc" {
		return fmt.Errorf("unsupported --disaggregation-transfer-backend %q (only grpc is built in)", *backend)
	}
	dir := *modelPath
	if dir == "" {
		d, err := models.TinyDir()
		if err != nil {
			return err
		}
		dir = d
		if *name == "" {
			*name = models.TinyName
		}
		if *ctxLen == 0 {
			*ctxLen = models.TinyContextLength
		}
	}
	if *name == "" {
		*name = dir
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	m, err := dsv4.Load(ctx, dir)
	if err != nil {
		return err
	}
	defer m.Close()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	lis, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		return err
	}
	var handler http.Handler
	var closeFn func() error
	announce := "listening http=" + lis.Addr().String()
	switch *mode {
	case "prefill":
		p, err := disagg.NewPrefillServer(disagg.PrefillConfig{Model: m, Name: *name, Aliases: []string{dir}, BootstrapHost: *bootHost,
			Transport:     &disagg.GRPCTransport{ChunkBytes: *chunk, FrameDelay: *frameDelay},
			MaxConcurrent: *maxPrefills, Lease: *lease, ContextLength: *ctxLen, APIKey: *apiKey, Logger: log, MaxBodyBytes: *maxBody,
			MaxParkedStates: *maxParked, MaxParkedBytes: *maxParkedBytes})
		if err != nil {
			return err
		}
		blis, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*bootPort)))
		if err != nil {
			return err
		}
		announce += " bootstrap=" + blis.Addr().String()
		// The port is recorded before the HTTP server starts: the first
		// /server_info already reports it.
		berr := p.StartBootstrap(ctx, blis)
		go func() {
			if err := <-berr; err != nil && ctx.Err() == nil {
				log.Error("bootstrap service", "err", err)
				stop()
			}
		}()
		handler, closeFn = p.Handler(), p.Close
	case "decode", "null":
		d, err := disagg.NewDecodeServer(disagg.DecodeConfig{Model: m, Name: *name, Aliases: []string{dir}, FetchTimeout: *fetchTimeout,
			ContextLength: *ctxLen, AllowedBootstrapHosts: allow, APIKey: *apiKey, Logger: log, MaxBodyBytes: *maxBody})
		if err != nil {
			return err
		}
		handler, closeFn = d.Handler(), d.Close
	default:
		return fmt.Errorf("--disaggregation-mode must be prefill, decode or null, not %q", *mode)
	}
	srv := httpserve.New(handler, httpserve.Timeouts{ReadHeader: *hdrTimeout, Body: *bodyTimeout, Idle: *idleTimeout})
	fmt.Fprintln(stdout, announce)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	if cerr := closeFn(); err == nil {
		err = cerr
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// checkRoleFlags refuses flags that do not apply to the --disaggregation-mode
// (set holds the names of the flags given) and a prefill server that would
// advertise a wildcard bootstrap address: decode servers would refuse
// "0.0.0.0" or, allowed, dial their own machine.
func checkRoleFlags(mode, host, bootHost string, set map[string]bool) error {
	switch mode {
	case "prefill", "decode", "null":
	default:
		return fmt.Errorf("--disaggregation-mode must be prefill, decode or null, not %q", mode)
	}
	if set["allowed-bootstrap-hosts"] && mode != "decode" {
		return fmt.Errorf("--allowed-bootstrap-hosts only applies to decode servers (--disaggregation-mode decode): "+
			"it limits the prefill hosts a decode server fetches KV state from; it has no effect with --disaggregation-mode %s", mode)
	}
	if set["bootstrap-host"] && mode != "prefill" {
		return fmt.Errorf("--bootstrap-host only applies to prefill servers (--disaggregation-mode prefill): "+
			"a decode server takes the prefill host from each request's bootstrap_host; it has no effect with --disaggregation-mode %s", mode)
	}
	for _, f := range []string{"max-parked-states", "max-parked-bytes"} {
		if set[f] && mode != "prefill" {
			return fmt.Errorf("--%s only applies to prefill servers (--disaggregation-mode prefill): "+
				"it bounds the states a prefill server holds for decode servers; it has no effect with --disaggregation-mode %s", f, mode)
		}
	}
	if mode == "prefill" && set["bootstrap-host"] && isWildcard(bootHost) {
		return fmt.Errorf("--bootstrap-host %q is a wildcard address: give one that decode servers can dial (this machine's IP address or host name)", bootHost)
	}
	if mode == "prefill" && !set["bootstrap-host"] && isWildcard(host) {
		return fmt.Errorf("--bootstrap-host is required for a prefill server on --host %q: it is the address decode servers "+
			"dial for this server's bootstrap service (advertised as bootstrap_host in kv_transfer_params), and a wildcard "+
			"listen address is not one they can dial; pass this machine's IP address or host name, e.g. --bootstrap-host 10.0.0.5", host)
	}
	return nil
}

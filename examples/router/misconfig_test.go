package main

import (
	"context"
	"strings"
	"testing"
)

// TestMisconfigRefused: a careless command line is refused at start-up
// (exit 1, a message naming the setting) instead of a router that fails
// request by request: --worker-urls beside --prefill/--decode (they were
// ignored), a URL without http://, a bootstrap port past 65535.
func TestMisconfigRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--worker-urls", "http://127.0.0.1:1", "--decode", "http://127.0.0.1:2", "--prefill", "http://127.0.0.1:3"}, "--worker-urls"},
		{[]string{"--worker-urls", "127.0.0.1:1"}, "127.0.0.1:1"},
		{[]string{"--prefill", "http://127.0.0.1:3", "70000", "--decode", "http://127.0.0.1:2"}, "70000"},
	} {
		err := run(context.Background(), append(tc.args, "--port", "0", "--health-check-interval", "-1s"))
		if err == nil || !strings.Contains(err.Error(), tc.want) || exitCode(err) != 1 {
			t.Errorf("%q: %v (exit %d), want a start-up error naming %q", tc.args, err, exitCode(err), tc.want)
		}
	}
}

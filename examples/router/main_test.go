package main

import (
	"context"
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"

	"github.com/dsv4go/dsv4go/disagg"
)

// TestHelp: -h prints a usage that lists every option, --prefill (parsed
// by hand for its two-value form) included, and exits 0.
func TestHelp(t *testing.T) {
	var out strings.Builder
	old := stderr
	stderr = &out
	defer func() { stderr = old }()
	err := run(context.Background(), []string{"-h"})
	if !errors.Is(err, flag.ErrHelp) || exitCode(err) != 0 {
		t.Fatalf("-h: %v (exit %d)", err, exitCode(err))
	}
	for _, f := range []string{"-prefill URL", "-decode", "-worker-urls", "-pd-disaggregation", "-sequential", "-policy", "-port", "-max-body-bytes"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("usage lacks %s:\n%s", f, out.String())
		}
	}
	if exitCode(errors.New("x")) != 1 || exitCode(nil) != 0 {
		t.Error("exitCode")
	}
}

// TestMaxBodyBytesFlag: a --max-body-bytes below 1 is refused at start-up
// with examples/server's message (disagg TestMaxBodyBytes checks the
// limit's 413).
func TestMaxBodyBytesFlag(t *testing.T) {
	for _, v := range []string{"0", "-1"} {
		err := run(context.Background(), []string{"--worker-urls", "http://127.0.0.1:1", "--port", "0", "--max-body-bytes", v})
		if err == nil || err.Error() != "--max-body-bytes must be >= 1, got "+v {
			t.Errorf("--max-body-bytes %s: %v", v, err)
		}
	}
}

// TestSplitPrefill: the forms of --prefill, with and without a bootstrap
// port; the one-value "-prefill=URL" form left to the flag set reaches the
// same list.
func TestSplitPrefill(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    []disagg.PrefillWorker
		rest    []string
		wantErr bool
	}{
		{args: []string{"--prefill", "http://a:1", "8998", "--port", "0"},
			want: []disagg.PrefillWorker{{URL: "http://a:1", BootstrapPort: 8998}}, rest: []string{"--port", "0"}},
		{args: []string{"-prefill", "http://a:1", "--prefill=http://b:2", "--decode", "http://c:3"},
			want: []disagg.PrefillWorker{{URL: "http://a:1"}}, rest: []string{"--prefill=http://b:2", "--decode", "http://c:3"}},
		{args: []string{"--port", "0"}, rest: []string{"--port", "0"}},
		{args: []string{"--prefill"}, wantErr: true},
	} {
		pw, rest, err := splitPrefill(tc.args)
		if (err != nil) != tc.wantErr || !slices.Equal(pw, tc.want) || !slices.Equal(rest, tc.rest) {
			t.Errorf("%q: %v %q %v", tc.args, pw, rest, err)
		}
	}
	var pw []disagg.PrefillWorker
	fs := flag.NewFlagSet("router", flag.ContinueOnError)
	fs.Var(prefillFlag{&pw}, "prefill", prefillUsage)
	if err := fs.Parse([]string{"-prefill=http://a:1"}); err != nil || !slices.Equal(pw, []disagg.PrefillWorker{{URL: "http://a:1"}}) {
		t.Errorf("-prefill=URL: %v %v", pw, err)
	}
}

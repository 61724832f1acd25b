package cmdexit

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
)

func TestCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
		out  string
	}{
		{nil, 0, ""},
		{flag.ErrHelp, 0, ""},
		{fmt.Errorf("parse: %w", flag.ErrHelp), 0, ""},
		{errors.New("boom"), 1, "pd: boom\n"},
	} {
		var w strings.Builder
		if c := Code("pd", &w, tc.err); c != tc.code || w.String() != tc.out {
			t.Errorf("Code(%v) = %d %q, want %d %q", tc.err, c, w.String(), tc.code, tc.out)
		}
	}
}

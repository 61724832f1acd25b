package template

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestJinjaNestingLimits: templates nested past the limits are refused with ErrLimit when
// parsed. Before these checks, nesting hidden from the source check ({%+ ... %}, block
// {% set %}, end tags inside {% raw %}) took blocks past the depth that instrument walked, so
// their bodies rendered without budget or namespace guard ({% set ns.me = ns %} then crashed
// the process with a fatal stack overflow), and long chains of operators, attributes or items
// made an error cost O(n^3) time and O(n^2) memory (gonja wraps it once per level with the
// text of the whole subexpression: {{ x.a.a... }} with 100,000 links exhausted memory).
// Nesting within the limits still renders.
func TestJinjaNestingLimits(t *testing.T) {
	const selfRef = `{% set ns.me = ns %}{{ ns }}`
	nest := func(open, body, end string, n int) string {
		return `{% set ns = namespace() %}` + strings.Repeat(open, n) + body + strings.Repeat(end, n)
	}
	for _, tc := range []struct {
		name, src string
		parseErr  bool  // ErrLimit from ParseJinja; else renderErr from the render
		renderErr error // ErrLimit when nil
	}{
		{"set blocks", nest(`{% set x %}`, selfRef, `{% endset %}`, 2000), true, nil},
		{"plus-trimmed ifs", nest(`{%+ if 1 %}`, selfRef, `{% endif %}`, 2000), true, nil},
		{"end tags in raw", nest(`{% if 1 %}{% raw %}{% endif %}{% endraw %}`, selfRef, `{% endif %}`, 2000), true, nil},
		{"attribute chain", `{{ x` + strings.Repeat(`.a`, 100_000) + ` }}`, true, nil},
		{"item chain", `{{ x` + strings.Repeat(`[0]`, 100_000) + ` }}`, true, nil},
		{"and chain", `{{ none[0]` + strings.Repeat(` and 1`, 5000) + ` }}`, true, nil},
		{"ifs within the limit", nest(`{% if 1 %}`, selfRef, `{% endif %}`, MaxTemplateNesting), false, nil},
		{"chain within the limit", `{{ x` + strings.Repeat(`.a`, 400) + ` }}`, false, ErrRender},
	} {
		j, err := ParseJinja(tc.src, &JinjaOptions{MaxSteps: 100_000, MaxDuration: 10 * time.Second})
		if tc.parseErr {
			if !errors.Is(err, ErrLimit) {
				t.Errorf("%s: ParseJinja: %v; want ErrLimit", tc.name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: ParseJinja: %v", tc.name, err)
		}
		want := tc.renderErr
		if want == nil {
			want = ErrLimit
		}
		out, err := j.RenderChat(context.Background(), &JinjaInput{Messages: json.RawMessage(`[]`)})
		if !errors.Is(err, want) {
			t.Errorf("%s: got %.40q, %.200v; want %v", tc.name, out, err, want)
		}
	}
}

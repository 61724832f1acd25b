package template

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// TestJinjaSelfReference: a namespace stored inside itself (directly, through another
// namespace, a list, dict or tuple, in a conditional set or a macro) is refused with ErrLimit;
// before the guard each of these crashed the process with a fatal stack overflow when
// printed, compared or converted (found by FuzzJinja). Namespaces holding other namespaces
// still work.
func TestJinjaSelfReference(t *testing.T) {
	for _, tc := range []struct {
		src, want string // want "" = ErrLimit
	}{
		{`{%set ns=namespace()%}{%set ns.n=ns%}{{ns.n}}`, ""},
		{`{%set ns=namespace()%}{%set ns.n=ns%}{{ns == ns.n}}`, ""},
		{`{%set ns=namespace()%}{%set ns.n=ns%}{{ns|string}}`, ""},
		{`{%set ns=namespace(l=[])%}{%set ns.l=ns.l+[ns]%}{{ns.l}}`, ""},
		{`{%set a=namespace()%}{%set b=namespace(x=a)%}{%set a.y=b%}{{a}}`, ""},
		{`{%set ns=namespace()%}{%set ns.x = 1 if false else ns%}{{ns}}`, ""},
		{`{%set ns=namespace()%}{%set ns.d = {'k': [(1, ns)]}%}{{ns}}`, ""},
		{`{%macro m(x)%}{%set x.me = x%}{%endmacro%}{%set ns=namespace()%}{{m(ns)}}`, ""},
		{`{%set a=namespace(v=1)%}{%set b=namespace()%}{%set b.a=a%}{%set b.c=[a, a]%}{{b.a.v}}{{b.c|length}}`, "12"},
		{`{%set a=namespace(v=1)%}{%set a.w=a.v + 1%}{{a.w}}`, "2"},
	} {
		j, err := ParseJinja(tc.src, &JinjaOptions{MaxSteps: 10_000, MaxDuration: time.Second})
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		out, err := j.RenderChat(context.Background(), &JinjaInput{Messages: json.RawMessage(`[]`)})
		if tc.want == "" {
			if !errors.Is(err, ErrLimit) {
				t.Errorf("%s: got %q, %v; want ErrLimit", tc.src, out, err)
			}
			continue
		}
		if err != nil || out != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.src, out, err, tc.want)
		}
	}
}

package template

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// valueBombs are templates whose output is small but whose intermediate
// values grow without bound (BREAKER F8 and relatives). Each must fail
// with ErrLimit, quickly, without building the value.
var valueBombs = []struct{ name, src string }{
	{"namespace ~ doubling", `{% set ns = namespace(s="ab") %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}`},
	{"namespace + doubling", `{% set ns = namespace(s="ab") %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s|length }}`},
	{"list + doubling", `{% set ns = namespace(l=[1, 2]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l|length }}`},
	{"variable repetition", `{% set s = "x" * 100000 %}{% set t = s * 1000 %}{{ t|length }}`},
	{"variable count", `{% set n = 200000 %}{% set s = "xxxxxxxxxx" %}{% set t = s * n %}{{ t|length }}`},
	{"list of big strings repeated", `{% set l = ["x" * 100000] %}{% set l = l * 1000 %}{{ l|length }}`},
	{"join separator", `{{ range(100000)|join("x" * 1000)|length }}`},
	{"str.join separator", `{% set sep = "x" * 1000 %}{{ sep.join(range(100000)|map("string")|list)|length }}`},
	{"replace filter", `{{ ("x" * 100000)|replace("x", "y" * 1000)|length }}`},
	{"replace method", `{% set s = "x" * 100000 %}{{ s.replace("x", "y" * 1000)|length }}`},
	{"indent width", `{{ ("\n" * 100000)|indent(1000)|length }}`},
	{"expandtabs", `{% set s = "\t" * 100000 %}{{ s.expandtabs(1000)|length }}`},
	{"list of a string", `{{ ("x" * 1000000)|list|length }}`},
	{"split", `{% set s = "x" * 1000000 %}{{ s.split("x")|length }}`},
	{"str.format width", `{{ "{:>999999999}".format(1)|length }}`},
	{"percent format", `{{ "%s%s" % ("x" * 600000, "y" * 600000) }}`},
	{"format filter", `{{ "%s%s"|format("x" * 600000, "y" * 600000) }}`},
	{"escape", `{{ ("<" * 300000)|e|length }}`},
	{"iterate a string", `{% for c in "x" * 1000000 %}{% endfor %}`},
	{"batch a string", `{{ ("x" * 1000000)|batch(1)|list|length }}`},
	{"tojson indent", `{{ (["x" * 10000] * 100)|tojson(indent=1000)|length }}{{ ([[[[[1]]]]] * 20000)|tojson(indent=1000)|length }}`},
	{"macro frames", `{% macro f(s, n) %}{% if n > 0 %}{{ f(s ~ "x", n - 1)|length }}{% endif %}{% endmacro %}{{ f("x" * 500000, 1000) }}`},
	{"growing list of distinct strings", `{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = ns.l + [("x" * 100000) ~ i] %}{% endfor %}{{ ns.l|length }}`},
	{"block set", `{% set x %}{% set ns = namespace(s="ab") %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{% endset %}`},
	{"with", `{% with s = "x" * 100000 %}{% with t = s * 1000 %}{{ t|length }}{% endwith %}{% endwith %}`},
	{"filter block", `{% filter upper %}{% set ns = namespace(s="ab") %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{% endfilter %}`},
	{"if condition", `{% set ns = namespace(s="ab") %}{% for i in range(40) if (ns.s ~ ns.s)|length %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}`},
}

// TestJinjaValueBombs: with a 1 MiB value bound, every bomb fails with
// ErrLimit in well under a second of work and a few MiB of allocation.
func TestJinjaValueBombs(t *testing.T) {
	for _, tc := range valueBombs {
		t.Run(tc.name, func(t *testing.T) {
			j, err := ParseJinja(tc.src, &JinjaOptions{MaxOutputBytes: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			t0 := time.Now()
			out, err := j.Render(context.Background(), nil)
			el := time.Since(t0)
			runtime.ReadMemStats(&m1)
			if !errors.Is(err, ErrLimit) {
				t.Fatalf("got %q, %v; want ErrLimit", out, err)
			}
			if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 64<<20 {
				t.Errorf("allocated %d MiB before failing", alloc>>20)
			}
			if el > 5*time.Second {
				t.Errorf("took %v", el)
			}
			if s := err.Error(); strings.Contains(s, "Token") || strings.Contains(s, "&{") || len(s) > 200 {
				t.Errorf("error text %q", s)
			}
		})
	}
}

// TestJinjaValueBombsDefaults runs BREAKER F8's exact reproductions with
// the default limits (64 MiB values): ErrLimit, not an OOM kill.
func TestJinjaValueBombsDefaults(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a few hundred MiB")
	}
	for _, src := range []string{
		`{% set ns = namespace(s="ab") %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}`,
		`{% set s = "x" * 1000000 %}{% set t = s * 1000 %}{{ t|length }}`,
	} {
		j, err := ParseJinja(src, nil)
		if err != nil {
			t.Fatal(err)
		}
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		_, err = j.Render(context.Background(), map[string]any{"messages": []any{}})
		runtime.ReadMemStats(&m1)
		if !errors.Is(err, ErrLimit) {
			t.Fatalf("%s: got %v", src, err)
		}
		if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 512<<20 {
			t.Errorf("%s: allocated %d MiB", src, alloc>>20)
		}
	}
}

func TestJinjaValueOptions(t *testing.T) {
	tests := []struct {
		name string
		src  string
		opts JinjaOptions
		want error
	}{
		{"value bound below output bound", `{{ ("x" * 2000)|length }}`, JinjaOptions{MaxValueBytes: 1000}, ErrLimit},
		{"value bound met", `{{ ("x" * 1000)|length }}`, JinjaOptions{MaxValueBytes: 1000}, nil},
		{"alloc bound", `{% set ns = namespace(n=0) %}{% for i in range(100) %}{% set s = "x" * 1000 ~ i %}{% endfor %}`, JinjaOptions{MaxAllocBytes: 50_000}, ErrLimit},
		{"alloc bound met", `{% for i in range(10) %}{% set s = "x" * 1000 ~ i %}{% endfor %}`, JinjaOptions{MaxAllocBytes: 50_000}, nil},
		{"output bound sets value bound", `{% set s = "x" * 2000 %}`, JinjaOptions{MaxOutputBytes: 1000}, ErrLimit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j, err := ParseJinja(tc.src, &tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			_, err = j.Render(context.Background(), nil)
			if (tc.want == nil && err != nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestJinjaBudgetKeepsSemantics: operators, loops and filters inside
// set/with/filter blocks follow the same (Python) rules as elsewhere,
// and ordinary values far below the bounds pass.
func TestJinjaBudgetKeepsSemantics(t *testing.T) {
	big := strings.Repeat("y", 600_000)
	msgs, _ := json.Marshal([]map[string]string{{"role": "user", "content": " " + big + " "}, {"role": "assistant", "content": "ok"}})
	tests := []struct{ src, want string }{
		{`{% set t = -7 // 2 %}{{ t }}`, "-4"},
		{`{% set t = 7 % -3 %}{{ t }}`, "-2"},
		{`{% set t = "a" ~ none %}{{ t }}`, "aNone"},
		{`{% set t = [1] + [2] %}{{ t }}`, "[1, 2]"},
		{`{% set t = "a" + "b" %}{{ t }}|{{ 1 + 2 }}|{{ 1.5 + 1 }}`, "ab|3|2.5"},
		{`{% with t = 2 ** 10 %}{{ t }}{% endwith %}`, "1024"},
		{`{% filter upper %}{{ "ab" * 2 }}{% endfilter %}`, "ABAB"},
		{`{% for c in "abc" %}{{ c }}{% endfor %}|{{ "cba"|sort|join }}|{{ "abc"|list }}`, "abc|abc|['a', 'b', 'c']"},
		{`{{ "ab".center(4, " ") * 2 }}|{{ "ab".upper() * 2 }}`, " ab  ab |ABAB"},
		{`{% set ns = namespace(s="") %}{% for m in messages %}{% set ns.s = ns.s ~ (m.content|trim) %}{% endfor %}{{ ns.s|length }}`, "600002"},
		{`{% for m in messages %}{{ m.content.strip()|length }},{% endfor %}`, "600000,2,"},
	}
	for _, tc := range tests {
		j, err := ParseJinja(tc.src, &JinjaOptions{MaxOutputBytes: 1 << 20})
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		got, err := j.Render(context.Background(), map[string]any{"messages": json.RawMessage(msgs)})
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.src, got, err, tc.want)
		}
	}
}

// TestJinjaErrorText (BREAKER F9): render errors are short (cause and
// line, no gonja node or token dumps) and keep their sentinel.
func TestJinjaErrorText(t *testing.T) {
	tests := []struct {
		src  string
		want error
		text string
	}{
		{`{{ 1 // 0 }}`, ErrRender, "template: Jinja render error: integer division or modulo by zero at line 1"},
		{"x\n{{ 1 / 0 }}", ErrRender, "template: Jinja render error: division by zero at line 2"},
		{"\n\n{% set x = 1 % 0 %}", ErrRender, "template: Jinja render error: integer modulo by zero at line 3"},
		{`{{ "a"|nosuchfilter }}`, ErrRender, "template: Jinja render error: filter 'nosuchfilter' not found at line 1"},
		{`{{ foo.bar.baz }}`, ErrRender, "template: Jinja render error: Can't use Getitem on None at line 1"},
		{`{{ "%d" % "x" }}`, ErrRender, "template: Jinja render error: %d format: a real number is required at line 1"},
		{`{{ raise_exception("bad: role") }}`, ErrRender, "template: Jinja render error: raise_exception: bad: role"},
		{`{{ "{:>999999999}".format(1) }}`, ErrLimit, "template: limit exceeded: str.format field width over 1048576 at line 1"},
		{`{{ "x" * 100 * 100 }}`, ErrLimit, "template: limit exceeded: string repetition longer than 1000 bytes at line 1"},
		{`{{ raise_exception | tojson }}`, ErrUnserializable, ""},
	}
	for _, tc := range tests {
		j, err := ParseJinja(tc.src, &JinjaOptions{MaxOutputBytes: 1000})
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		_, err = j.Render(context.Background(), nil)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.src, err, tc.want)
			continue
		}
		s := err.Error()
		if tc.text != "" && s != tc.text {
			t.Errorf("%s:\n got %q\nwant %q", tc.src, s, tc.text)
		}
		for _, bad := range []string{"Token", "&{", "filtered_expression", "unable to execute"} {
			if strings.Contains(s, bad) {
				t.Errorf("%s: error text %q has %q", tc.src, s, bad)
			}
		}
	}
}

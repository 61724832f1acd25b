package template

import (
	"math"
	"testing"
)

// Expected strings are Python 3 outputs of json.dumps(json.loads(in),
// ensure_ascii=False) (and repr for floats).
func TestPyDumps(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"b": 1, "a": [1, 2.50, -0, 1e2, 1E-7, 12345678901234567890123]}`, `{"b": 1, "a": [1, 2.5, 0, 100.0, 1e-07, 12345678901234567890123]}`},
		{`{"s": "<tag> & \"q\" \\ \u00e9 \u2028 \ud83d\ude00 \u0001\u007f"}`, "{\"s\": \"<tag> & \\\"q\\\" \\\\ é \u2028 😀 \\u0001\u007f\"}"},
		{`{"a": 1, "a": 2, "b": 3}`, `{"a": 2, "b": 3}`},
		{`[1e16, 1.5e16, 123456789012345.6, 0.0001, 0.00001, 1e400, -1e400, 5e-324]`, `[1e+16, 1.5e+16, 123456789012345.6, 0.0001, 1e-05, Infinity, -Infinity, 5e-324]`},
		{`{}`, `{}`},
		{`[]`, `[]`},
		{`{"x": {"y": {}}, "z": [[]]}`, `{"x": {"y": {}}, "z": [[]]}`},
		{`null`, `null`},
		{`"\t\n\r\b\f"`, `"\t\n\r\b\f"`},
	}
	for _, tc := range tests {
		v, err := decodeOrdered([]byte(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		got, err := pyDumps(v)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

func TestPyDumpsOptions(t *testing.T) {
	v, _ := decodeOrdered([]byte(`{"b": [1, {"c": "é"}], "a": {}}`))
	ind := "  "
	tests := []struct {
		o    dumpOptions
		want string
	}{
		{dumpOptions{Indent: &ind}, "{\n  \"b\": [\n    1,\n    {\n      \"c\": \"é\"\n    }\n  ],\n  \"a\": {}\n}"},
		{dumpOptions{SortKeys: true, EnsureASCII: true}, `{"a": {}, "b": [1, {"c": "\u00e9"}]}`},
		{dumpOptions{ItemSep: ",", KeySep: ":", SepsSet: true}, `{"b":[1,{"c":"é"}],"a":{}}`},
	}
	for _, tc := range tests {
		got, err := dumpWith(v, &tc.o)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("got %q want %q", got, tc.want)
		}
	}
}

func TestPyFloatRepr(t *testing.T) {
	for f, want := range map[float64]string{
		0: "0.0", 1: "1.0", -2.5: "-2.5", 0.1: "0.1", 1e15: "1000000000000000.0", 1e16: "1e+16",
		1.5e-5: "1.5e-05", 1e-4: "0.0001", 123.456: "123.456", math.MaxFloat64: "1.7976931348623157e+308",
		1e100: "1e+100", 2.0e-308: "2e-308",
	} {
		if got := pyFloatRepr(f); got != want {
			t.Errorf("%v: got %s want %s", f, got, want)
		}
	}
	if got := pyFloatRepr(math.Copysign(0, -1)); got != "-0.0" {
		t.Errorf("-0: %s", got)
	}
}

func TestDecodeOrderedErrors(t *testing.T) {
	for _, in := range []string{``, `{`, `{"a" 1}`, `[1,]`, `{"a": 1} x`, `nul`} {
		if _, err := decodeOrdered([]byte(in)); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
	deep := make([]byte, 0, 2000)
	for range 1000 {
		deep = append(deep, '[')
	}
	if _, err := decodeOrdered(deep); err == nil {
		t.Error("deep nesting accepted")
	}
}

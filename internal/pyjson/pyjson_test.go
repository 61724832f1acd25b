package pyjson

import (
	"bytes"
	"strings"
	"testing"
)

func TestWriteString(t *testing.T) {
	cases := []struct {
		in, plain, ascii string
	}{
		{"", `""`, `""`},
		{"abc", `"abc"`, `"abc"`},
		{"a\"b\\c", `"a\"b\\c"`, `"a\"b\\c"`},
		{"\n\r\t\b\f\x00\x1f", `"\n\r\t\b\f\u0000\u001f"`, `"\n\r\t\b\f\u0000\u001f"`},
		{"x\x7fy", "\"x\x7fy\"", `"x\u007fy"`},
		{"é中", `"é中"`, `"\u00e9\u4e2d"`},
		{"😀", `"😀"`, `"\ud83d\ude00"`},
		{"a\xffb", "\"a\ufffdb\"", `"a\ufffdb"`},
		{"\ufffd", "\"\ufffd\"", `"\ufffd"`},
	}
	for _, c := range cases {
		var bb bytes.Buffer
		WriteString(&bb, c.in, false)
		if got := bb.String(); got != c.plain {
			t.Errorf("WriteString(%q, false) = %q, want %q", c.in, got, c.plain)
		}
		var sb strings.Builder
		WriteString(&sb, c.in, true)
		if got := sb.String(); got != c.ascii {
			t.Errorf("WriteString(%q, true) = %q, want %q", c.in, got, c.ascii)
		}
	}
}

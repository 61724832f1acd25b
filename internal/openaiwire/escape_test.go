package openaiwire

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestMarshalNoHTMLEscape: Marshal writes '<', '>' and '&' as themselves
// (vLLM's pydantic JSON), also inside MarshalJSON methods' output, keeps
// an escaped backslash before "u003c" (the text \u003c), and decodes to the
// same value as json.Marshal's output.
func TestMarshalNoHTMLEscape(t *testing.T) {
	for _, s := range []string{"<think>&", `a\u003cb`, `\\u0026`, "plain", `"<"`, "\u2028<", "x\\", "<｜User｜>"} {
		v := map[string]any{"s": s, "raw": json.RawMessage(`"<&>"`)}
		b, err := Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, esc := range []string{`\u003c`, `\u003e`, `\u0026`} {
			want, _ := json.Marshal(s)
			if bytes.Contains(b, []byte(esc)) && !bytes.Contains(want, []byte(`\\`+esc[1:])) {
				t.Errorf("%q: %s has %s", s, b, esc)
			}
		}
		var got map[string]any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q: %s: %v", s, b, err)
		}
		if got["s"] != s || got["raw"] != "<&>" {
			t.Errorf("%q: %s decodes to %q", s, b, got)
		}
	}
	b, _ := Marshal("<think>&")
	if string(b) != `"<think>&"` {
		t.Errorf("Marshal = %s", b)
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, map[string]string{"a": "&"}); err != nil || buf.String() != "{\"a\":\"&\"}\n" {
		t.Errorf("WriteJSON = %q, %v", buf.String(), err)
	}
}

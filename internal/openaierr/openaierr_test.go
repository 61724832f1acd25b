package openaierr

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/dsv4go/dsv4go/dsv4"
)

// TestTypeError checks that JSON type errors name the OpenAI field
// and JSON types, never Go type or embedded-struct names.
func TestTypeError(t *testing.T) {
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		body, field, want string
	}{
		{`{"messages":"hi"}`, "messages", `invalid type for "messages": expected an array of messages, got string`},
		{`{` + msgs + `,"max_tokens":1.5}`, "max_tokens", `invalid type for "max_tokens": expected an integer, got number 1.5`},
		{`{` + msgs + `,"max_tokens":"10"}`, "max_tokens", `invalid type for "max_tokens": expected an integer, got string`},
		{`{` + msgs + `,"temperature":"hot"}`, "temperature", `invalid type for "temperature": expected a number, got string`},
		{`{` + msgs + `,"seed":"x"}`, "seed", `invalid type for "seed": expected an integer, got string`},
		{`{` + msgs + `,"seed":18446744073709551615}`, "seed", `invalid type for "seed": expected an integer in [-9223372036854775808, 9223372036854775807], got number 18446744073709551615`},
		{`{` + msgs + `,"stream":"yes"}`, "stream", `invalid type for "stream": expected a boolean, got string`},
		{`{` + msgs + `,"tools":"x"}`, "tools", `invalid type for "tools": expected an array of tools, got string`},
		{`{` + msgs + `,"stop_token_ids":[1.5]}`, "stop_token_ids", `expected an integer, got number 1.5`},
		{`{"model":5,` + msgs + `}`, "model", `invalid type for "model": expected a string, got number`},
		{`[]`, "", `request body must be a JSON object, got array`},
		{`{` + msgs + `,"stop":5}`, "stop", `invalid type for "stop": expected a string or an array of strings, got number`},
		{`{` + msgs + `,"stop":[1]}`, "stop", `invalid type for "stop": expected a string or an array of strings, got array`},
		{`{"messages":[1]}`, "messages", `invalid type for "messages": expected a message object, got number`},
		{`{` + msgs + `,"tools":[{"type":"function","function":{"name":5}}]}`, "tools.function.name", `expected a string, got number`},
	}
	for _, c := range cases {
		var req dsv4.ChatRequest
		err := json.Unmarshal([]byte(c.body), &req)
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) {
			t.Errorf("%s: %v is not a type error", c.body, err)
			continue
		}
		field, msg := TypeError(te)
		if field != c.field || !strings.Contains(msg, c.want) {
			t.Errorf("%s: got (%q, %q), want (%q, %q)", c.body, field, msg, c.field, c.want)
		}
		if strings.Contains(msg, "RequestSampling") || strings.Contains(msg, "int64") || strings.Contains(msg, "template.") || strings.Contains(msg, "[]") {
			t.Errorf("%s: message names Go types: %q", c.body, msg)
		}
	}
}

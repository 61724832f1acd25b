package main

import (
	"strings"
	"testing"
)

// TestCheckFlagValues: a numeric flag below its least meaningful value
// (negative where 0 has a documented meaning, 0 or negative where it has
// none) stops the server at startup with a message naming the flag.
func TestCheckFlagValues(t *testing.T) {
	tests := []struct {
		name string
		f    flagValue
		want string // "" = accepted
	}{
		{"context-length 0 is the model's", flagValue{"context-length", 0, 0, "0: the model's"}, ""},
		{"context-length 4096", flagValue{"context-length", 4096, 0, "0: the model's"}, ""},
		{"context-length -5", flagValue{"context-length", -5, 0, "0: the model's"}, "--context-length must be >= 0 (0: the model's), got -5"},
		{"default-max-tokens -1", flagValue{"default-max-tokens", -1, 0, "0: the rest of the context"}, "--default-max-tokens must be >= 0"},
		{"max-state-bytes -1", flagValue{"max-state-bytes", -1, 0, "0: unlimited"}, "--max-state-bytes must be >= 0"},
		{"max-running-requests 0", flagValue{"max-running-requests", 0, 1, ""}, "--max-running-requests must be >= 1, got 0"},
		{"chunked-prefill-size -3", flagValue{"chunked-prefill-size", -3, 1, ""}, "--chunked-prefill-size must be >= 1, got -3"},
		{"max-body-bytes 1", flagValue{"max-body-bytes", 1, 1, ""}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkFlagValues([]flagValue{tc.f})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	// The first offending flag is named.
	err := checkFlagValues([]flagValue{{"a", 1, 0, ""}, {"b", -1, 0, "0: x"}, {"c", -1, 0, "0: y"}})
	if err == nil || !strings.Contains(err.Error(), "--b ") {
		t.Errorf("got %v, want --b", err)
	}
}

package openaiwire

import (
	"encoding/json"
	"testing"

	"github.com/dsv4go/dsv4go/dsv4"
)

// TestNewChunkChoiceStopReason: stop_reason (vLLM) is written on the
// choice's finishing chunk only, null included; matched_stop (SGLang) is
// kept beside it.
func TestNewChunkChoiceStopReason(t *testing.T) {
	for _, tc := range []struct {
		name string
		ch   dsv4.ChatChunk
		want string
	}{
		{"delta", dsv4.ChatChunk{Delta: dsv4.ChatDelta{Content: "a"}}, `{"index":0,"delta":{"content":"a"},"logprobs":null,"finish_reason":null}`},
		{"eos", dsv4.ChatChunk{FinishReason: "stop", MatchedStop: int32(1)}, `{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop","matched_stop":1,"stop_reason":null}`},
		{"stop token", dsv4.ChatChunk{FinishReason: "stop", MatchedStop: int32(7), StopReason: int32(7)}, `{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop","matched_stop":7,"stop_reason":7}`},
		{"stop string", dsv4.ChatChunk{Index: 1, FinishReason: "stop", MatchedStop: "x", StopReason: "x"}, `{"index":1,"delta":{},"logprobs":null,"finish_reason":"stop","matched_stop":"x","stop_reason":"x"}`},
		{"length", dsv4.ChatChunk{FinishReason: "length"}, `{"index":0,"delta":{},"logprobs":null,"finish_reason":"length","stop_reason":null}`},
	} {
		b, err := json.Marshal(NewChunkChoice(&tc.ch))
		if err != nil || string(b) != tc.want {
			t.Errorf("%s: %s %v, want %s", tc.name, b, err, tc.want)
		}
	}
}

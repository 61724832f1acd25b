// Package openaiwire holds the OpenAI wire JSON shapes that both the
// disaggregated servers (disagg) and the example server (examples/server)
// write, so the two answer with the same bytes.
package openaiwire

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"

	"github.com/dsv4go/dsv4go/dsv4"
)

// Error is OpenAI's error object (sent as {"error": Error}).
type Error struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   any    `json:"param"`
	Code    any    `json:"code"`
}

// ChunkChoice is one choice of a chat.completion.chunk.
type ChunkChoice struct {
	Index        int                `json:"index"`
	Delta        dsv4.ChatDelta     `json:"delta"`
	Logprobs     *dsv4.ChatLogprobs `json:"logprobs"`
	FinishReason *string            `json:"finish_reason"`
	MatchedStop  any                `json:"matched_stop,omitempty"`
	// StopReason is vLLM's stop_reason (dsv4.ChatChoice.StopReason): on
	// the chunk with finish_reason only, null included, as vLLM's
	// streamed chat chunks (fields left unset are not written).
	StopReason json.RawMessage `json:"stop_reason,omitempty"`
}

// NewChunkChoice renders a chat stream chunk of one choice: its delta and
// logprobs, and on the choice's last chunk finish_reason, matched_stop
// (SGLang) and stop_reason (vLLM).
func NewChunkChoice(ch *dsv4.ChatChunk) ChunkChoice {
	c := ChunkChoice{Index: ch.Index, Delta: ch.Delta, Logprobs: ch.Logprobs, MatchedStop: ch.MatchedStop}
	if ch.FinishReason != "" {
		c.FinishReason = &ch.FinishReason
		c.StopReason, _ = json.Marshal(ch.StopReason) // an int32, a string or nil
	}
	return c
}

// ChatResponse is a non-streamed chat.completion.
type ChatResponse struct {
	ID      string            `json:"id"`
	Object  string            `json:"object"`
	Created int64             `json:"created"`
	Model   string            `json:"model"`
	Choices []dsv4.ChatChoice `json:"choices"`
	Usage   dsv4.Usage        `json:"usage"`
	// PromptLogprobs is vLLM's top-level prompt_logprobs (absent unless
	// the request set prompt_logprobs): dsv4.ChatResponse.PromptLogprobs.
	PromptLogprobs []dsv4.PromptPosition `json:"prompt_logprobs,omitempty"`
}

// NewID returns prefix followed by 24 random hex digits ("chatcmpl-…").
func NewID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

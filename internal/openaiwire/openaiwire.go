// Package openaiwire holds the OpenAI wire JSON shapes that both the
// disaggregated servers (disagg) and the example server (examples/server)
// write, so the two answer with the same bytes.
package openaiwire

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"

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

// Marshal is json.Marshal without Go's HTML escaping: '<', '>' and '&' in
// strings are written as themselves, as vLLM's responses (pydantic's
// model_dump_json, Python's json) write them, not as \u003c, \u003e and
// \u0026. It also undoes the escaping that json.Marshal calls inside
// MarshalJSON methods (dsv4.ChatDelta, dsv4.TopLogprobsObject...) leave,
// which json.Encoder.SetEscapeHTML(false) keeps. The output is the same
// JSON value; errors are json.Marshal's.
func Marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return UnescapeHTML(b), nil
}

// WriteJSON writes v as Marshal encodes it, followed by a newline (as
// json.Encoder.Encode), to w.
func WriteJSON(w io.Writer, v any) error {
	b, err := Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// UnescapeHTML turns the \u003c, \u003e and \u0026 escapes of b, JSON text
// as encoding/json writes it, back into '<', '>' and '&'. An escaped
// backslash followed by "u003c" (the text \u003c in a string) is kept.
// b is changed in place and returned (unchanged when it has none).
func UnescapeHTML(b []byte) []byte {
	i := bytes.Index(b, []byte(`\u00`))
	if i < 0 {
		return b
	}
	// Every backslash in encoding/json's output starts a two-character
	// escape (\\, \", \n, \uXXXX), so pairs are walked from the first
	// backslash before i.
	i = bytes.IndexByte(b, '\\')
	out := b[:i]
	for i < len(b) {
		c := b[i]
		if c != '\\' || i+1 >= len(b) {
			out = append(out, c)
			i++
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) && string(b[i+2:i+4]) == "00" {
			switch string(b[i+4 : i+6]) {
			case "3c":
				out = append(out, '<')
				i += 6
				continue
			case "3e":
				out = append(out, '>')
				i += 6
				continue
			case "26":
				out = append(out, '&')
				i += 6
				continue
			}
		}
		out = append(out, c, b[i+1])
		i += 2
	}
	return out
}

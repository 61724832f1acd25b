// Command render turns the dsv4-tiny training conversations into token ids with
// this module's own DeepSeek-V4 encoder (package template) and tokenizer
// (package tokenizer): the training data of the embedded model is exactly what
// our engine will see at inference time.
//
// Input: tools/train_tiny/conversations.jsonl (written by gen_data.py), one
// request per line: {"name", "thinking", "tools", "messages"}. Output: one
// sample per assistant turn, {"name", "prompt", "completion", "prompt_ids",
// "completion_ids"}, where prompt is the conversation before the turn rendered
// with the generation prompt and completion is the turn's text through
// <｜end▁of▁sentence｜>. It checks that the rendering through the turn starts
// with the prompt, text and token ids alike, and that no prompt appears twice
// with different completions.
//
// Usage:
//
//	go run ./tools/train_tiny/render [-in FILE] [-tokenizer DIR] [-out FILE]
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dsv4go/dsv4go/template"
	"github.com/dsv4go/dsv4go/tokenizer"
)

type conversation struct {
	Name     string             `json:"name"`
	Thinking bool               `json:"thinking"`
	Tools    []template.Tool    `json:"tools,omitempty"`
	Messages []template.Message `json:"messages"`
}

type sample struct {
	Name          string  `json:"name"`
	Prompt        string  `json:"prompt"`
	Completion    string  `json:"completion"`
	PromptIDs     []int32 `json:"prompt_ids"`
	CompletionIDs []int32 `json:"completion_ids"`
}

func main() {
	in := flag.String("in", "tools/train_tiny/conversations.jsonl", "conversations (JSON lines)")
	tokDir := flag.String("tokenizer", "models/dsv4-tiny", "directory with tokenizer.json and tokenizer_config.json")
	out := flag.String("out", "tools/train_tiny/build/samples.jsonl", "output samples (JSON lines)")
	flag.Parse()
	if err := run(*in, *tokDir, *out); err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
}

func run(in, tokDir, out string) error {
	tok, err := tokenizer.Load(tokDir)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var samples []sample
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var c conversation
		if err := json.Unmarshal(line, &c); err != nil {
			return fmt.Errorf("%s:%d: %w", in, i+1, err)
		}
		s, err := render(tok, &c)
		if err != nil {
			return fmt.Errorf("%s:%d (%s): %w", in, i+1, c.Name, err)
		}
		samples = append(samples, s...)
	}
	seen := map[string][]int32{}
	for _, s := range samples {
		k := fmt.Sprint(s.PromptIDs)
		if prev, ok := seen[k]; ok && !slices.Equal(prev, s.CompletionIDs) {
			return fmt.Errorf("prompt of %s appears twice with different completions", s.Name)
		}
		seen[k] = s.CompletionIDs
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, s := range samples {
		if err := enc.Encode(s); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %d samples to %s\n", len(samples), out)
	return nil
}

// render returns one sample per assistant message of c.
func render(tok *tokenizer.Tokenizer, c *conversation) ([]sample, error) {
	msgs := slices.Clone(c.Messages)
	if len(c.Tools) > 0 {
		// Tools go on the first system message, as SGLang's serving layer puts
		// them (an empty one is added when the conversation has none).
		if len(msgs) == 0 || msgs[0].Role != "system" {
			msgs = append([]template.Message{{Role: "system"}}, msgs...)
		}
		msgs[0].Tools = c.Tools
	}
	opts := &template.Options{Thinking: c.Thinking}
	var out []sample
	turn := 0
	for i, m := range msgs {
		if m.Role != "assistant" {
			continue
		}
		prompt, err := template.EncodeV4(msgs[:i], opts)
		if err != nil {
			return nil, err
		}
		full, err := template.EncodeV4(msgs[:i+1], opts)
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(full, prompt) {
			return nil, fmt.Errorf("turn %d: rendering through the turn does not start with the prompt", turn)
		}
		pids, err := encode(tok, prompt)
		if err != nil {
			return nil, err
		}
		fids, err := encode(tok, full)
		if err != nil {
			return nil, err
		}
		if len(fids) <= len(pids) || !slices.Equal(fids[:len(pids)], pids) {
			return nil, fmt.Errorf("turn %d: token boundary between prompt and completion moved", turn)
		}
		if fids[len(fids)-1] != eosID {
			return nil, errors.New("completion does not end with <｜end▁of▁sentence｜>")
		}
		out = append(out, sample{
			Name:          fmt.Sprintf("%s#%d", c.Name, turn),
			Prompt:        prompt,
			Completion:    full[len(prompt):],
			PromptIDs:     pids,
			CompletionIDs: fids[len(pids):],
		})
		turn++
	}
	return out, nil
}

// eosID is <｜end▁of▁sentence｜> in the DeepSeek-V4 vocabulary.
const eosID = 1

// encode tokenizes a rendered prompt: every added token is recognized (the
// template wrote them), and no BOS is added (the template wrote it too).
func encode(tok *tokenizer.Tokenizer, text string) ([]int32, error) {
	ids := tok.Encode(text, tokenizer.EncodeOptions{Special: tokenizer.MatchAll})
	if len(ids) == 0 && text != "" {
		return nil, errors.New("tokenizer returned no ids")
	}
	return ids, nil
}

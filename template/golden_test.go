package template

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Golden files are written by tools/gen_template_goldens.py (Python: DeepSeek's
// encoder and transformers' apply_chat_template); Go compares byte for byte.

// compareGolden reports a render that failed or differs from want; it
// returns 1 for a failure and stops the test after too many.
func compareGolden(t *testing.T, name, got string, err error, want string, failedSoFar int) int {
	t.Helper()
	switch {
	case err != nil:
		t.Errorf("%s: %v", name, err)
	case got != want:
		t.Errorf("%s: mismatch\n%s", name, firstDiff(got, want))
	default:
		return 0
	}
	if failedSoFar >= 5 {
		t.Fatal("too many failures")
	}
	return 1
}

func readJSONL[T any](t *testing.T, name string) []T {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "golden", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var rows []T
	for sc.Scan() {
		var r T
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s line %d: %v", name, len(rows)+1, err)
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestGoldenV4Generated(t *testing.T) {
	type row struct {
		Name     string    `json:"name"`
		Messages []Message `json:"messages"`
		Options  struct {
			Thinking        bool    `json:"thinking"`
			ReasoningEffort *string `json:"reasoning_effort"`
			DropThinking    bool    `json:"drop_thinking"`
			Context         int     `json:"context"` // messages[:Context] are Options.Context
		} `json:"options"`
		Prompt string `json:"prompt"`
	}
	rows := readJSONL[row](t, "v4_generated.jsonl.gz")
	if len(rows) < 200 {
		t.Fatalf("only %d generated V4 cases", len(rows))
	}
	failed := 0
	for _, r := range rows {
		opts := &Options{Thinking: r.Options.Thinking, KeepThinking: !r.Options.DropThinking}
		if r.Options.ReasoningEffort != nil {
			opts.ReasoningEffort = *r.Options.ReasoningEffort
		}
		opts.Context = r.Messages[:r.Options.Context]
		got, err := EncodeV4(r.Messages[r.Options.Context:], opts)
		failed += compareGolden(t, r.Name, got, err, r.Prompt, failed)
	}
	t.Logf("%d conversations byte-identical to encoding_dsv4.py", len(rows)-failed)
}

func TestGoldenV32Generated(t *testing.T) {
	type row struct {
		Name     string    `json:"name"`
		Messages []Message `json:"messages"`
		Options  struct {
			Thinking     bool `json:"thinking"`
			DropThinking bool `json:"drop_thinking"`
		} `json:"options"`
		Prompt string `json:"prompt"`
		Error  string `json:"error"`
	}
	rows := readJSONL[row](t, "v32_generated.jsonl.gz")
	failed, rejected := 0, 0
	for _, r := range rows {
		got, err := EncodeV32(r.Messages, &Options{Thinking: r.Options.Thinking, KeepThinking: !r.Options.DropThinking})
		if r.Error != "" {
			// encoding_dsv32.py rejects it: so must we, with a typed error.
			if !errors.Is(err, ErrInvalidMessage) && !errors.Is(err, ErrToolResultWithoutCall) {
				t.Errorf("%s: Python raised %q; got %v", r.Name, r.Error, err)
				failed++
			}
			rejected++
			continue
		}
		failed += compareGolden(t, r.Name, got, err, r.Prompt, failed)
	}
	t.Logf("%d conversations byte-identical to encoding_dsv32.py, %d rejected by both", len(rows)-rejected-failed, rejected)
}

func loadV3Template(t testing.TB) *Jinja {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "deepseek-v3", "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ChatTemplate string `json:"chat_template"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	j, err := ParseJinja(cfg.ChatTemplate, nil)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func TestGoldenJinjaV3(t *testing.T) {
	type row struct {
		Name                string          `json:"name"`
		Messages            json.RawMessage `json:"messages"`
		AddGenerationPrompt bool            `json:"add_generation_prompt"`
		Prompt              string          `json:"prompt"`
	}
	rows := readJSONL[row](t, "jinja_v3.jsonl.gz")
	if len(rows) < 100 {
		t.Fatalf("only %d V3 template cases", len(rows))
	}
	j := loadV3Template(t)
	failed := 0
	for _, r := range rows {
		got, err := j.RenderChat(context.Background(), &JinjaInput{
			Messages:            r.Messages,
			AddGenerationPrompt: r.AddGenerationPrompt,
			SpecialTokens: map[string]string{
				"bos_token": BOS, "eos_token": EOS, "pad_token": EOS,
			},
		})
		failed += compareGolden(t, r.Name, got, err, r.Prompt, failed)
	}
	t.Logf("%d conversations byte-identical to transformers apply_chat_template", len(rows)-failed)
}

func TestGoldenJinjaProbes(t *testing.T) {
	type row struct {
		Name                string                     `json:"name"`
		Template            string                     `json:"template"`
		Messages            json.RawMessage            `json:"messages"`
		Tools               json.RawMessage            `json:"tools"`
		AddGenerationPrompt bool                       `json:"add_generation_prompt"`
		Kwargs              map[string]json.RawMessage `json:"kwargs"`
		Prompt              *string                    `json:"prompt"`
		Error               string                     `json:"error"`
	}
	for _, file := range []struct{ golden, dir string }{{"jinja_extra.jsonl.gz", "jinja"}, {"jinja_real.jsonl.gz", "jinja-real"}} {
		rows := readJSONL[row](t, file.golden)
		templates := map[string]*Jinja{}
		failed := 0
		for _, r := range rows {
			j := templates[r.Template]
			if j == nil {
				src, err := os.ReadFile(filepath.Join("testdata", file.dir, r.Template))
				if err != nil {
					t.Fatal(err)
				}
				if j, err = ParseJinja(string(src), nil); err != nil {
					t.Fatalf("%s: %v", r.Template, err)
				}
				templates[r.Template] = j
			}
			got, err := j.RenderChat(context.Background(), &JinjaInput{
				Messages:            r.Messages,
				Tools:               r.Tools,
				AddGenerationPrompt: r.AddGenerationPrompt,
				Kwargs:              r.Kwargs,
			})
			switch {
			case r.Prompt == nil:
				if err == nil || !errors.Is(err, ErrRender) {
					t.Errorf("%s: want an ErrRender like Python's %q, got %v", r.Name, r.Error, err)
					failed++
				}
			case err != nil:
				t.Errorf("%s: %v", r.Name, err)
				failed++
			case got != *r.Prompt:
				t.Errorf("%s: mismatch\n%s", r.Name, firstDiff(got, *r.Prompt))
				failed++
			}
			if failed > 8 {
				t.Fatal("too many failures")
			}
		}
		t.Logf("%s: %d renders identical to transformers' Jinja environment", file.golden, len(rows)-failed)
	}
}

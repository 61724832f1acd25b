package parse

import (
	"compress/gzip"
	"encoding/json"
	"os"
	"testing"
)

// officialCase is one row of testdata/official_v4.json.gz, written by
// tools/gen_parse_goldens.py from DeepSeek's reference encoder and parser
// (encoding_dsv4.encode_messages, parse_message_from_completion_text).
type officialCase struct {
	Mode      string `json:"mode"`
	Text      string `json:"text"`
	Reasoning string `json:"reasoning_content"`
	Content   string `json:"content"`
	ToolCalls []struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"tool_calls"`
}

func loadOfficial(t testing.TB) []officialCase {
	rows, err := readOfficial()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func readOfficial() ([]officialCase, error) {
	f, err := os.Open("testdata/official_v4.json.gz")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	var rows []officialCase
	err = json.NewDecoder(zr).Decode(&rows)
	return rows, err
}

func officialOptions(mode string) Options {
	return Options{Reasoning: "deepseek-v4", Tools: "deepseek-v4", Thinking: mode == "thinking"}
}

// TestOfficialV4 compares Parse with DeepSeek's reference parser on
// completions rendered by DeepSeek's reference encoder: same
// reasoning_content, content, tool names and byte-identical arguments.
func TestOfficialV4(t *testing.T) {
	rows := loadOfficial(t)
	if len(rows) < 100 {
		t.Fatalf("%d golden rows", len(rows))
	}
	for i, r := range rows {
		got, err := Parse(r.Text, officialOptions(r.Mode))
		if err != nil {
			t.Fatal(err)
		}
		if got.ReasoningContent != r.Reasoning || got.Content != r.Content || len(got.ToolCalls) != len(r.ToolCalls) {
			t.Fatalf("row %d: got %+v\nwant %+v", i, got, r)
		}
		for j, c := range r.ToolCalls {
			if g := got.ToolCalls[j].Function; g.Name != c.Name || g.Arguments != c.Arguments {
				t.Errorf("row %d call %d: got %s %s, want %s %s", i, j, g.Name, g.Arguments, c.Name, c.Arguments)
			}
		}
		if got.Err() != nil {
			t.Errorf("row %d: diagnostics on well-formed output: %v", i, got.Err())
		}
	}
}

package template

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// loadVector reads a DeepSeek test input: either a message list or
// {"tools": [...], "messages": [...]} (tools move to messages[0], as the
// official tests do).
func loadVector(t *testing.T, path string) []Message {
	t.Helper()
	data := readTestFile(t, path)
	var msgs []Message
	if strings.HasPrefix(strings.TrimSpace(string(data)), "[") {
		if err := json.Unmarshal(data, &msgs); err != nil {
			t.Fatal(err)
		}
		return msgs
	}
	var doc struct {
		Tools    []Tool    `json:"tools"`
		Messages []Message `json:"messages"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Tools) > 0 {
		doc.Messages[0].Tools = doc.Tools
	}
	return doc.Messages
}

func TestOfficialV4Vectors(t *testing.T) {
	modes := map[int]bool{1: true, 2: true, 3: true, 4: false}
	for n := 1; n <= 4; n++ {
		t.Run(string(rune('0'+n)), func(t *testing.T) {
			dir := filepath.Join("testdata", "official", "v4")
			msgs := loadVector(t, filepath.Join(dir, "test_input_"+string(rune('0'+n))+".json"))
			want, err := os.ReadFile(filepath.Join(dir, "test_output_"+string(rune('0'+n))+".txt"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := EncodeV4(msgs, &Options{Thinking: modes[n]})
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("mismatch\n%s", firstDiff(got, string(want)))
			}
		})
	}
}

func TestOfficialV32Vector(t *testing.T) {
	dir := filepath.Join("testdata", "official", "v32")
	msgs := loadVector(t, filepath.Join(dir, "test_input.json"))
	want, err := os.ReadFile(filepath.Join(dir, "test_output.txt"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := EncodeV32(msgs, &Options{Thinking: true})
	if err != nil {
		t.Fatal(err)
	}
	// The official test compares after str.strip().
	if got != strings.TrimSpace(string(want)) {
		t.Errorf("mismatch\n%s", firstDiff(got, strings.TrimSpace(string(want))))
	}
}

// firstDiff describes where two strings first differ.
func firstDiff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(0, i-80)
	return "at byte " + itoa(i) + "\n got: " + quoteCut(got[lo:], 200) + "\nwant: " + quoteCut(want[lo:], 200)
}

func quoteCut(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	b, _ := json.Marshal(s)
	return string(b)
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	raw := "The user wants Beijing weather; call get_weather.</think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"location\" string=\"true\">Beijing</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>"
	want := `{"reasoning_content":"The user wants Beijing weather; call get_weather.","content":"","tool_calls":[{"name":"get_weather","arguments":{"location":"Beijing","days":3}}]}` + "\n"
	var out, errb bytes.Buffer
	if err := run(strings.NewReader(raw), &out, &errb, []string{"-parser", "deepseek-v4", "-thinking"}); err != nil {
		t.Fatal(err)
	}
	if out.String() != want {
		t.Errorf("whole:\n got %s\nwant %s", out.String(), want)
	}
	out.Reset()
	chunks := `["The user wants Beijing weather; call get_weather.</th", "ink>\n\n<｜DS", "ML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"location\" string=\"true\">Bei", "jing</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>"]`
	if err := run(strings.NewReader(chunks), &out, &errb, []string{"-parser", "deepseek-v4", "-thinking", "-stream", "-deltas"}); err != nil {
		t.Fatal(err)
	}
	if out.String() != want {
		t.Errorf("stream:\n got %s\nwant %s", out.String(), want)
	}
	if !strings.Contains(errb.String(), `"index":0`) {
		t.Errorf("deltas on stderr: %s", errb.String())
	}
	if err := run(strings.NewReader("x"), &out, &errb, []string{"-parser", "qwen"}); err == nil {
		t.Error("unknown parser accepted")
	}
}

package parse_test

import (
	"errors"
	"fmt"

	"github.com/dsv4go/dsv4go/parse"
)

// A whole DeepSeek-V4 thinking-mode completion (the prompt ended with
// "<｜Assistant｜><think>").
func ExampleParse() {
	raw := "The user wants Beijing weather; call get_weather.</think>\n\n" +
		"<｜DSML｜tool_calls>\n" +
		"<｜DSML｜invoke name=\"get_weather\">\n" +
		"<｜DSML｜parameter name=\"location\" string=\"true\">Beijing</｜DSML｜parameter>\n" +
		"<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n" +
		"</｜DSML｜invoke>\n" +
		"</｜DSML｜tool_calls><｜end▁of▁sentence｜>"
	m, err := parse.Parse(raw, parse.Options{Reasoning: "deepseek-v4", Tools: "deepseek-v4", Thinking: true})
	if err != nil {
		panic(err)
	}
	fmt.Printf("reasoning: %q\ncontent: %q\n", m.ReasoningContent, m.Content)
	for _, c := range m.ToolCalls {
		fmt.Println(c.Function.Name, c.Function.Arguments)
	}
	// Output:
	// reasoning: "The user wants Beijing weather; call get_weather."
	// content: ""
	// get_weather {"location": "Beijing", "days": 3}
}

// Streaming: feed detokenized text deltas as they come; each Push returns
// OpenAI-style deltas. Text that may still be a marker ("</th") is held.
func ExampleStream() {
	s, err := parse.NewStream(parse.Options{Reasoning: "deepseek-v4", Tools: "deepseek-v4", Thinking: true,
		NewID: func(i int) string { return fmt.Sprintf("call_%d", i) }})
	if err != nil {
		panic(err)
	}
	chunks := []string{"Need the time.</th", "ink>Checking.\n\n<｜DSML｜tool_", "calls>\n<｜DSML｜invoke name=\"get_time\">\n",
		"<｜DSML｜parameter name=\"tz\" string=\"true\">Asia/Sha", "nghai</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"}
	show := func(ds []parse.Delta) {
		for _, d := range ds {
			switch {
			case d.ReasoningContent != "":
				fmt.Printf("reasoning %q\n", d.ReasoningContent)
			case d.Content != "":
				fmt.Printf("content %q\n", d.Content)
			default:
				tc := d.ToolCalls[0]
				fmt.Printf("tool_calls[%d] id=%q name=%q arguments+=%q\n", tc.Index, tc.ID, tc.Function.Name, tc.Function.Arguments)
			}
		}
	}
	for _, c := range chunks {
		show(s.Push(c))
	}
	show(s.Close())
	// The calls of a tool-call block come when the block closes (an
	// unterminated block is content), each as a header then its arguments.
	// Output:
	// reasoning "Need the time."
	// content "Checking."
	// tool_calls[0] id="call_0" name="get_time" arguments+=""
	// tool_calls[0] id="" name="" arguments+="{\"tz\": \"Asia/Shanghai\"}"
}

// Malformed output keeps its text and reports why.
func ExampleMessage_Diagnostics() {
	raw := "</think>Sure.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"rm_rf\">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
	m, _ := parse.Parse(raw, parse.Options{Reasoning: "deepseek-v4", Tools: "deepseek-v4", Thinking: true,
		ToolsDecl: []parse.Tool{{Name: "get_weather"}}})
	fmt.Printf("content: %q\ncalls: %d\n", m.Content, len(m.ToolCalls))
	fmt.Println(errors.Is(m.Err(), parse.ErrUnknownTool))
	// Output:
	// content: "Sure.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"rm_rf\">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
	// calls: 0
	// true
}

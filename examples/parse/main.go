// Command parse splits a raw DeepSeek completion into reasoning_content,
// content and tool_calls with the dsv4go parse package.
//
//	go run ./examples/parse -parser deepseek-v4 [-thinking] [-stream] < completion.txt
//
// Without -stream, stdin is the raw completion text. With -stream, stdin is
// a JSON array of text chunks, fed in order to a parse.Stream (the merged
// deltas are printed; -deltas also prints each delta on stderr). The result
// is printed as
//
//	{"reasoning_content": "...", "content": "...", "tool_calls": [{"name": "...", "arguments": {...}}]}
//
// with arguments as a JSON object. Diagnostics about malformed output go to
// stderr. -parser sets both the reasoning and the tool-call parser
// (deepseek-v4, deepseekv32, deepseekv31, deepseekv3); -reasoning and
// -tools override either; -tools-file names an OpenAI "tools" JSON array
// (enables the unknown-tool check) and -coerce converts argument values to
// its schema types.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/dsv4go/dsv4go/parse"
)

type outCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type output struct {
	ReasoningContent string    `json:"reasoning_content"`
	Content          string    `json:"content"`
	ToolCalls        []outCall `json:"tool_calls"`
}

func main() {
	if err := run(os.Stdin, os.Stdout, os.Stderr, os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) { // -h: usage was printed
			return
		}
		fmt.Fprintln(os.Stderr, "parse:", err)
		os.Exit(1)
	}
}

func run(stdin io.Reader, stdout, stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("parse", flag.ContinueOnError)
	fs.SetOutput(stderr)
	parser := fs.String("parser", "deepseek-v4", "reasoning and tool-call parser: deepseek-v4, deepseekv32, deepseekv31, deepseekv3")
	reasoning := fs.String("reasoning", "", "reasoning parser (overrides -parser): deepseek-v4, deepseek-v3, deepseek-r1, none")
	toolsName := fs.String("tools", "", "tool-call parser (overrides -parser), or none")
	thinking := fs.Bool("thinking", false, "the prompt ended with <think>: the completion starts inside the reasoning")
	stream := fs.Bool("stream", false, "stdin is a JSON array of text chunks, fed to a streaming parser")
	deltas := fs.Bool("deltas", false, "with -stream: print each delta as a JSON line on stderr")
	toolsFile := fs.String("tools-file", "", "OpenAI tools JSON array of the request")
	coerce := fs.Bool("coerce", false, "coerce argument values to the types of -tools-file's schemas")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts := parse.Options{Reasoning: *parser, Tools: *parser, Thinking: *thinking, Coerce: *coerce}
	if *reasoning != "" {
		opts.Reasoning = none(*reasoning)
	}
	if *toolsName != "" {
		opts.Tools = none(*toolsName)
	}
	if *toolsFile != "" {
		data, err := os.ReadFile(*toolsFile)
		if err != nil {
			return err
		}
		if opts.ToolsDecl, err = parse.ToolsFromOpenAI(data); err != nil {
			return err
		}
	}
	in, err := io.ReadAll(stdin)
	if err != nil {
		return err
	}
	var msg parse.Message
	if *stream {
		var chunks []string
		if err := json.Unmarshal(in, &chunks); err != nil {
			return fmt.Errorf("-stream wants a JSON array of strings on stdin: %w", err)
		}
		s, err := parse.NewStream(opts)
		if err != nil {
			return err
		}
		var all []parse.Delta
		denc := json.NewEncoder(stderr)
		denc.SetEscapeHTML(false)
		emit := func(ds []parse.Delta) {
			all = append(all, ds...)
			if *deltas {
				for _, d := range ds {
					_ = denc.Encode(d)
				}
			}
		}
		for _, c := range chunks {
			emit(s.Push(c))
		}
		emit(s.Close())
		msg = parse.Merge(all)
		msg.Diagnostics = s.Diagnostics()
	} else if msg, err = parse.Parse(string(in), opts); err != nil {
		return err
	}
	for _, d := range msg.Diagnostics {
		fmt.Fprintln(stderr, "diagnostic:", d)
	}
	out := output{ReasoningContent: msg.ReasoningContent, Content: msg.Content, ToolCalls: []outCall{}}
	for _, c := range msg.ToolCalls {
		args := json.RawMessage(c.Function.Arguments)
		if !json.Valid(args) {
			args, _ = json.Marshal(c.Function.Arguments)
		}
		out.ToolCalls = append(out.ToolCalls, outCall{Name: c.Function.Name, Arguments: args})
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err = stdout.Write(b.Bytes())
	return err
}

func none(s string) string {
	if s == "none" {
		return ""
	}
	return s
}

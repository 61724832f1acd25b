// Command chat talks to a DeepSeek-V4 checkpoint from the terminal.
//
//	go run ./examples/chat "What is 17*23? Number only."   # one answer, then exit
//	go run ./examples/chat                                 # interactive chat
//
// With a prompt argument it prints the model's answer (content only) on
// stdout and exits; without one it reads user turns from stdin, keeps the
// conversation, and streams each reply. An empty (or all-blank) prompt
// argument is a usage error (exit status 2), as a blank line is no turn in
// the interactive mode. In thinking mode (-think) the
// reasoning is streamed to stderr. Decoding is greedy unless -temperature
// is set. The model defaults to the tiny model embedded in the module
// (package models, dsv4-tiny); -model names another checkpoint directory.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/models"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) { // -h: usage was printed
			return
		}
		fmt.Fprintln(os.Stderr, "chat:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2) // as the flag package's own usage errors
		}
		os.Exit(1)
	}
}

// usageError is an error in the command line itself (exit status 2).
type usageError string

func (e usageError) Error() string { return string(e) }

// errEmptyPrompt: a prompt argument that is empty or only blanks.
const errEmptyPrompt = usageError("the prompt argument is empty: give a prompt, or no argument for the interactive mode")

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("chat", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var (
		modelDir    = flags.String("model", "", "checkpoint directory (default: the tiny model shipped in models/dsv4-tiny)")
		think       = flags.Bool("think", false, "thinking mode: the model reasons first (shown on stderr)")
		effort      = flags.String("reasoning-effort", "", "reasoning effort: high or max (thinking mode)")
		system      = flags.String("system", "", "system prompt")
		temperature = flags.Float64("temperature", 0, "sampling temperature (0: greedy)")
		topP        = flags.Float64("top-p", 1, "nucleus sampling mass")
		maxTokens   = flags.Int("max-tokens", 512, "most tokens per reply (reasoning included)")
		seed        = flags.Int64("seed", 0, "sampling seed (0: random)")
	)
	flags.Usage = func() {
		fmt.Fprintf(stderr, "usage: chat [flags] [prompt]\n")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		return err
	}
	prompt := strings.Join(flags.Args(), " ")
	if flags.NArg() > 0 && strings.TrimSpace(prompt) == "" {
		return errEmptyPrompt // before loading the model
	}
	if *modelDir == "" { // the embedded tiny model (package models)
		dir, err := models.TinyDir()
		if err != nil {
			return err
		}
		*modelDir = dir
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	m, err := dsv4.Load(ctx, *modelDir)
	if err != nil {
		return err
	}
	defer m.Close()
	eng, err := dsv4.NewEngine(m, dsv4.EngineOptions{MaxBatch: 1})
	if err != nil {
		return err
	}
	defer eng.Close(context.Background())

	var history []dsv4.Message
	if *system != "" {
		history = append(history, dsv4.Message{Role: "system", Content: *system})
	}
	ask := func(user string, out io.Writer) (string, error) {
		req := &dsv4.ChatRequest{
			Messages:        append(history, dsv4.Message{Role: "user", Content: user}),
			ReasoningEffort: *effort,
			RequestSampling: dsv4.RequestSampling{Temperature: temperature, TopP: topP, MaxTokens: maxTokens},
		}
		if *seed != 0 {
			req.Seed = seed
		}
		if *think {
			req.ChatTemplateKwargs = map[string]any{"thinking": true}
		}
		stream, err := eng.ChatStream(ctx, req)
		if errors.Is(err, dsv4.ErrNoChat) {
			return "", fmt.Errorf("%w (chat needs tokenizer.json and tokenizer_config.json in %s)", err, *modelDir)
		}
		if err != nil {
			return "", err
		}
		var content, reasoning strings.Builder
		for ch, err := range stream {
			if err != nil {
				return "", err
			}
			if ch.Delta.ReasoningContent != "" {
				reasoning.WriteString(ch.Delta.ReasoningContent)
				fmt.Fprint(stderr, ch.Delta.ReasoningContent)
			}
			if ch.Delta.Content != "" {
				if reasoning.Len() > 0 && content.Len() == 0 {
					fmt.Fprintln(stderr)
				}
				content.WriteString(ch.Delta.Content)
				fmt.Fprint(out, ch.Delta.Content)
			}
			for _, tc := range ch.Delta.ToolCalls {
				if tc.Function.Name != "" {
					fmt.Fprintf(out, "[tool call %s]", tc.Function.Name)
				}
				fmt.Fprint(out, tc.Function.Arguments)
			}
		}
		fmt.Fprintln(out)
		history = append(history, dsv4.Message{Role: "user", Content: user},
			dsv4.Message{Role: "assistant", Content: content.String(), ReasoningContent: reasoning.String()})
		return content.String(), nil
	}

	if flags.NArg() > 0 {
		_, err := ask(prompt, stdout)
		return err
	}
	fmt.Fprintf(stderr, "chatting with %s (Ctrl-D to quit)\n", *modelDir)
	in := bufio.NewReaderSize(stdin, 64<<10)
	for {
		fmt.Fprint(stderr, "> ")
		text, err := readLine(in, maxLineBytes)
		if errors.Is(err, errLineTooLong) {
			fmt.Fprintln(stderr, "error:", err) // this turn only
			continue
		}
		if err != nil && text == "" {
			fmt.Fprintln(stderr)
			if err == io.EOF {
				return nil
			}
			return err
		}
		line := strings.TrimSpace(text)
		if line == "" {
			continue
		}
		if _, err := ask(line, stdout); err != nil {
			if errors.Is(err, context.Canceled) {
				return nil
			}
			fmt.Fprintln(stderr, "error:", err)
		}
	}
}

// maxLineBytes bounds one interactive input line (a pasted document fits).
const maxLineBytes = 16 << 20

var errLineTooLong = fmt.Errorf("input line longer than %d bytes, ignored", maxLineBytes)

// readLine reads one line (without its "\n" or "\r\n") of at most max
// bytes. A longer line is consumed to its end and reported as
// errLineTooLong, so the session goes on with the next line. At the end of
// input it returns the last unterminated line, if any, then io.EOF.
func readLine(r *bufio.Reader, max int) (string, error) {
	var buf []byte
	tooLong := false
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(chunk) > max+2 { // +2: the line ending
				tooLong, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err != nil && (tooLong || len(buf) == 0):
			if tooLong {
				return "", errLineTooLong
			}
			return "", err
		case tooLong:
			return "", errLineTooLong
		}
		line := strings.TrimSuffix(strings.TrimSuffix(string(buf), "\n"), "\r")
		if len(line) > max {
			return "", errLineTooLong
		}
		return line, nil // err is nil, or EOF after a last unterminated line
	}
}

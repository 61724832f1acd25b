// Command render prints the prompt a model sees for an OpenAI
// chat-completions request.
//
// Usage:
//
//	go run ./examples/render -model DIR [-thinking] [-reasoning-effort max] [-ids] < request.json
//
// The request body (JSON) is read from stdin; it is refused, as
// examples/server refuses it with a 400, when its messages are absent, null
// or empty (template.ParseChatRequest). The model directory's
// config.json picks the encoder: model_type deepseek_v4 uses the native
// DeepSeek-V4 encoder (deepseek_v32 the V3.2 one); any other model uses the
// chat_template of its tokenizer_config.json through Jinja. The prompt text
// is written exactly, with no trailing newline; with -ids, its token ids
// (tokenizer.json of the same directory, special tokens matched, no BOS
// added) are written as a JSON array instead.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/dsv4go/dsv4go/template"
	"github.com/dsv4go/dsv4go/tokenizer"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) { // -h: usage was printed
			return
		}
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	model := fs.String("model", "", "model directory (config.json, tokenizer_config.json, tokenizer.json)")
	thinking := fs.Bool("thinking", false, "thinking mode (overrides chat_template_kwargs.thinking)")
	effort := fs.String("reasoning-effort", "", "reasoning effort: high or max (overrides the request)")
	ids := fs.Bool("ids", false, "print token ids (JSON array) instead of text")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *model == "" {
		fs.Usage()
		return fmt.Errorf("-model is required")
	}
	body, err := io.ReadAll(io.LimitReader(stdin, template.MaxRequestBytes+1))
	if err != nil {
		return err
	}
	req, err := template.ParseChatRequest(body)
	if err != nil {
		return err
	}
	if *thinking {
		req.Thinking = true
		if req.TemplateKwargs == nil {
			req.TemplateKwargs = map[string]json.RawMessage{}
		}
		req.TemplateKwargs["thinking"] = json.RawMessage("true")
	}
	if *effort != "" {
		if req.ReasoningEffort, err = template.NormalizeReasoningEffort(*effort); err != nil {
			return err
		}
	}
	r, err := template.LoadRenderer(*model)
	if err != nil {
		return err
	}
	prompt, err := r.Render(context.Background(), req)
	if err != nil {
		return err
	}
	if !*ids {
		_, err = io.WriteString(stdout, prompt)
		return err
	}
	tok, err := tokenizer.Load(*model)
	if err != nil {
		return err
	}
	out, err := json.Marshal(tok.Encode(prompt, tokenizer.EncodeOptions{}))
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", out)
	return err
}

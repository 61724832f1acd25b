package template_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dsv4go/dsv4go/template"
)

func ExampleEncodeV4() {
	msgs := []template.Message{
		{Role: "system", Content: "You are helpful."},
		{Role: "user", Content: "Hi"},
		{Role: "assistant", ReasoningContent: "Greet back.", Content: "Hello!"},
		{Role: "user", Content: "2+2?"},
	}
	prompt, err := template.EncodeV4(msgs, &template.Options{Thinking: true})
	if err != nil {
		panic(err)
	}
	fmt.Println(prompt)
	// Output:
	// <｜begin▁of▁sentence｜>You are helpful.<｜User｜>Hi<｜Assistant｜></think>Hello!<｜end▁of▁sentence｜><｜User｜>2+2?<｜Assistant｜><think>
}

func ExampleParseChatRequest() {
	body := []byte(`{"model": "deepseek-v4", "messages": [{"role": "user", "content": "Weather in Paris?"}],
		"tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
		"chat_template_kwargs": {"thinking": false}}`)
	req, err := template.ParseChatRequest(body)
	if err != nil {
		panic(err)
	}
	prompt, err := (&template.V4Renderer{}).Render(context.Background(), req)
	if err != nil {
		panic(err)
	}
	// The tools went to an inserted system message.
	fmt.Println(req.EncoderMessages()[0].Role, len(req.EncoderMessages()[0].Tools))
	fmt.Println(prompt[strings.LastIndex(prompt, "\n")+1:])
	// Output:
	// system 1
	// <｜User｜>Weather in Paris?<｜Assistant｜></think>
}

func ExampleJinja_RenderChat() {
	j, err := template.ParseJinja(`{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}`+
		`{{ tools | tojson }}{% if add_generation_prompt %}<assistant>{% endif %}`, nil)
	if err != nil {
		panic(err)
	}
	out, err := j.RenderChat(context.Background(), &template.JinjaInput{
		Messages:            json.RawMessage(`[{"role": "user", "content": "a < b & c"}]`),
		Tools:               json.RawMessage(`[{"name": "f", "description": "é", "z": 1, "a": 2.0}]`),
		AddGenerationPrompt: true,
		SpecialTokens:       map[string]string{"bos_token": "<s>"},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(out)
	// Output:
	// <s><user>a < b & c[{"name": "f", "description": "é", "z": 1, "a": 2.0}]<assistant>
}

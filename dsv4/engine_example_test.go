package dsv4_test

import (
	"context"
	"fmt"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/models"
)

// Chat with the embedded tiny model: one answer, then a streamed one.
func ExampleEngine_Chat() {
	ctx := context.Background()
	dir, err := models.TinyDir() // the embedded dsv4-tiny, written once to the user cache
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := dsv4.Load(ctx, dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	eng, err := dsv4.NewEngine(m, dsv4.EngineOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close(ctx)

	greedy := 0.0
	req := &dsv4.ChatRequest{
		Messages:        []dsv4.Message{{Role: "user", Content: "What is 17*23? Number only."}},
		RequestSampling: dsv4.RequestSampling{Temperature: &greedy},
	}
	resp, err := eng.Chat(ctx, req)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(*resp.Choices[0].Message.Content, resp.Choices[0].FinishReason)

	// Thinking mode, streamed: reasoning_content first, then content.
	req.Messages[0].Content = "A train goes 60 km in 1.5 hours. Average speed? Answer briefly."
	req.ChatTemplateKwargs = map[string]any{"thinking": true}
	stream, err := eng.ChatStream(ctx, req)
	if err != nil {
		fmt.Println(err)
		return
	}
	var reasoning, content string
	for chunk, err := range stream {
		if err != nil {
			fmt.Println(err)
			return
		}
		reasoning += chunk.Delta.ReasoningContent
		content += chunk.Delta.Content
	}
	fmt.Println(reasoning)
	fmt.Println(content)
	// Output:
	// 391 stop
	// Average speed is distance divided by time: 60 km / 1.5 h = 40 km/h.
	// The average speed is 40 km/h.
}

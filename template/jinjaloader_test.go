package template

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// TestJinjaNoLoader: a chat template cannot load templates, itself included (jinja2 renders it
// from a string, with no loader). Before, {% include "/chat_template" %} and
// {% extends "/chat_template" %} recursed until a fatal stack overflow, and {% import %} /
// {% from %} rendered a copy of the template without budget or guards.
func TestJinjaNoLoader(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want error // from ParseJinja, else from the render
	}{
		{`a{% include "/chat_template" %}`, ErrRender},
		{`{% include "other.jinja" %}`, ErrRender},
		{`{% extends "/chat_template" %}`, ErrSyntax},
		{`{% import "/chat_template" as x %}{{ x }}`, ErrRender},
		{`{% macro m() %}{{ m() }}{% endmacro %}{% from "/chat_template" import m %}{{ m() }}`, ErrRender},
	} {
		j, err := ParseJinja(tc.src, &JinjaOptions{MaxSteps: 10_000, MaxDuration: time.Second})
		if err == nil {
			_, err = j.RenderChat(context.Background(), &JinjaInput{Messages: json.RawMessage(`[]`)})
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.src, err, tc.want)
		}
	}
}

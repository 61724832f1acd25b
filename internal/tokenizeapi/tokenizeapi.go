// Package tokenizeapi answers vLLM's POST /tokenize and POST /detokenize
// for a DeepSeek-V4 engine: request parsing and validation, the engine
// call, the engine-error mapping and the response body. examples/server
// and the disagg decode server both serve these endpoints through it, so
// they answer the same bytes for the same request.
package tokenizeapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/internal/openaierr"
	"github.com/dsv4go/dsv4go/internal/openaiwire"
)

// Engine is what the endpoints need of a dsv4.Engine (which satisfies it).
type Engine interface {
	// Tokenize returns the ids /v1/completions would prefill for text.
	Tokenize(text string) ([]int32, error)
	// Detokenize returns the text of ids as generation spells it.
	Detokenize(ids []int32) (string, error)
	// ChatPrompt returns the ids /v1/chat/completions would prefill for req.
	ChatPrompt(req *dsv4.ChatRequest) ([]int32, error)
	// TokenStrings returns the vocabulary strings of ids
	// (convert_ids_to_tokens), for return_token_strs.
	TokenStrings(ids []int32) ([]string, error)
}

// Endpoint names the endpoint an Outcome is reported for.
type Endpoint string

// The endpoints this package serves.
const (
	// Tokenize is POST /tokenize.
	Tokenize Endpoint = "tokenize"
	// Detokenize is POST /detokenize.
	Detokenize Endpoint = "detokenize"
)

// API serves /tokenize and /detokenize for one engine. Its fields are read
// only; set them before the first request.
type API struct {
	// Engine tokenizes and detokenizes.
	Engine Engine
	// Model is the served model name: a request's "model" must be empty,
	// Model or one of Aliases (404 model_not_found otherwise).
	Model string
	// Aliases are other accepted names for "model".
	Aliases []string
	// MaxModelLen is the served context length, reported as max_model_len.
	MaxModelLen int
	// MaxBodyBytes bounds a request body read by TokenizeHandler and
	// DetokenizeHandler (413 request_too_large beyond it); <= 0: 8 MiB.
	MaxBodyBytes int64
	// OnError, when set, is told of each request that failed: kind "400"
	// for a request refused before the engine call (err nil), "engine" for
	// an engine error (err the engine's error). It may count or log; the
	// answer is already written.
	OnError func(ep Endpoint, kind string, err error)
}

// TokenizeRequest is vLLM's TokenizeRequest: the completion form (prompt,
// add_special_tokens) or the chat form (messages and the chat fields that
// shape the prompt: tools, tool_choice, chat_template_kwargs,
// reasoning_effort, response_format, add_generation_prompt,
// continue_final_message; add_special_tokens). The embedded ChatRequest
// makes the chat form's ids those /v1/chat/completions prefills for the
// same body (dsv4.Engine.ChatPrompt), add_generation_prompt and
// continue_final_message included (their conflicts are the same 400s).
type TokenizeRequest struct {
	dsv4.ChatRequest
	// Prompt is the completion form's text.
	Prompt *string `json:"prompt"`
	// AddSpecialTokens is accepted with either value and changes nothing.
	AddSpecialTokens *bool `json:"add_special_tokens"`
	// ReturnTokenStrs true adds token_strs: each id's token string as
	// vLLM gives it (transformers' convert_ids_to_tokens: "Ġhello", not
	// " hello"; Engine.TokenStrings).
	ReturnTokenStrs *bool `json:"return_token_strs"`
}

// TokenizeResponse is vLLM's TokenizeResponse.
type TokenizeResponse struct {
	// Count is len(Tokens).
	Count int `json:"count"`
	// MaxModelLen is the served context length.
	MaxModelLen int `json:"max_model_len"`
	// Tokens are the ids (never null).
	Tokens []int32 `json:"tokens"`
	// TokenStrs are the tokens' strings with return_token_strs true, else
	// null (vLLM's default).
	TokenStrs []string `json:"token_strs"`
}

// DetokenizeRequest is vLLM's DetokenizeRequest.
type DetokenizeRequest struct {
	// Model is the optional model name.
	Model string `json:"model"`
	// Tokens are the ids to spell (required).
	Tokens *[]int32 `json:"tokens"`
}

// DetokenizeResponse is vLLM's DetokenizeResponse.
type DetokenizeResponse struct {
	// Prompt is the text of the tokens.
	Prompt string `json:"prompt"`
}

func (a *API) fail(ep Endpoint, kind string, err error) {
	if a.OnError != nil {
		a.OnError(ep, kind, err)
	}
}

func badParam(w http.ResponseWriter, param, msg string) {
	(&openaierr.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: msg}).Write(w)
}

// decode reads body into v and checks its model, writing the error itself.
func (a *API) decode(w http.ResponseWriter, body []byte, v any, model func() string) bool {
	if e := openaierr.Decode(body, v); e != nil {
		e.Write(w)
		return false
	}
	if m := model(); m != "" && m != a.Model && !slices.Contains(a.Aliases, m) {
		openaierr.ModelNotFound(m, a.Model).Write(w)
		return false
	}
	return true
}

// ServeTokenize answers a POST /tokenize whose body has been read. The ids
// are the ones generation would prefill: for a prompt, those of
// /v1/completions (Engine.Tokenize); for messages, those of
// /v1/chat/completions (Engine.ChatPrompt). add_special_tokens is accepted
// with either value and changes nothing: the engine adds no BOS or EOS
// around a prompt or a rendered chat (the chat encoding writes its own
// BOS; DeepSeek-V4's tokenizer_config sets add_bos_token false, so vLLM's
// ids agree).
func (a *API) ServeTokenize(w http.ResponseWriter, body []byte) {
	var req TokenizeRequest
	if !a.decode(w, body, &req, func() string { return req.Model }) {
		a.fail(Tokenize, "400", nil)
		return
	}
	fail := func(param, msg string) {
		a.fail(Tokenize, "400", nil)
		badParam(w, param, msg)
	}
	var ids []int32
	var err error
	switch {
	case req.Messages != nil && req.Prompt != nil:
		fail("messages", "set either prompt or messages, not both")
		return
	case req.Prompt != nil:
		ids, err = a.Engine.Tokenize(*req.Prompt)
	case req.Messages != nil:
		ids, err = a.Engine.ChatPrompt(&req.ChatRequest)
	default:
		fail("prompt", "either prompt (a string) or messages is required")
		return
	}
	if err != nil {
		a.fail(Tokenize, "engine", err)
		openaierr.FromEngine(err).Write(w)
		return
	}
	if ids == nil {
		ids = []int32{}
	}
	var strs []string
	if req.ReturnTokenStrs != nil && *req.ReturnTokenStrs {
		if strs, err = a.Engine.TokenStrings(ids); err != nil {
			a.fail(Tokenize, "engine", err)
			openaierr.FromEngine(err).Write(w)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = openaiwire.WriteJSON(w, TokenizeResponse{Count: len(ids), MaxModelLen: a.MaxModelLen, Tokens: ids, TokenStrs: strs})
}

// ServeDetokenize answers a POST /detokenize whose body has been read:
// {"tokens": [ids]} -> {"prompt": text}, the text as generation spells it
// (special tokens kept). An id outside the vocabulary is a 400 with param
// "tokens".
func (a *API) ServeDetokenize(w http.ResponseWriter, body []byte) {
	var req DetokenizeRequest
	if !a.decode(w, body, &req, func() string { return req.Model }) {
		a.fail(Detokenize, "400", nil)
		return
	}
	if req.Tokens == nil {
		a.fail(Detokenize, "400", nil)
		badParam(w, "tokens", "tokens (an array of token ids) is required")
		return
	}
	text, err := a.Engine.Detokenize(*req.Tokens)
	if err != nil {
		a.fail(Detokenize, "engine", err)
		openaierr.FromEngine(err).Write(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = openaiwire.WriteJSON(w, DetokenizeResponse{Prompt: text})
}

// TokenizeHandler is POST /tokenize with the body read by ReadBody.
func (a *API) TokenizeHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if body, ok := a.ReadBody(w, r); ok {
			a.ServeTokenize(w, body)
		}
	})
}

// DetokenizeHandler is POST /detokenize with the body read by ReadBody.
func (a *API) DetokenizeHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if body, ok := a.ReadBody(w, r); ok {
			a.ServeDetokenize(w, body)
		}
	})
}

// ReadBody reads a POST body within MaxBodyBytes, writing the error itself
// (ok false): 405 method_not_allowed (Allow: POST) for another method, 413
// request_too_large over the limit, 400 for a failed read.
func (a *API) ReadBody(w http.ResponseWriter, r *http.Request) (body []byte, ok bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		(&openaierr.Error{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Code: "method_not_allowed", Message: "use POST"}).Write(w)
		return nil, false
	}
	limit := a.MaxBodyBytes
	if limit <= 0 {
		limit = 8 << 20
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			(&openaierr.Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
				Message: fmt.Sprintf("request body over %d bytes", limit)}).Write(w)
			return nil, false
		}
		(&openaierr.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: "reading body: " + err.Error()}).Write(w)
		return nil, false
	}
	return body, true
}

package main

import (
	"encoding/json"
	"net/http"
	"runtime/debug"
	"sync"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/internal/openaierr"
)

// tokenizeRequest is vLLM's TokenizeRequest: the completion form
// (prompt, add_special_tokens) or the chat form (messages and the chat
// fields that shape the prompt: tools, tool_choice, chat_template_kwargs,
// reasoning_effort, response_format, add_generation_prompt,
// continue_final_message; add_special_tokens). The embedded ChatRequest
// makes the chat form's ids those /v1/chat/completions prefills for the
// same body (dsv4.Engine.ChatPrompt), add_generation_prompt and
// continue_final_message included (their conflicts are the same 400s).
type tokenizeRequest struct {
	dsv4.ChatRequest
	Prompt           *string `json:"prompt"`
	AddSpecialTokens *bool   `json:"add_special_tokens"`
	ReturnTokenStrs  *bool   `json:"return_token_strs"`
}

// tokenizeResponse is vLLM's TokenizeResponse.
type tokenizeResponse struct {
	Count       int      `json:"count"`
	MaxModelLen int      `json:"max_model_len"`
	Tokens      []int32  `json:"tokens"`
	TokenStrs   []string `json:"token_strs"` // always null (return_token_strs is refused)
}

func badParam(w http.ResponseWriter, param, msg string) {
	writeError(w, http.StatusBadRequest, "invalid_request_error", param, "", msg)
}

// tokenize answers POST /tokenize (vLLM's shape). The ids are the ones
// generation would prefill: for a prompt, those of /v1/completions
// (dsv4.Engine.Tokenize); for messages, those of /v1/chat/completions
// (dsv4.Engine.ChatPrompt). add_special_tokens is accepted with either
// value and changes nothing: the engine adds no BOS or EOS around a prompt
// or a rendered chat (the chat encoding writes its own BOS; DeepSeek-V4's
// tokenizer_config sets add_bos_token false, so vLLM's ids agree).
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request, body []byte) {
	var req tokenizeRequest
	if !decodeJSON(w, body, &req) || !s.checkModel(w, req.Model) {
		s.m.errors.WithLabelValues("tokenize", "400").Inc()
		return
	}
	fail := func(param, msg string) {
		s.m.errors.WithLabelValues("tokenize", "400").Inc()
		badParam(w, param, msg)
	}
	if req.ReturnTokenStrs != nil && *req.ReturnTokenStrs {
		fail("return_token_strs", "return_token_strs is not supported: token_strs is always null")
		return
	}
	var ids []int32
	var err error
	switch {
	case req.Messages != nil && req.Prompt != nil:
		fail("messages", "set either prompt or messages, not both")
		return
	case req.Prompt != nil:
		ids, err = s.eng.Tokenize(*req.Prompt)
	case req.Messages != nil:
		ids, err = s.eng.ChatPrompt(&req.ChatRequest)
	default:
		fail("prompt", "either prompt (a string) or messages is required")
		return
	}
	if err != nil {
		s.m.errors.WithLabelValues("tokenize", "engine").Inc()
		s.writeEngineError(w, err)
		return
	}
	if ids == nil {
		ids = []int32{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(tokenizeResponse{Count: len(ids), MaxModelLen: s.eng.MaxContext(), Tokens: ids})
}

// detokenizeRequest is vLLM's DetokenizeRequest.
type detokenizeRequest struct {
	Model  string   `json:"model"`
	Tokens *[]int32 `json:"tokens"`
}

// detokenize answers POST /detokenize: {"tokens": [ids]} -> {"prompt":
// text}, the text as generation spells it (special tokens kept). An id
// outside the vocabulary is a 400 with param "tokens".
func (s *Server) detokenize(w http.ResponseWriter, r *http.Request, body []byte) {
	var req detokenizeRequest
	if !decodeJSON(w, body, &req) || !s.checkModel(w, req.Model) {
		s.m.errors.WithLabelValues("detokenize", "400").Inc()
		return
	}
	if req.Tokens == nil {
		s.m.errors.WithLabelValues("detokenize", "400").Inc()
		badParam(w, "tokens", "tokens (an array of token ids) is required")
		return
	}
	text, err := s.eng.Detokenize(*req.Tokens)
	if err != nil {
		s.m.errors.WithLabelValues("detokenize", "engine").Inc()
		s.writeEngineError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"prompt": text})
}

// modelObject is the served model's entry of /v1/models.
func (s *Server) modelObject() map[string]any {
	return map[string]any{
		"id": s.modelName, "object": "model", "created": s.created, "owned_by": "dsv4go",
		"root": s.modelName, "max_model_len": s.eng.MaxContext(),
	}
}

// model answers GET /v1/models/{id}: the served model's object for its
// name or an alias, else 404 model_not_found.
func (s *Server) model(w http.ResponseWriter, r *http.Request) {
	if !getOnly(w, r) {
		return
	}
	id := r.PathValue("id")
	if id != s.modelName && !s.aliases[id] {
		openaierr.ModelNotFound(id, s.modelName).Write(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s.modelObject())
}

// getOnly answers a method other than GET with 405 (false).
func getOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet {
		return true
	}
	w.Header().Set("Allow", http.MethodGet)
	writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "", "method_not_allowed", "use GET")
	return false
}

// serverVersion is what GET /version reports: the main module's version from
// the build information (a tagged version for `go install …@vX`, a VCS
// pseudo-version for a build in a checkout), else "devel".
var serverVersion = sync.OnceValue(func() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
})

func (s *Server) version(w http.ResponseWriter, r *http.Request) {
	if !getOnly(w, r) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"version": serverVersion()})
}

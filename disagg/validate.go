package disagg

import (
	"fmt"

	"github.com/dsv4go/dsv4go/dsv4"
)

// contextLength returns the served context length: n tokens, or the model's
// max_position_embeddings when n is 0, negative or larger.
func contextLength(m *dsv4.Model, n int) int {
	if mx := m.Config().MaxPositionEmbeddings; n <= 0 || n > mx {
		return mx
	}
	return n
}

// checkRequest runs the admission checks that dsv4.Engine would run later
// (sampling parameters, empty prompt, token ids, prompt length and, when the
// request sets it, prompt + max_tokens against ctxLen tokens) so that both
// sides of a PD pair refuse an invalid request before a room is opened,
// fetched or waited for. Errors wrap dsv4.ErrInvalidParams (or are a
// *dsv4.ParamError) or dsv4.ErrContextLength: HTTP 400 either way.
// prompt_logprobs is refused (a *dsv4.ParamError naming it): the decode
// side, which answers, never prefills the prompt (a decode server without
// a bootstrap room serves it, as examples/server does).
func checkRequest(prompt []int32, sp dsv4.SamplingParams, vocab, ctxLen int) error {
	if err := sp.Validate(vocab); err != nil {
		return err
	}
	if sp.PromptLogprobs != nil {
		return &dsv4.ParamError{Param: "prompt_logprobs", Msg: "not supported with prefill/decode disaggregation"}
	}
	if len(prompt) == 0 {
		return fmt.Errorf("%w: empty prompt", dsv4.ErrInvalidParams)
	}
	for _, t := range prompt {
		if t < 0 || int(t) >= vocab {
			return fmt.Errorf("%w: prompt token id %d out of range [0, %d)", dsv4.ErrInvalidParams, t, vocab)
		}
	}
	if len(prompt) >= ctxLen {
		return &dsv4.ContextLengthError{PromptTokens: len(prompt), Context: ctxLen}
	}
	if sp.MaxTokens > 0 && len(prompt)+sp.MaxTokens > ctxLen {
		return &dsv4.ContextLengthError{PromptTokens: len(prompt), MaxTokens: sp.MaxTokens, Context: ctxLen}
	}
	return nil
}

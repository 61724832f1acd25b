package main

import (
	"net/http"
	"runtime/debug"
	"sync"

	"github.com/dsv4go/dsv4go/internal/openaierr"
	"github.com/dsv4go/dsv4go/internal/openaiwire"
	"github.com/dsv4go/dsv4go/internal/tokenizeapi"
)

// tokenizeAPI is the shared /tokenize and /detokenize logic
// (internal/tokenizeapi, which the disagg decode server uses too) for this
// server's engine, names and body limit; its errors count in
// dsv4_request_errors_total by endpoint and cause ("400", "engine"), and an engine
// error answered 500 is logged.
func (s *Server) tokenizeAPI() *tokenizeapi.API {
	aliases := make([]string, 0, len(s.aliases))
	for a := range s.aliases {
		aliases = append(aliases, a)
	}
	return &tokenizeapi.API{
		Engine: s.eng, Model: s.modelName, Aliases: aliases,
		MaxModelLen: s.eng.MaxContext(), MaxBodyBytes: s.maxBodyBytes,
		OnError: func(ep tokenizeapi.Endpoint, kind string, err error) {
			s.m.errors.WithLabelValues(string(ep), kind).Inc()
			if err != nil && openaierr.FromEngine(err).Status == http.StatusInternalServerError {
				s.log.Error("request failed", "err", err)
			}
		},
	}
}

// tokenize answers POST /tokenize (vLLM's shape; tokenizeapi.API.ServeTokenize).
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request, body []byte) {
	s.tok.ServeTokenize(w, body)
}

// detokenize answers POST /detokenize (tokenizeapi.API.ServeDetokenize).
func (s *Server) detokenize(w http.ResponseWriter, r *http.Request, body []byte) {
	s.tok.ServeDetokenize(w, body)
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
	_ = openaiwire.WriteJSON(w, s.modelObject())
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
	_ = openaiwire.WriteJSON(w, map[string]string{"version": serverVersion()})
}

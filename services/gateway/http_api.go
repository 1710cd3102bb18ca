package gateway

import (
	"net/http"
	"strconv"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// HTTP/JSON handlers: authenticate, decode, validate with the gRPC edge
// rules, and call the same code as the gRPC methods (see serveJSON).

func (s *Server) httpStartRun(w http.ResponseWriter, r *http.Request) {
	if v := r.URL.Query().Get("stream"); v != "" {
		stream, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, fieldError("stream", "must be true or false"))
			return
		}
		if stream {
			s.httpStartRunStream(w, r)
			return
		}
	}
	req := &baagentv1.StartRunRequest{}
	s.serveJSON(w, r, req, func() error { return validateStartRun(req) }, func(c caller) (any, error) {
		return s.startRun(withKeyID(r.Context(), c), c.tenant, req)
	})
}

func (s *Server) httpGetRun(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GetRunRequest{RunId: r.PathValue("run_id")}
	s.serveJSON(w, r, nil, func() error { return validateGetRun(req) }, func(c caller) (any, error) {
		return s.getRun(r.Context(), c.tenant, req)
	})
}

func (s *Server) httpListRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := &baagentv1.ListRunsRequest{ConversationId: q.Get("conversation_id"), PageToken: q.Get("page_token")}
	if v := q.Get("page_size"); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			writeError(w, fieldError("page_size", "must be an integer"))
			return
		}
		req.PageSize = int32(n)
	}
	for i, v := range q["states"] {
		st, ok := runState(v)
		if !ok {
			writeError(w, fieldError("states["+strconv.Itoa(i)+"]", "unknown run state "+strconv.Quote(v)))
			return
		}
		req.States = append(req.States, st)
	}
	s.serveJSON(w, r, nil, func() error { return validateListRuns(req) }, func(c caller) (any, error) {
		return s.listRuns(r.Context(), c.tenant, req)
	})
}

func (s *Server) httpCancelRun(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.CancelRunRequest{}
	s.serveJSON(w, r, req, func() error {
		req.RunId = r.PathValue("run_id")
		return validateCancelRun(req)
	}, func(c caller) (any, error) {
		return s.cancelRun(r.Context(), c.tenant, req)
	})
}

func (s *Server) httpSubmitInput(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.SubmitInputRequest{}
	s.serveJSON(w, r, req, func() error {
		req.RunId = r.PathValue("run_id")
		return validateSubmitInput(req)
	}, func(c caller) (any, error) {
		return s.submitInput(r.Context(), c.tenant, req)
	})
}

func (s *Server) httpListSkills(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := &baagentv1.GatewayServiceListSkillsRequest{Project: q.Get("project"), IncludeInvalid: q.Get("include_invalid") == "true"}
	s.serveJSON(w, r, nil, func() error {
		scope, ok := skillScopeFilter(q.Get("scope"))
		if !ok {
			return fieldError("scope", "unknown scope "+strconv.Quote(q.Get("scope"))+": want system, tenant, project or all (empty: the effective skills)")
		}
		req.Scope = scope
		return validateListSkills(req)
	}, func(c caller) (any, error) {
		return s.listSkills(r.Context(), c.tenant, req)
	})
}

func (s *Server) httpListTools(w http.ResponseWriter, r *http.Request) {
	s.serveJSON(w, r, nil, nil, func(c caller) (any, error) {
		return s.listTools(r.Context(), c.tenant)
	})
}

func (s *Server) httpCountTokens(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GatewayServiceCountTokensRequest{}
	s.serveJSON(w, r, req, func() error { return s.validateCountTokens(req) }, func(caller) (any, error) {
		return s.countTokens(r.Context(), req)
	})
}

// streamToken is the body of POST /v1/auth/stream-token.
type streamToken struct {
	Token     string    `json:"token"`
	Tenant    string    `json:"tenant"`
	ExpiresAt time.Time `json:"expires_at"`
}

// httpStreamToken gives an authenticated caller a short-lived token for
// ?token= on the event streams, for browsers (EventSource and WebSocket
// cannot send headers).
func (s *Server) httpStreamToken(w http.ResponseWriter, r *http.Request) {
	s.serveJSON(w, r, nil, nil, func(c caller) (any, error) {
		tok, exp := s.auth.issue(c)
		return streamToken{Token: tok, Tenant: c.tenant, ExpiresAt: exp.UTC()}, nil
	})
}

// whoAmI is the body of GET /v1/whoami.
type whoAmI struct {
	Tenant string `json:"tenant"`
	// KeysRequired is false when no API keys are configured (loopback,
	// tenant default).
	KeysRequired bool `json:"keys_required"`
	// TraceLinkTemplate is the tracing UI's URL of a trace, with
	// {trace_id} (omitted when none is configured).
	TraceLinkTemplate string `json:"trace_link_template,omitempty"`
}

func (s *Server) httpWhoAmI(w http.ResponseWriter, r *http.Request) {
	s.serveJSON(w, r, nil, nil, func(c caller) (any, error) {
		return whoAmI{Tenant: c.tenant, KeysRequired: !s.auth.open(), TraceLinkTemplate: s.opts.TraceLinkTemplate}, nil
	})
}

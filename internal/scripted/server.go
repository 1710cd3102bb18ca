// Package scripted is the scripted model: an OpenAI-compatible
// chat-completions server (streaming and not, tool calls) that replays
// scenario files instead of running a language model. It is the offline
// default of `-target=all` when no model endpoint is configured, and what
// tests and benchmarks talk to. It always calls itself `scripted`.
//
// The server keeps no state between requests: each request's messages say
// which scenario applies (the latest user request) and which turn comes
// next (the assistant messages since that request), so any number of
// conversations can run at once. The scenario format is documented in
// examples/scenarios/README.md.
//
// Requests for the memory service's structured outputs (response_format
// json_schema memory_extraction, memory_reflexion, memory_community) are
// answered from the directory's gazetteer file instead (memory.go).
package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/baagent/baagent/internal/metrics"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	openai "github.com/sashabaranov/go-openai"
)

// ModelName is the only model the server serves, and the model every
// response names.
const ModelName = "scripted"

// Defaults of Options.
const (
	DefaultChunkBytes      = 64
	DefaultMaxRequestBytes = 32 << 20
	shutdownTimeout        = 5 * time.Second
)

// Options configures a Server.
type Options struct {
	// Dir holds the scenario files (*.yaml, *.yml, *.json). Required.
	Dir string
	// Logger receives one line per request at debug level and problems at
	// warn; nil discards them.
	Logger *slog.Logger
	// Counter counts usage tokens; nil counts approximately (bytes/4) and
	// labels responses so. See usageCounter.
	Counter TokenCounter
	// ChunkBytes is the largest text fragment of one streamed chunk.
	ChunkBytes int
	// MaxRequestBytes bounds a request body.
	MaxRequestBytes int64
	// Registerer receives baagent_scripted_requests_total; nil = none.
	Registerer prometheus.Registerer
}

// Server is the scripted model. It is immutable after New and safe for
// concurrent use.
type Server struct {
	opts      Options
	log       *slog.Logger
	scenarios []*Scenario
	gazetteer *Gazetteer
	usage     usageCounter
	requests  *prometheus.CounterVec
	handler   http.Handler
}

// New loads and validates every scenario in opts.Dir.
func New(opts Options) (*Server, error) {
	if opts.Dir == "" {
		return nil, errors.New("scripted: Options.Dir (scenarios-dir) is required")
	}
	if opts.ChunkBytes <= 0 {
		opts.ChunkBytes = DefaultChunkBytes
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = DefaultMaxRequestBytes
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	scenarios, gazetteer, err := loadFiles(opts.Dir)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: log.With("component", "scripted-model"), scenarios: scenarios, gazetteer: gazetteer, usage: usageCounter{counter: opts.Counter, cache: newCountCache()}}
	if opts.Registerer != nil {
		s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baagent_scripted_requests_total",
			Help: "Requests answered by the scripted model, by scenario (or fallback, end_of_script, bad_request).",
		}, []string{"scenario"})
		requests, err := metrics.RegisterShared(opts.Registerer, s.requests)
		if err != nil {
			return nil, fmt.Errorf("scripted: %w", err)
		}
		s.requests = requests
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.chatCompletions)
	mux.HandleFunc("GET /v1/models", s.listModels)
	mux.HandleFunc("GET /v1/models/{model}", s.getModel)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "", fmt.Sprintf("the scripted model serves /v1/chat/completions and /v1/models, not %s %s", r.Method, r.URL.Path))
	})
	s.handler = mux
	s.log.Info("scripted model ready", "scenarios", len(scenarios), "dir", opts.Dir, "usage", s.usage.label())
	return s, nil
}

// Gazetteer is the memory-extraction gazetteer, nil when the directory has
// none.
func (s *Server) Gazetteer() *Gazetteer { return s.gazetteer }

// Scenarios lists the loaded scenarios in matching order.
func (s *Server) Scenarios() []*Scenario { return append([]*Scenario(nil), s.scenarios...) }

// Handler serves the OpenAI-compatible API under /v1.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve serves on lis until ctx ends, then shuts down gracefully (open
// streams get shutdownTimeout to finish). It returns nil after a shutdown
// caused by ctx.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	hs := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// StartLoopback listens on a free 127.0.0.1 port and serves until ctx
// ends. It returns the base URL to give a client ("http://127.0.0.1:PORT/v1")
// and a channel that receives Serve's result once it has stopped.
func (s *Server) StartLoopback(ctx context.Context) (baseURL string, done <-chan error, err error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("scripted: listen: %w", err)
	}
	ch := make(chan error, 1)
	go func() { ch <- s.Serve(ctx, lis) }()
	return "http://" + lis.Addr().String() + "/v1", ch, nil
}

func (s *Server) listModels(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{modelObject()}})
}

func (s *Server) getModel(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("model") != ModelName {
		writeError(w, http.StatusNotFound, "invalid_request_error", "model_not_found", fmt.Sprintf("the model %q does not exist; the scripted model serves only %q", r.PathValue("model"), ModelName))
		return
	}
	writeJSON(w, http.StatusOK, modelObject())
}

func modelObject() map[string]any {
	return map[string]any{"id": ModelName, "object": "model", "created": 0, "owned_by": "baagent"}
}

func (s *Server) count(label string) {
	if s.requests != nil {
		s.requests.WithLabelValues(label).Inc()
	}
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxRequestBytes))
	if err != nil {
		s.count("bad_request")
		writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "", fmt.Sprintf("reading the request body: %v", err))
		return
	}
	var req openai.ChatCompletionRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.count("bad_request")
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", fmt.Sprintf("the body is not a chat completion request: %v", err))
		return
	}
	var rep *reply
	if schema := memorySchema(req.ResponseFormat); schema != "" {
		rep, err = s.answerMemory(schema, &req)
	} else {
		rep, err = s.answer(req.Messages)
	}
	if err != nil {
		s.count("bad_request")
		var re *requestError
		if errors.As(err, &re) {
			writeErrorParam(w, http.StatusBadRequest, re.param, re.msg)
			return
		}
		writeError(w, http.StatusInternalServerError, "server_error", "", err.Error())
		return
	}
	s.count(rep.label)
	prompt := s.usage.prompt(req.Messages, req.Tools)
	completion := s.usage.completion(rep)
	u := wireUsage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
	if !s.usage.exact() {
		w.Header().Set("X-Scripted-Usage", "approximate")
	}
	w.Header().Set("X-Scripted-Scenario", rep.label)
	s.log.DebugContext(r.Context(), "scripted answer", "scenario", rep.label, "turn", rep.turn, "tool_calls", len(rep.calls), "stream", req.Stream)
	id := completionID(rep)
	if req.Stream {
		includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
		s.stream(r.Context(), w, id, rep, u, includeUsage)
		return
	}
	writeJSON(w, http.StatusOK, completionResponse(id, rep, u))
}

// answer decides the reply to a conversation.
func (s *Server) answer(msgs []openai.ChatCompletionMessage) (*reply, error) {
	c, err := analyze(msgs)
	if err != nil {
		return nil, err
	}
	if c.anchor < 0 {
		return &reply{label: "fallback", text: "I am the scripted model (no language model is configured) and this conversation has no user request to answer."}, nil
	}
	sc := s.match(c.userRequest)
	if sc == nil {
		return s.fallback(c), nil
	}
	return playTurn(sc, c), nil
}

// match finds the scenario for a request: any exact match first, then the
// contains and regex matchers in priority order.
func (s *Server) match(request string) *Scenario {
	norm := normalize(request)
	for _, sc := range s.scenarios {
		for _, e := range sc.exact {
			if e == norm {
				return sc
			}
		}
	}
	lower := strings.ToLower(request)
	for _, sc := range s.scenarios {
		if len(sc.contains) > 0 {
			all := true
			for _, c := range sc.contains {
				if !strings.Contains(lower, c) {
					all = false
					break
				}
			}
			if all {
				return sc
			}
		}
		if sc.regex != nil && sc.regex.MatchString(request) {
			return sc
		}
	}
	return nil
}

func (s *Server) fallback(c *conversation) *reply {
	var b strings.Builder
	fmt.Fprintf(&b, "I am the scripted model: no language model is configured (-model-base-url is empty), so I can only replay the scenarios in %s, and none of them matches your request %q.", s.opts.Dir, truncate(200, c.userRequest))
	var examples []string
	for _, sc := range s.scenarios {
		if sc.Example != "" {
			examples = append(examples, sc.Example)
		}
	}
	if len(examples) > 0 {
		b.WriteString("\n\nRequests I can answer:")
		for _, e := range examples {
			b.WriteString("\n- ")
			b.WriteString(e)
		}
	}
	b.WriteString("\n\nTo use a real model, set -model-base-url (and BAAGENT_MODEL_API_KEY) to an OpenAI-compatible endpoint.")
	return &reply{label: "fallback", text: b.String()}
}

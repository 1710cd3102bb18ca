package contextsvc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
	"github.com/baagent/baagent/services/tokens"
)

// The tokens service is real (loading its vocabularies takes about a
// second), started once for the package's tests and served over loopback.
var (
	tokensOnce sync.Once
	tokensSrv  *tokens.Server
	tokensErr  error
)

// testEncoders adds a summarizer model with a small window, to exercise
// chunked summarization, to the built-in registry.
const testEncoders = `encoders:
  tiny-*:
    model_family: gpt
    encoding_name: o200k_base
    safety_margin: 1.0
models:
  tiny-summarizer:
    context_length: 3000
    max_output_tokens: 1000
  test-8k:
    context_length: 8000
    max_output_tokens: 1000
`

func tokensClient(tb testing.TB) baagentv1.TokensServiceClient {
	tb.Helper()
	tokensOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ctxtokens")
		if err != nil {
			tokensErr = err
			return
		}
		f := filepath.Join(dir, "token_encoders.yaml")
		if tokensErr = os.WriteFile(f, []byte(testEncoders), 0o600); tokensErr != nil {
			return
		}
		tokensSrv, tokensErr = tokens.New(tokens.Options{EncodersFile: f})
	})
	if tokensErr != nil {
		tb.Fatalf("tokens service: %v", tokensErr)
	}
	return baagentv1.NewTokensServiceClient(vt.Serve(tb, func(gs grpc.ServiceRegistrar) { tokensSrv.Register(gs) }))
}

// natsEnv is an embedded NATS with the streams provisioned.
type natsEnv struct {
	srv *natsx.EmbeddedServer
	nc  *nats.Conn
	js  jetstream.JetStream
}

func startNATS(tb testing.TB, dir string) *natsEnv {
	tb.Helper()
	srv, err := natsx.StartEmbedded(natsx.EmbeddedOptions{Port: -1, StoreDir: dir})
	if err != nil {
		tb.Fatalf("embedded NATS: %v", err)
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		srv.Shutdown()
		tb.Fatalf("connect: %v", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := natsx.Provision(ctx, js, natsx.ProvisionConfig{}); err != nil {
		tb.Fatalf("provision: %v", err)
	}
	return &natsEnv{srv: srv, nc: nc, js: js}
}

func (n *natsEnv) stop() {
	n.nc.Close()
	n.srv.Shutdown()
}

// env is a context service over loopback with real dependencies.
type env struct {
	nats   *natsEnv
	srv    *Server
	client baagentv1.ContextServiceClient
	tokens baagentv1.TokensServiceClient
}

func newEnv(tb testing.TB, opts Options) *env {
	tb.Helper()
	n := startNATS(tb, tb.TempDir())
	tb.Cleanup(n.stop)
	return newEnvOn(tb, n, opts)
}

// newEnvOn starts a context server on an existing NATS; its Run loop runs
// until the test ends.
func newEnvOn(tb testing.TB, n *natsEnv, opts Options) *env {
	tb.Helper()
	tc := tokensClient(tb)
	opts.JetStream = n.js
	opts.Tokens = tc
	if opts.Logger == nil {
		opts.Logger = discardLogger()
	}
	srv := New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Run(ctx)
	}()
	tb.Cleanup(func() {
		cancel()
		<-done
	})
	if opts.Summarizer != nil {
		waitFor(tb, "summary workers", func() bool { return srv.summaries.available() })
	}
	conn := vt.Serve(tb, func(gs grpc.ServiceRegistrar) { srv.Register(gs) })
	return &env{nats: n, srv: srv, client: baagentv1.NewContextServiceClient(conn), tokens: tc}
}

// waitFor polls cond until it holds or 20 s pass.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fakeOpenAI is an httptest server speaking the OpenAI chat completions
// format: it answers with a summary naming the prompt's size, or fails.
type fakeOpenAI struct {
	*httptest.Server
	calls    atomic.Int64
	fail     atomic.Bool
	maxChars atomic.Int64 // longest prompt seen
	mu       sync.Mutex
	prompts  []string
}

func newFakeOpenAI(tb testing.TB) *fakeOpenAI {
	f := &fakeOpenAI{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		f.calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Model     string `json:"model"`
			MaxTokens int    `json:"max_tokens"`
			Messages  []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) != 2 || req.MaxTokens <= 0 {
			http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, http.StatusBadRequest)
			return
		}
		if f.fail.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":{"message":"model overloaded","type":"server_error"}}`)
			return
		}
		p := req.Messages[1].Content
		f.mu.Lock()
		f.prompts = append(f.prompts, p)
		f.mu.Unlock()
		if int64(len(p)) > f.maxChars.Load() {
			f.maxChars.Store(int64(len(p)))
		}
		kind := "excerpt"
		if strings.Contains(p, "<summaries>") {
			kind = "merge"
		}
		resp := map[string]any{
			"id": "chatcmpl-test", "object": "chat.completion", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": fmt.Sprintf("SUMMARY(%s, %d chars)", kind, len(p))}}},
			"usage": map[string]any{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	}))
	tb.Cleanup(f.Close)
	return f
}

func (f *fakeOpenAI) summarizer(tb testing.TB) Summarizer {
	s, err := NewOpenAISummarizer(OpenAISummarizerOptions{BaseURL: f.URL + "/v1", APIKey: "test"})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

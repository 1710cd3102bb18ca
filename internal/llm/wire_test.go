package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// reply is one scripted HTTP answer of the fake endpoint.
type reply struct {
	status  int
	header  map[string]string
	lines   []string // written one by one, each flushed: SSE lines, or a JSON body
	block   bool     // after the lines, wait until the client goes away
	hangup  bool     // after the lines, cut the connection without ending the body
	stalled bool     // send nothing, wait until the client goes away
}

// fakeEndpoint replays replies in order and records the requests.
type fakeEndpoint struct {
	t       *testing.T
	mu      sync.Mutex
	replies []reply
	bodies  []map[string]any
	headers []http.Header
	gone    chan struct{} // closed when a blocked handler saw the client leave
}

func newFakeEndpoint(t *testing.T, replies ...reply) (*fakeEndpoint, *httptest.Server) {
	f := &fakeEndpoint{t: t, replies: replies, gone: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeEndpoint) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bodies)
}

func (f *fakeEndpoint) body(i int) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[i]
}

func (f *fakeEndpoint) serve(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	n := len(f.bodies)
	f.bodies = append(f.bodies, body)
	f.headers = append(f.headers, r.Header.Clone())
	if n >= len(f.replies) {
		f.mu.Unlock()
		http.Error(w, "no more scripted replies", http.StatusTeapot)
		return
	}
	rep := f.replies[n]
	f.mu.Unlock()

	if rep.stalled {
		<-r.Context().Done()
		close(f.gone)
		return
	}
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	if rep.status == 0 {
		rep.status = http.StatusOK
	}
	if rep.status == http.StatusOK && strings.HasPrefix(strings.Join(rep.lines, ""), "data:") {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(rep.status)
	fl := w.(http.Flusher)
	for _, l := range rep.lines {
		_, _ = io.WriteString(w, l)
		fl.Flush()
	}
	switch {
	case rep.block:
		<-r.Context().Done()
		close(f.gone)
	case rep.hangup:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}
}

// sse renders chunks in the OpenAI wire format: one `data:` line per chunk,
// a blank line after each, then `data: [DONE]`.
func sse(chunks ...string) []string {
	var out []string
	for _, c := range chunks {
		out = append(out, "data: "+c+"\n\n")
	}
	return append(out, "data: [DONE]\n\n")
}

// chunk builds a chat.completion.chunk as OpenAI sends it.
func chunk(delta string, finish string) string {
	fin := "null"
	if finish != "" {
		fin = fmt.Sprintf("%q", finish)
	}
	return fmt.Sprintf(`{"id":"chatcmpl-9xQ","object":"chat.completion.chunk","created":1727712000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_5f20662549","choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}],"usage":null}`, delta, fin)
}

func usageChunk(prompt, completion int) string {
	return fmt.Sprintf(`{"id":"chatcmpl-9xQ","object":"chat.completion.chunk","created":1727712000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_5f20662549","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":64,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`, prompt, completion, prompt+completion)
}

// testClient builds a client for srv whose sleeps are recorded, not slept.
func testClient(t *testing.T, srv *httptest.Server, mod func(*Config)) (*Client, *[]time.Duration) {
	t.Helper()
	cfg := Config{BaseURL: srv.URL + "/v1", APIKey: "sk-test", Model: "gpt-4o"}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	slept := &[]time.Duration{}
	c.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		*slept = append(*slept, d)
		mu.Unlock()
		return ctx.Err()
	}
	c.rand = func() float64 { return 0.5 }
	return c, slept
}

func userRequest(text string) Request {
	return Request{Messages: []Message{{Role: RoleSystem, Content: "You are a business analyst."}, {Role: RoleUser, Content: text}}}
}

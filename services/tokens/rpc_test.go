package tokens

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
)

// serve starts s on loopback gRPC and returns a client.
func serve(t *testing.T, s *Server) baagentv1.TokensServiceClient {
	t.Helper()
	return baagentv1.NewTokensServiceClient(vt.Serve(t, func(gs grpc.ServiceRegistrar) { s.Register(gs) }))
}

func TestCountTokensRPC(t *testing.T) {
	t.Parallel()

	c := serve(t, newTestServer(t, Options{}))
	ctx := t.Context()
	for _, tc := range []struct {
		model, text string
		special     bool
		want        *baagentv1.CountTokensResponse
	}{
		// "The quick brown fox..." is 10 tokens in o200k_base and cl100k_base
		// (encoding/vectors_test.go).
		{"gpt-4o", "The quick brown fox jumps over the lazy dog.", false, &baagentv1.CountTokensResponse{
			Count: 10, RawCount: 10, EncodingName: "o200k_base", SafetyMargin: 1, IsEstimate: false,
			ModelFamily: baagentv1.ModelFamily_MODEL_FAMILY_GPT, Source: baagentv1.CountSource_COUNT_SOURCE_LOCAL}},
		// Claude: cl100k_base estimate, ceil(10 x 1.15) = 12.
		{"claude-sonnet-4-5", "The quick brown fox jumps over the lazy dog.", false, &baagentv1.CountTokensResponse{
			Count: 12, RawCount: 10, EncodingName: "cl100k_base", SafetyMargin: 1.15, IsEstimate: true,
			ModelFamily: baagentv1.ModelFamily_MODEL_FAMILY_CLAUDE, Source: baagentv1.CountSource_COUNT_SOURCE_LOCAL}},
		// Special-token text: ordinary text (7 tokens) unless allowed (1).
		{"gpt-4", "<|endoftext|>", false, &baagentv1.CountTokensResponse{
			Count: 7, RawCount: 7, EncodingName: "cl100k_base", SafetyMargin: 1,
			ModelFamily: baagentv1.ModelFamily_MODEL_FAMILY_GPT, Source: baagentv1.CountSource_COUNT_SOURCE_LOCAL}},
		{"gpt-4", "<|endoftext|>", true, &baagentv1.CountTokensResponse{
			Count: 1, RawCount: 1, EncodingName: "cl100k_base", SafetyMargin: 1,
			ModelFamily: baagentv1.ModelFamily_MODEL_FAMILY_GPT, Source: baagentv1.CountSource_COUNT_SOURCE_LOCAL}},
		{"unknown-model", "", false, &baagentv1.CountTokensResponse{
			Count: 0, RawCount: 0, EncodingName: "cl100k_base", SafetyMargin: 1.2, IsEstimate: true,
			ModelFamily: baagentv1.ModelFamily_MODEL_FAMILY_CUSTOM, Source: baagentv1.CountSource_COUNT_SOURCE_LOCAL}},
	} {
		got, err := c.CountTokens(ctx, &baagentv1.CountTokensRequest{Model: tc.model, Text: tc.text, AllowSpecialTokens: tc.special})
		if err != nil {
			t.Fatalf("%s %q: %v", tc.model, tc.text, err)
		}
		if !proto.Equal(got, tc.want) {
			t.Errorf("%s %q (special %v):\n got %v\nwant %v", tc.model, tc.text, tc.special, got, tc.want)
		}
	}
}

// TestGetModelInfoSeedExample checks GetModelInfo("glm-4-plus")
// output: family glm, cl100k_base, margin 1.25, no exact counting, no API
// client.
func TestGetModelInfoSeedExample(t *testing.T) {
	t.Parallel()

	c := serve(t, newTestServer(t, Options{}))
	resp, err := c.GetModelInfo(t.Context(), &baagentv1.GetModelInfoRequest{Model: "glm-4-plus"})
	if err != nil {
		t.Fatal(err)
	}
	info := resp.GetInfo()
	b, _ := protojson.MarshalOptions{UseProtoNames: true}.Marshal(info)
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{
		"model": "glm-4-plus", "model_family": "MODEL_FAMILY_GLM", "encoding_name": "cl100k_base", "safety_margin": 1.25,
		"matched_by": "MODEL_MATCH_PATTERN", "matched_pattern": "glm-*", "is_estimate": true,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v (info %s)", k, got[k], want, b)
		}
	}
	// use_exact_counting and has_api_client are false: absent in proto JSON.
	if info.GetUseExactCounting() || info.GetHasApiClient() {
		t.Errorf("exact counting reported: %s", b)
	}
	if md := info.GetMetadata(); md.GetContextLength() != 128000 || md.GetMaxOutputTokens() != 4096 || md.InputCostPer_1M != nil {
		t.Errorf("metadata = %v, want the defaults and no price", md)
	}
}

func TestListModelsRPC(t *testing.T) {
	t.Parallel()

	c := serve(t, newTestServer(t, Options{}))
	resp, err := c.ListModels(t.Context(), &baagentv1.ListModelsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(resp.GetEncodings(), ",") != "o200k_base,cl100k_base,p50k_base,r50k_base" {
		t.Errorf("encodings = %v", resp.GetEncodings())
	}
	byName := map[string]*baagentv1.ModelInfo{}
	for _, m := range resp.GetModels() {
		byName[m.GetModel()] = m
	}
	if m := byName["claude-*"]; m.GetMatchedBy() != baagentv1.ModelMatch_MODEL_MATCH_PATTERN || m.GetSafetyMargin() != 1.15 {
		t.Errorf("claude-* = %v", m)
	}
	if m := byName["gpt-4"]; m.GetMatchedBy() != baagentv1.ModelMatch_MODEL_MATCH_EXACT || m.GetEncodingName() != "cl100k_base" || m.GetIsEstimate() {
		t.Errorf("gpt-4 = %v", m)
	}
	// The preset models are listed with their metadata, resolved through the
	// encoder entries.
	if m := byName["qwen-plus"]; m.GetMatchedPattern() != "qwen-*" || m.GetSafetyMargin() != 1.2 || m.GetMetadata().GetContextLength() != 131_072 {
		t.Errorf("qwen-plus = %v", m)
	}
	if m := byName["gpt-4o"]; m.GetEncodingName() != "o200k_base" || m.GetMetadata().GetMaxOutputTokens() != 16_384 || m.GetIsEstimate() {
		t.Errorf("gpt-4o = %v", m)
	}
	if !slices.IsSortedFunc(resp.GetModels(), func(a, b *baagentv1.ModelInfo) int { return strings.Compare(a.GetModel(), b.GetModel()) }) {
		t.Error("models are not sorted by name")
	}
}

func TestEncodeDecodeRPC(t *testing.T) {
	t.Parallel()

	c := serve(t, newTestServer(t, Options{}))
	ctx := t.Context()
	enc, err := c.Encode(ctx, &baagentv1.EncodeRequest{Encoder: &baagentv1.EncodeRequest_Model{Model: "gpt-4"}, Text: "hello <|endoftext|>", AllowSpecialTokens: true})
	if err != nil {
		t.Fatal(err)
	}
	if enc.GetEncodingName() != "cl100k_base" || len(enc.GetTokens()) != 3 || enc.GetTokens()[2] != 100257 {
		t.Fatalf("Encode = %v", enc)
	}
	dec, err := c.Decode(ctx, &baagentv1.DecodeRequest{Encoder: &baagentv1.DecodeRequest_EncodingName{EncodingName: "cl100k_base"}, Tokens: enc.GetTokens()})
	if err != nil || dec.GetText() != "hello <|endoftext|>" || !dec.GetValidUtf8() || string(dec.GetRaw()) != dec.GetText() {
		t.Fatalf("Decode = %v, %v", dec, err)
	}
	// Half of a character: raw bytes kept, text replaced, valid_utf8 false.
	// "构" is 3 byte tokens in r50k_base: 162, 252, 226.
	dec, err = c.Decode(ctx, &baagentv1.DecodeRequest{Encoder: &baagentv1.DecodeRequest_EncodingName{EncodingName: "r50k_base"}, Tokens: []uint32{162, 252}})
	if err != nil || dec.GetValidUtf8() || dec.GetText() != "\uFFFD" || string(dec.GetRaw()) != "\xe6\x9e" {
		t.Fatalf("Decode(partial) = %v, %v", dec, err)
	}
}

// TestCountMessagesRPC counts the cookbook conversation over gRPC, then the
// same conversation with one more message: only that message is encoded.
func TestCountMessagesRPC(t *testing.T) {
	t.Parallel()

	reg := prometheus.NewRegistry()
	c := serve(t, newTestServer(t, Options{Registerer: reg}))
	ctx := t.Context()
	req := &baagentv1.CountMessagesRequest{Model: "gpt-4", Messages: cookbookMessages}
	first, err := c.CountMessages(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if first.GetRawCount() != 129 || first.GetCount() != 129 || first.GetReplyPrimingTokens() != 3 || len(first.GetMessageRawCounts()) != 6 ||
		first.GetCacheMisses() != 6 || first.GetCacheHits() != 0 || first.GetIsEstimate() || first.GetEncodingName() != "cl100k_base" {
		t.Fatalf("first count = %v", first)
	}
	req.Messages = append(append([]*baagentv1.ChatMessage{}, cookbookMessages...), user("And now?"))
	second, err := c.CountMessages(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if second.GetCacheHits() != 6 || second.GetCacheMisses() != 1 || second.GetRawCount() != 129+second.GetMessageRawCounts()[6] {
		t.Fatalf("second count = %v", second)
	}
	if hits, misses := counterValue(t, reg, "baagent_tokens_cache_hits_total"), counterValue(t, reg, "baagent_tokens_cache_misses_total"); hits != 6 || misses != 7 {
		t.Errorf("metrics: hits %v misses %v, want 6 and 7", hits, misses)
	}
	// With tools and a margin: the cookbook tool example for a Claude model.
	withTools, err := c.CountMessages(ctx, &baagentv1.CountMessagesRequest{Model: "claude-3-opus", Messages: cookbookToolMessages, Tools: cookbookTools(t)})
	if err != nil {
		t.Fatal(err)
	}
	if withTools.GetRawCount() != 105 || withTools.GetToolsRawCount() != 71 || withTools.GetCount() != 121 || !withTools.GetIsEstimate() || withTools.GetSafetyMargin() != 1.15 {
		t.Errorf("with tools = %v, want raw 105 (tools 71), count ceil(105 x 1.15) = 121", withTools)
	}
}

func TestCountMessagesToolCalls(t *testing.T) {
	t.Parallel()

	s := newTestServer(t, Options{})
	resp, err := s.CountMessages(t.Context(), validCountMsgs)
	if err != nil {
		t.Fatal(err)
	}
	// The assistant message counts its tool call: 3 + "assistant" 1 +
	// "file_read" + `{"path":"a.csv"}`; the tool message 3 + "tool" 1 +
	// content + 3 for tool_call_id.
	cc := newTestChatCounter(t, "cl100k_base")
	n := func(s string) int64 { v, _ := cc.text(s); return v }
	if want := 3 + 1 + n("file_read") + n(`{"path":"a.csv"}`); resp.GetMessageRawCounts()[2] != want {
		t.Errorf("assistant tool call message = %d, want %d", resp.GetMessageRawCounts()[2], want)
	}
	if want := 3 + 1 + n("a,b\n1,2") + 3; resp.GetMessageRawCounts()[3] != want {
		t.Errorf("tool message = %d, want %d", resp.GetMessageRawCounts()[3], want)
	}
}

func counterValue(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

func TestNewErrors(t *testing.T) {
	t.Parallel()

	if _, err := New(Options{EncodersFile: filepath.Join(t.TempDir(), "missing.yaml")}); err == nil {
		t.Error("New with a missing encoders file succeeded")
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("encoders:\n  x:\n    model_family: gpt\n    encoding_name: nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{EncodersFile: bad}); err == nil || !strings.Contains(err.Error(), `encoders["x"]`) {
		t.Errorf("New with a bad file: %v", err)
	}
	reg := prometheus.NewRegistry()
	newTestServer(t, Options{Registerer: reg})
	if _, err := New(Options{Registerer: reg}); err == nil {
		t.Error("second Server on one registry succeeded")
	}
}

// exactServer is a stand-in for Anthropic's count_tokens endpoint.
func exactServer(t *testing.T, handler http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv.URL + "/v1/messages/count_tokens"
}

func exactConfigFile(t *testing.T, url string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token_encoders.yaml")
	yaml := "encoders:\n  claude-exact:\n    model_family: claude\n    encoding_name: cl100k_base\n    safety_margin: 1.15\n" +
		"    use_exact_counting: true\n    exact_counting_api: " + url + "\n    encoder_params:\n      api_key_env: TEST_KEY\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestExactCounting(t *testing.T) {
	t.Parallel()

	var mu sync.Mutex
	var gotBody map[string]any
	var gotHeader http.Header
	url := exactServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		_ = json.Unmarshal(b, &gotBody)
		gotHeader = r.Header.Clone()
		mu.Unlock()
		if r.Header.Get("x-api-key") != "secret" {
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, `{"input_tokens": 42}`)
	})
	key := "secret"
	reg := prometheus.NewRegistry()
	s := newTestServer(t, Options{
		EncodersFile: exactConfigFile(t, url),
		Registerer:   reg,
		ExactCounter: AnthropicCounter{Getenv: func(name string) string {
			if name == "TEST_KEY" {
				return key
			}
			return ""
		}},
	})
	c := serve(t, s)
	ctx := t.Context()
	req := &baagentv1.CountTokensRequest{Model: "claude-exact", Text: "The quick brown fox jumps over the lazy dog."}

	got, err := c.CountTokens(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got.GetSource() != baagentv1.CountSource_COUNT_SOURCE_PROVIDER_API || got.GetCount() != 42 || got.GetRawCount() != 42 || got.GetIsEstimate() || got.GetSafetyMargin() != 1 {
		t.Fatalf("provider count = %v", got)
	}
	mu.Lock()
	if gotBody["model"] != "claude-exact" || gotHeader.Get("anthropic-version") != DefaultAnthropicVersion || gotHeader.Get("Content-Type") != "application/json" {
		t.Errorf("request body %v, headers %v", gotBody, gotHeader)
	}
	mu.Unlock()
	info, err := c.GetModelInfo(ctx, &baagentv1.GetModelInfoRequest{Model: "claude-exact"})
	if err != nil || !info.GetInfo().GetHasApiClient() || !info.GetInfo().GetUseExactCounting() {
		t.Fatalf("model info = %v, %v", info, err)
	}

	// A failing provider (wrong key -> 401): the local estimate, marked.
	key = "wrong"
	got, err = c.CountTokens(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got.GetSource() != baagentv1.CountSource_COUNT_SOURCE_LOCAL_FALLBACK || got.GetRawCount() != 10 || got.GetCount() != 12 || !got.GetIsEstimate() {
		t.Fatalf("fallback count = %v", got)
	}
	if v := counterValue(t, reg, "baagent_tokens_exact_count_fallbacks_total"); v != 1 {
		t.Errorf("fallback metric = %v", v)
	}

	// No key in the environment: no request at all, a plain local count.
	key = ""
	got, err = c.CountTokens(ctx, req)
	if err != nil || got.GetSource() != baagentv1.CountSource_COUNT_SOURCE_LOCAL {
		t.Fatalf("count without key = %v, %v", got, err)
	}
}

func TestAnthropicCounterErrors(t *testing.T) {
	t.Parallel()

	cfg := func(url string) EncoderConfig {
		return EncoderConfig{UseExactCounting: true, ExactCountingAPI: url}
	}
	for name, h := range map[string]http.HandlerFunc{
		"server error":    func(w http.ResponseWriter, _ *http.Request) { http.Error(w, strings.Repeat("x", 1000), 500) },
		"not json":        func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "<html>") },
		"no input_tokens": func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{"tokens": 3}`) },
		"negative":        func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{"input_tokens": -1}`) },
	} {
		t.Run(name, func(t *testing.T) {
			url := exactServer(t, h)
			if n, err := (AnthropicCounter{}).CountText(t.Context(), cfg(url), "m", "hi"); err == nil {
				t.Fatalf("got %d, want an error", n)
			}
		})
	}
	// Unreachable endpoint: a closed server.
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	if _, err := (AnthropicCounter{}).CountText(t.Context(), cfg(srv.URL), "m", "hi"); err == nil {
		t.Error("closed server: no error")
	}
	if (AnthropicCounter{}).Available(EncoderConfig{UseExactCounting: true}) {
		t.Error("available without an endpoint")
	}
	if !(AnthropicCounter{}).Available(cfg("http://127.0.0.1:1")) {
		t.Error("an endpoint without a key variable is not available")
	}
}

// TestConcurrentCounting hammers one server from several goroutines; run
// with -race.
func TestConcurrentCounting(t *testing.T) {
	t.Parallel()

	s := newTestServer(t, Options{CacheEntries: 8})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 4 {
		wg.Go(func() {
			for i := range 20 {
				msgs := append([]*baagentv1.ChatMessage{}, cookbookMessages...)
				msgs = append(msgs, user(strings.Repeat("word ", g*20+i)))
				resp, err := s.CountMessages(t.Context(), &baagentv1.CountMessagesRequest{Model: "gpt-4o", Messages: msgs})
				if err != nil {
					errs <- err
					return
				}
				if resp.GetMessageRawCounts()[0] != 3+1+17 {
					errs <- errFmt("message 0 counted %d", resp.GetMessageRawCounts()[0])
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := s.cache.len(); n > 8 {
		t.Errorf("cache holds %d entries, bound 8", n)
	}
}

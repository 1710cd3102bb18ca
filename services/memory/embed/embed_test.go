package embed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func cosine(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func norm(v []float32) float64 { return math.Sqrt(cosine(v, v)) }

var _ Embedder = (*Lexical)(nil)
var _ Embedder = (*OpenAI)(nil)

func TestLexicalIsDeterministicAndNormalised(t *testing.T) {
	l := NewLexical(0)
	if l.Dims() != 256 || l.Model() != "lexical-hash-v1" {
		t.Fatalf("defaults: %d %s", l.Dims(), l.Model())
	}
	texts := []string{"Revenue by region in Q3 2026", "", "!!!", "Ünïcödé Straße", strings.Repeat("word ", 10000)}
	a, err := l.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewLexical(256).Embed(context.Background(), texts)
	for i := range texts {
		if len(a[i]) != 256 {
			t.Fatalf("len %d", len(a[i]))
		}
		if n := norm(a[i]); math.Abs(n-1) > 1e-5 {
			t.Errorf("text %d: norm %f", i, n)
		}
		for j := range a[i] {
			if a[i][j] != b[i][j] {
				t.Fatalf("text %d not deterministic at %d", i, j)
			}
		}
	}
	if NewLexical(512).Model() != "lexical-hash-v1/512" {
		t.Errorf("model of 512 dims: %s", NewLexical(512).Model())
	}
}

func TestLexicalSimilarityFollowsSharedWords(t *testing.T) {
	l := NewLexical(0)
	v := func(s string) []float32 { return l.Vector(s) }
	same := cosine(v("Hardware revenue"), v("hardware REVENUE"))
	if math.Abs(same-1) > 1e-6 {
		t.Errorf("case should not matter: %f", same)
	}
	near := cosine(v("revenue"), v("revenues"))
	far := cosine(v("revenue"), v("customer"))
	if near < 0.2 || near <= far+0.15 {
		t.Errorf("revenue~revenues %f should be well above revenue~customer %f", near, far)
	}
	related := cosine(v("Rack Server S10"), v("Rack Server S20"))
	unrelated := cosine(v("Rack Server S10"), v("Onboarding Workshop"))
	if related <= unrelated+0.3 {
		t.Errorf("Rack Server S10~S20 %f vs Onboarding Workshop %f", related, unrelated)
	}
	// Lexical, not semantic: synonyms are not close.
	if syn := cosine(v("revenue"), v("turnover")); syn > 0.3 {
		t.Errorf("revenue~turnover %f: the lexical embedding should know no synonyms", syn)
	}
}

func TestLexicalStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewLexical(0).Embed(ctx, []string{"a"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

// fakeEmbeddings speaks the /v1/embeddings API: vectors derived from the
// input (its length and first byte), reversed order to check indexes.
type fakeEmbeddings struct {
	mu       sync.Mutex
	dims     int
	requests []embeddingsRequest
	auth     []string
	// fail answers the first len(fail) requests with these statuses.
	fail       []int
	retryAfter string
}

func (f *fakeEmbeddings) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req embeddingsRequest
	if err := json.Unmarshal(body, &req); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	n := len(f.requests)
	f.mu.Unlock()
	if n <= len(f.fail) {
		if f.retryAfter != "" {
			w.Header().Set("Retry-After", f.retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.fail[n-1])
		fmt.Fprintf(w, `{"error":{"message":"Rate limit reached for %s","type":"requests","param":null,"code":"rate_limit_exceeded"}}`, req.Model)
		return
	}
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	}
	var data []item
	for i := len(req.Input) - 1; i >= 0; i-- {
		v := make([]float64, f.dims)
		v[0] = float64(len(req.Input[i]))
		v[1] = float64(req.Input[i][0])
		data = append(data, item{Object: "embedding", Index: i, Embedding: v})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"object": "list", "data": data, "model": req.Model,
		"usage": map[string]int{"prompt_tokens": 8, "total_tokens": 8},
	})
}

func newFake(t *testing.T, f *fakeEmbeddings) string {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func TestOpenAIEmbedsInBatchesInOrder(t *testing.T) {
	f := &fakeEmbeddings{dims: 8}
	o, err := NewOpenAI(OpenAIConfig{BaseURL: newFake(t, f), APIKey: "k-123", Dims: 8, BatchSize: 3, SendDimensions: true})
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"a", "bb", "ccc", "dddd", "", "ffffff", "g"}
	vecs, err := o.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != len(texts) {
		t.Fatalf("%d vectors", len(vecs))
	}
	for i, txt := range texts {
		if txt == "" {
			txt = " "
		}
		want0 := float64(len(txt)) / math.Hypot(float64(len(txt)), float64(txt[0]))
		if math.Abs(float64(vecs[i][0])-want0) > 1e-6 || math.Abs(norm(vecs[i])-1) > 1e-6 {
			t.Errorf("vector %d = %v, want first %f and unit length", i, vecs[i][:2], want0)
		}
	}
	if len(f.requests) != 3 {
		t.Fatalf("%d requests, want 3 batches", len(f.requests))
	}
	for _, r := range f.requests {
		if r.Model != DefaultOpenAIModel || r.EncodingFormat != "float" || r.Dimensions != 8 || len(r.Input) > 3 {
			t.Errorf("request %+v", r)
		}
	}
	if f.auth[0] != "Bearer k-123" {
		t.Errorf("auth %q", f.auth[0])
	}
	if o.Model() != DefaultOpenAIModel || o.Dims() != 8 {
		t.Errorf("model %s dims %d", o.Model(), o.Dims())
	}
}

func TestOpenAIRetriesHonouringRetryAfter(t *testing.T) {
	f := &fakeEmbeddings{dims: 4, fail: []int{429, 503}, retryAfter: "0.05"}
	reg := prometheus.NewRegistry()
	o, err := NewOpenAI(OpenAIConfig{BaseURL: newFake(t, f), Dims: 4, InitialWait: time.Hour, MaxWait: time.Hour, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	vecs, err := o.Embed(ctx, []string{"x"})
	if err != nil {
		t.Fatal(err)
	}
	// The backoff is an hour: finishing proves Retry-After was used.
	if len(vecs) != 1 || len(f.requests) != 3 {
		t.Fatalf("%d vectors after %d requests", len(vecs), len(f.requests))
	}
	if el := time.Since(start); el < 100*time.Millisecond {
		t.Errorf("two waits of 50ms took %v", el)
	}
	if got := testutil.ToFloat64(o.metrics.requests.WithLabelValues("retried")); got != 2 {
		t.Errorf("retried attempts counted %v", got)
	}
	if got := testutil.ToFloat64(o.metrics.requests.WithLabelValues("ok")); got != 1 {
		t.Errorf("ok attempts counted %v", got)
	}
	if got := testutil.ToFloat64(o.metrics.inputs); got != 1 {
		t.Errorf("inputs counted %v", got)
	}
	// A second embedder on the same registry shares the series.
	o2, err := NewOpenAI(OpenAIConfig{BaseURL: newFake(t, &fakeEmbeddings{dims: 4}), Dims: 4, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o2.Embed(ctx, []string{"y", "z"}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(o.metrics.inputs); got != 3 {
		t.Errorf("shared inputs counter %v", got)
	}
}

func TestOpenAIGivesUpAfterMaxRetries(t *testing.T) {
	f := &fakeEmbeddings{dims: 4, fail: []int{500, 500, 500}}
	o, _ := NewOpenAI(OpenAIConfig{BaseURL: newFake(t, f), Dims: 4, MaxRetries: 2, InitialWait: time.Millisecond, MaxWait: time.Millisecond})
	_, err := o.Embed(context.Background(), []string{"x"})
	var e *Error
	if !errors.As(err, &e) || e.Status != 500 || !e.Retryable || !strings.Contains(e.Msg, "Rate limit reached") {
		t.Fatalf("err = %#v", err)
	}
	if len(f.requests) != 3 {
		t.Errorf("%d requests, want 1 + 2 retries", len(f.requests))
	}
}

func TestOpenAIDoesNotRetryClientErrors(t *testing.T) {
	f := &fakeEmbeddings{dims: 4, fail: []int{401}}
	o, _ := NewOpenAI(OpenAIConfig{BaseURL: newFake(t, f), APIKey: "secret-key", Dims: 4, InitialWait: time.Millisecond})
	_, err := o.Embed(context.Background(), []string{"x"})
	var e *Error
	if !errors.As(err, &e) || e.Status != 401 || e.Retryable {
		t.Fatalf("err = %#v", err)
	}
	if len(f.requests) != 1 {
		t.Errorf("%d requests", len(f.requests))
	}
}

func TestOpenAIChecksDimensions(t *testing.T) {
	f := &fakeEmbeddings{dims: 4}
	o, _ := NewOpenAI(OpenAIConfig{BaseURL: newFake(t, f), Dims: 8})
	_, err := o.Embed(context.Background(), []string{"x"})
	if err == nil || !strings.Contains(err.Error(), "has 4 dimensions, want 8") {
		t.Fatalf("err = %v", err)
	}
}

func TestOpenAITimesOutEachAttempt(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	o, _ := NewOpenAI(OpenAIConfig{BaseURL: srv.URL, Dims: 4, Timeout: 50 * time.Millisecond, MaxRetries: 1, InitialWait: time.Millisecond, MaxWait: time.Millisecond})
	_, err := o.Embed(context.Background(), []string{"x"})
	var e *Error
	if !errors.As(err, &e) || !e.Retryable || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}

func TestNewOpenAIValidates(t *testing.T) {
	for _, c := range []OpenAIConfig{{}, {BaseURL: "ftp://x", Dims: 3}, {BaseURL: "http://x"}} {
		if _, err := NewOpenAI(c); err == nil {
			t.Errorf("NewOpenAI(%+v) accepted", c)
		}
	}
}

func TestParseResponseRefusesBadBodies(t *testing.T) {
	bad := map[string]string{
		"not json":       `{`,
		"count":          `{"data":[]}`,
		"index range":    `{"data":[{"index":3,"embedding":[1,0]}]}`,
		"duplicate":      `{"data":[{"index":0,"embedding":[1,0]},{"index":0,"embedding":[1,0]}]}`,
		"base64":         `{"data":[{"index":0,"embedding":"AAAA"}]}`,
		"dims":           `{"data":[{"index":0,"embedding":[1,0,0]}]}`,
		"zero":           `{"data":[{"index":0,"embedding":[0,0]}]}`,
		"overflow":       `{"data":[{"index":0,"embedding":[1e308,1e308]}]}`,
		"non numeric":    `{"data":[{"index":0,"embedding":[1,"x"]}]}`,
		"negative index": `{"data":[{"index":-1,"embedding":[1,0]}]}`,
	}
	for name, body := range bad {
		n := 1
		if name == "duplicate" {
			n = 2
		}
		if _, err := ParseResponse([]byte(body), n, 2); err == nil {
			t.Errorf("%s: accepted %s", name, body)
		}
	}
	v, err := ParseResponse([]byte(`{"data":[{"index":1,"embedding":[0,2]},{"index":0,"embedding":[3,4]}]}`), 2, 2)
	if err != nil || v[0][0] != 0.6 || v[1][1] != 1 {
		t.Fatalf("%v %v", v, err)
	}
}

func FuzzParseResponse(f *testing.F) {
	f.Add([]byte(`{"data":[{"index":0,"embedding":[0.1,0.2,0.3]}]}`), 1, 3)
	f.Add([]byte(`{"object":"list","data":[{"object":"embedding","index":1,"embedding":[1,2]},{"index":0,"embedding":[3,4]}],"model":"m"}`), 2, 2)
	f.Add([]byte(`{"data":[{"embedding":[1e-320,0]}]}`), 1, 2)
	f.Fuzz(func(t *testing.T, data []byte, n, dims int) {
		if n < 0 || n > 64 || dims < 0 || dims > 64 {
			return
		}
		vecs, err := ParseResponse(data, n, dims)
		if err != nil {
			return
		}
		if len(vecs) != n {
			t.Fatalf("%d vectors for %d", len(vecs), n)
		}
		for _, v := range vecs {
			if len(v) != dims {
				t.Fatalf("len %d want %d", len(v), dims)
			}
			nv := norm(v)
			if math.IsNaN(nv) || math.Abs(nv-1) > 1e-3 {
				t.Fatalf("norm %f of %v", nv, v)
			}
		}
	})
}

func FuzzLexical(f *testing.F) {
	f.Add("Revenue by region")
	f.Add("")
	f.Add("\xff\xfe")
	l := NewLexical(64)
	f.Fuzz(func(t *testing.T, s string) {
		v := l.Vector(s)
		if len(v) != 64 || math.Abs(norm(v)-1) > 1e-4 {
			t.Fatalf("vector of %q: len %d norm %f", s, len(v), norm(v))
		}
	})
}

func BenchmarkLexical(b *testing.B) {
	l := NewLexical(0)
	text := "Rack Server S10 is a Hardware product; revenue in the North region grew 12% in Q3 2026 for SMB customers."
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		l.Vector(text)
	}
}

func BenchmarkOpenAIBatch256(b *testing.B) {
	f := &fakeEmbeddings{dims: 1536}
	srv := httptest.NewServer(f)
	defer srv.Close()
	o, _ := NewOpenAI(OpenAIConfig{BaseURL: srv.URL + "/v1", Dims: 1536})
	texts := make([]string, 256)
	for i := range texts {
		texts[i] = fmt.Sprintf("entity %d: Rack Server S10 in Hardware", i)
	}
	b.ReportAllocs()
	for b.Loop() {
		f.mu.Lock()
		f.requests = f.requests[:0]
		f.auth = f.auth[:0]
		f.mu.Unlock()
		if _, err := o.Embed(context.Background(), texts); err != nil {
			b.Fatal(err)
		}
	}
}

// Stored vectors are only comparable with new ones while the features and
// their hashes stay the same: a change here is a new model name.
func TestLexicalVectorsAreStable(t *testing.T) {
	golden := map[string]string{
		"Revenue by region in Q3 2026": "30 [0:-0.082479 4:-0.082479 15:0.082479 21:0.082479 29:0.082479 33:0.082479]",
		"Rack Server S10":              "17 [23:0.118678 44:-0.118678 64:0.118678 67:0.237356 69:0.118678 78:-0.118678]",
		"":                             "1 [220:-1.000000]",
		"Straße Ünïcödé customer's":    "25 [5:0.102062 19:-0.102062 26:0.102062 44:0.102062 67:0.408248 72:-0.102062]",
	}
	l := NewLexical(0)
	for text, want := range golden {
		var nz []string
		for i, x := range l.Vector(text) {
			if x != 0 {
				nz = append(nz, fmt.Sprintf("%d:%.6f", i, x))
			}
		}
		if got := fmt.Sprintf("%d %v", len(nz), nz[:min(6, len(nz))]); got != want {
			t.Errorf("%q: %s, want %s", text, got, want)
		}
	}
}

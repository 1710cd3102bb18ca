package embed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baagent/baagent/internal/llm"
	"github.com/baagent/baagent/internal/metrics"
	"github.com/baagent/baagent/internal/retry"
)

// Defaults of OpenAIConfig.
const (
	DefaultOpenAIModel   = "text-embedding-3-small"
	DefaultBatchSize     = 256
	DefaultTimeout       = 30 * time.Second
	DefaultMaxRetries    = 4
	DefaultInitialWait   = 500 * time.Millisecond
	DefaultMaxWait       = 20 * time.Second
	maxResponseBytes     = 64 << 20
	maxErrorBodyBytes    = 4 << 10
	maxBatchSize         = 2048
	maxRetryAfterHonored = 2 * time.Minute
)

// OpenAIConfig configures an OpenAI-compatible embeddings client.
type OpenAIConfig struct {
	// BaseURL is the API root, e.g. "https://api.openai.com/v1"; requests go
	// to BaseURL + "/embeddings". Required.
	BaseURL string
	// APIKey is sent as a Bearer token when set.
	APIKey string
	// Model is the embedding model (DefaultOpenAIModel when empty).
	Model string
	// Dims is the expected vector length. Required: every vector returned
	// is checked against it. SendDimensions asks the server for it (the
	// text-embedding-3 models can shorten their vectors).
	Dims           int
	SendDimensions bool
	// BatchSize bounds the inputs of one request (DefaultBatchSize, at most
	// 2048, the API's limit).
	BatchSize int
	// Timeout bounds one HTTP attempt (DefaultTimeout).
	Timeout time.Duration
	// MaxRetries is how often a request is retried after a 429, a 5xx or a
	// transport error (DefaultMaxRetries; negative: never).
	MaxRetries int
	// InitialWait and MaxWait shape the exponential backoff between
	// retries; a Retry-After header (up to 2 minutes) is honoured instead.
	InitialWait, MaxWait time.Duration
	// HTTPClient sends the requests (a client with no timeout of its own
	// when nil; Timeout applies per attempt).
	HTTPClient *http.Client
	// Registerer receives the embedding metrics (see embedMetrics); nil
	// registers none.
	Registerer prometheus.Registerer
}

// embedMetrics are shared by every OpenAI embedder of a process:
//
//	baagent_memory_embedding_requests_total{outcome}  HTTP attempts: ok, retried (a retryable failure followed by another attempt), failed
//	baagent_memory_embedding_request_seconds          duration of one attempt
//	baagent_memory_embedding_inputs_total             texts embedded successfully
type embedMetrics struct {
	requests *prometheus.CounterVec
	duration prometheus.Histogram
	inputs   prometheus.Counter
}

func newEmbedMetrics(reg prometheus.Registerer) (*embedMetrics, error) {
	m := &embedMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "memory", Name: "embedding_requests_total",
			Help: "Embedding HTTP attempts, by outcome (ok, retried, failed).",
		}, []string{"outcome"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "baagent", Subsystem: "memory", Name: "embedding_request_seconds",
			Help:    "Duration of one embedding HTTP attempt.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
		}),
		inputs: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "memory", Name: "embedding_inputs_total",
			Help: "Texts embedded by the embedding endpoint.",
		}),
	}
	var err error
	if m.requests, err = metrics.RegisterShared(reg, m.requests); err != nil {
		return nil, err
	}
	if m.duration, err = metrics.RegisterShared(reg, m.duration); err != nil {
		return nil, err
	}
	if m.inputs, err = metrics.RegisterShared(reg, m.inputs); err != nil {
		return nil, err
	}
	return m, nil
}

// OpenAI embeds texts with an OpenAI-compatible /embeddings endpoint.
// It is safe for concurrent use.
type OpenAI struct {
	cfg     OpenAIConfig
	url     string
	client  *http.Client
	metrics *embedMetrics
}

// NewOpenAI checks cfg and returns the client.
func NewOpenAI(cfg OpenAIConfig) (*OpenAI, error) {
	cfg.BaseURL = strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/")
	if cfg.BaseURL == "" {
		return nil, errors.New("embed: OpenAIConfig.BaseURL is required")
	}
	if !strings.HasPrefix(cfg.BaseURL, "http://") && !strings.HasPrefix(cfg.BaseURL, "https://") {
		return nil, fmt.Errorf("embed: OpenAIConfig.BaseURL %q must be an http(s) URL", cfg.BaseURL)
	}
	if cfg.Dims <= 0 {
		return nil, errors.New("embed: OpenAIConfig.Dims must be positive")
	}
	if cfg.Model == "" {
		cfg.Model = DefaultOpenAIModel
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	cfg.BatchSize = min(cfg.BatchSize, maxBatchSize)
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = DefaultMaxRetries
	}
	cfg.MaxRetries = max(cfg.MaxRetries, 0)
	if cfg.InitialWait <= 0 {
		cfg.InitialWait = DefaultInitialWait
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{}
	}
	m, err := newEmbedMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("embed: metrics: %w", err)
	}
	return &OpenAI{cfg: cfg, url: cfg.BaseURL + "/embeddings", client: client, metrics: m}, nil
}

// Model is the configured model.
func (o *OpenAI) Model() string { return o.cfg.Model }

// Dims is the configured dimension.
func (o *OpenAI) Dims() int { return o.cfg.Dims }

// Error is a failed embeddings call.
type Error struct {
	// Status is the HTTP status (0 for a transport or decoding failure).
	Status int
	// Retryable reports whether trying again later may succeed (429, 5xx,
	// transport errors, timeouts).
	Retryable bool
	Msg       string
	Err       error
}

func (e *Error) Error() string {
	s := "embed: " + e.Msg
	if e.Status != 0 {
		s = fmt.Sprintf("embed: HTTP %d: %s", e.Status, e.Msg)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Embed embeds texts in batches of at most BatchSize, in order.
func (o *OpenAI) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += o.cfg.BatchSize {
		batch := texts[start:min(start+o.cfg.BatchSize, len(texts))]
		vecs, err := o.embedBatch(ctx, batch)
		if err != nil {
			return nil, err
		}
		out = append(out, vecs...)
	}
	return out, nil
}

type embeddingsRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format"`
	Dimensions     int      `json:"dimensions,omitempty"`
}

func (o *OpenAI) embedBatch(ctx context.Context, batch []string) ([][]float32, error) {
	req := embeddingsRequest{Model: o.cfg.Model, Input: make([]string, len(batch)), EncodingFormat: "float"}
	for i, t := range batch {
		// The API refuses empty inputs; a single space embeds as "nothing".
		if strings.TrimSpace(t) == "" {
			t = " "
		}
		req.Input[i] = t
	}
	if o.cfg.SendDimensions {
		req.Dimensions = o.cfg.Dims
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, &Error{Msg: "encoding the request", Err: err}
	}
	bo := retry.Backoff{Initial: o.cfg.InitialWait, Max: o.cfg.MaxWait}
	for attempt := 0; ; attempt++ {
		start := time.Now()
		vecs, retryAfter, err := o.attempt(ctx, body, len(batch))
		o.metrics.duration.Observe(time.Since(start).Seconds())
		if err == nil {
			o.metrics.requests.WithLabelValues("ok").Inc()
			o.metrics.inputs.Add(float64(len(batch)))
			return vecs, nil
		}
		var e *Error
		if !errors.As(err, &e) || !e.Retryable || attempt >= o.cfg.MaxRetries || ctx.Err() != nil {
			o.metrics.requests.WithLabelValues("failed").Inc()
			return nil, err
		}
		o.metrics.requests.WithLabelValues("retried").Inc()
		wait := bo.Delay(attempt)
		wait = wait/2 + time.Duration(rand.Float64()*float64(wait-wait/2))
		if retryAfter > 0 {
			wait = min(retryAfter, maxRetryAfterHonored)
		}
		if !retry.Sleep(ctx, wait) {
			return nil, err
		}
	}
}

func (o *OpenAI) attempt(ctx context.Context, body []byte, n int) ([][]float32, time.Duration, error) {
	actx, cancel := context.WithTimeout(ctx, o.cfg.Timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(actx, http.MethodPost, o.url, bytes.NewReader(body))
	if err != nil {
		return nil, 0, &Error{Msg: "building the request", Err: err}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if o.cfg.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+o.cfg.APIKey)
	}
	resp, err := o.client.Do(hreq)
	if err != nil {
		// Transport errors and attempt timeouts are retryable; the caller's
		// own cancellation is not.
		return nil, 0, &Error{Msg: "request failed", Retryable: ctx.Err() == nil, Err: redact(err, o.cfg.APIKey)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodyBytes))
		retryable := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 || resp.StatusCode == http.StatusRequestTimeout
		return nil, llm.ParseRetryAfter(resp.Header, time.Now()), &Error{Status: resp.StatusCode, Retryable: retryable, Msg: errorMessage(data)}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, 0, &Error{Msg: "reading the response", Retryable: ctx.Err() == nil, Err: err}
	}
	if len(data) > maxResponseBytes {
		return nil, 0, &Error{Msg: fmt.Sprintf("response larger than %d bytes", maxResponseBytes)}
	}
	vecs, err := ParseResponse(data, n, o.cfg.Dims)
	if err != nil {
		return nil, 0, &Error{Msg: "invalid response", Err: err}
	}
	return vecs, 0, nil
}

func redact(err error, key string) error {
	if key == "" || !strings.Contains(err.Error(), key) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), key, "[REDACTED]"))
}

// errorMessage extracts {"error":{"message":…}} or returns the body's start.
func errorMessage(data []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	s := strings.TrimSpace(string(data))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	if s == "" {
		s = "no error message"
	}
	return s
}

type embeddingsResponse struct {
	Data []struct {
		Index     *int            `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
}

// ParseResponse decodes an /embeddings response body holding n vectors of
// dims floats each, puts them in input order (by "index") and
// L2-normalises them. It refuses missing, duplicate or out-of-range
// indexes, base64 or non-numeric embeddings, wrong lengths, non-finite and
// all-zero vectors.
func ParseResponse(data []byte, n, dims int) ([][]float32, error) {
	var r embeddingsResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	if len(r.Data) != n {
		return nil, fmt.Errorf("%d embeddings for %d inputs", len(r.Data), n)
	}
	out := make([][]float32, n)
	for i, d := range r.Data {
		idx := i
		if d.Index != nil {
			idx = *d.Index
		}
		if idx < 0 || idx >= n {
			return nil, fmt.Errorf("data[%d].index %d out of range", i, idx)
		}
		if out[idx] != nil {
			return nil, fmt.Errorf("data[%d].index %d repeated", i, idx)
		}
		var raw []float64
		if err := json.Unmarshal(d.Embedding, &raw); err != nil {
			return nil, fmt.Errorf("data[%d].embedding is not an array of numbers (encoding_format float): %w", i, err)
		}
		if len(raw) != dims {
			return nil, fmt.Errorf("data[%d].embedding has %d dimensions, want %d", i, len(raw), dims)
		}
		v, err := normalize(raw)
		if err != nil {
			return nil, fmt.Errorf("data[%d].embedding: %w", i, err)
		}
		out[idx] = v
	}
	return out, nil
}

func normalize(raw []float64) ([]float32, error) {
	var norm float64
	for _, x := range raw {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, errors.New("not finite")
		}
		norm += x * x
	}
	norm = math.Sqrt(norm)
	if norm == 0 || math.IsInf(norm, 0) {
		return nil, errors.New("zero or overflowing length")
	}
	v := make([]float32, len(raw))
	for i, x := range raw {
		v[i] = float32(x / norm)
	}
	return v, nil
}

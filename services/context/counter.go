package contextsvc

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/lru"
)

// TokenCounter is what the context service needs from the tokens service;
// baagentv1.TokensServiceClient satisfies it.
type TokenCounter interface {
	CountMessages(ctx context.Context, in *baagentv1.CountMessagesRequest, opts ...grpc.CallOption) (*baagentv1.CountMessagesResponse, error)
	GetModelInfo(ctx context.Context, in *baagentv1.GetModelInfoRequest, opts ...grpc.CallOption) (*baagentv1.GetModelInfoResponse, error)
}

// Bounds of one CountMessages call, well inside the tokens service's limits
// (10,000 messages, 16 MiB gRPC messages).
const (
	countBatchMessages = 1000
	countBatchBytes    = 8 << 20
)

// modelInfoTTL is how long a model's metadata is reused before it is asked
// for again (the tokens service may reload its registry).
const modelInfoTTL = 5 * time.Minute

// counter counts messages through the tokens service, caching raw counts by
// encoding and content hash, so that a rebuilt window counts only what it
// has not seen: after one append, one message.
type counter struct {
	svc    TokenCounter
	counts *lru.Cache[countKey, int64]
	models *lru.Cache[string, *baagentv1.ModelInfo]
	tools  *lru.Cache[countKey, toolsCount]
	// fingerprints holds tools counts by the caller's fingerprint
	// (fingerprint.go).
	fingerprints *lru.Cache[countKey, toolsCount]
	m            *metrics
}

type countKey struct {
	encoding string
	hash     contentHash
}

// toolsCount is the fixed part of a request: tool schemas and reply priming.
type toolsCount struct {
	tools, priming int64
}

func newCounter(svc TokenCounter, entries int, m *metrics) *counter {
	return &counter{
		svc:          svc,
		counts:       lru.New[countKey, int64](lru.Options{MaxEntries: entries}),
		models:       lru.New[string, *baagentv1.ModelInfo](lru.Options{MaxEntries: 256}),
		tools:        lru.New[countKey, toolsCount](lru.Options{MaxEntries: 256}),
		fingerprints: lru.New[countKey, toolsCount](lru.Options{MaxEntries: maxFingerprints}),
		m:            m,
	}
}

// modelInfo returns a model's counting rules and metadata.
func (c *counter) modelInfo(ctx context.Context, model string) (*baagentv1.ModelInfo, error) {
	if mi, ok := c.models.Get(model); ok {
		return mi, nil
	}
	resp, err := c.svc.GetModelInfo(ctx, &baagentv1.GetModelInfoRequest{Model: model})
	if err != nil {
		return nil, fmt.Errorf("tokens service GetModelInfo(%q): %w", model, err)
	}
	mi := resp.GetInfo()
	if mi.GetEncodingName() == "" || mi.GetMetadata().GetContextLength() <= 0 {
		return nil, fmt.Errorf("tokens service GetModelInfo(%q): no encoding or context length", model)
	}
	c.models.Put(model, mi, 0, modelInfoTTL)
	return mi, nil
}

// countable is a message to count with its content hash.
type countable struct {
	msg  *baagentv1.ChatMessage
	hash contentHash
}

// rawCounts returns the raw count (with per-message overhead, before any
// margin) of each message for model, asking the tokens service only for
// those not cached.
func (c *counter) rawCounts(ctx context.Context, model string, mi *baagentv1.ModelInfo, msgs []countable) ([]int64, error) {
	out := make([]int64, len(msgs))
	var missing []int
	for i, m := range msgs {
		if n, ok := c.counts.Get(countKey{mi.GetEncodingName(), m.hash}); ok {
			out[i] = n
			continue
		}
		missing = append(missing, i)
	}
	c.m.countCacheHits.Add(float64(len(msgs) - len(missing)))
	c.m.countCacheMisses.Add(float64(len(missing)))
	for start := 0; start < len(missing); {
		end, bytes := start, 0
		for end < len(missing) && end-start < countBatchMessages {
			sz := proto.Size(msgs[missing[end]].msg)
			if end > start && bytes+sz > countBatchBytes {
				break
			}
			bytes += sz
			end++
		}
		req := &baagentv1.CountMessagesRequest{Model: model, Messages: make([]*baagentv1.ChatMessage, 0, end-start)}
		for _, i := range missing[start:end] {
			req.Messages = append(req.Messages, countingView(msgs[i].msg))
		}
		resp, err := c.svc.CountMessages(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("tokens service CountMessages: %w", err)
		}
		if len(resp.GetMessageRawCounts()) != end-start {
			return nil, fmt.Errorf("tokens service CountMessages: %d counts for %d messages", len(resp.GetMessageRawCounts()), end-start)
		}
		for j, i := range missing[start:end] {
			n := resp.GetMessageRawCounts()[j]
			out[i] = n
			c.counts.Put(countKey{mi.GetEncodingName(), msgs[i].hash}, n, 0, 0)
		}
		start = end
	}
	return out, nil
}

// countingView is the message as the tokens service needs it: the counted
// fields only (smaller requests, and nothing it would validate needlessly).
func countingView(m *baagentv1.ChatMessage) *baagentv1.ChatMessage {
	return &baagentv1.ChatMessage{
		Role:       m.GetRole(),
		Content:    m.GetContent(),
		Name:       m.GetName(),
		ToolCalls:  m.GetToolCalls(),
		ToolCallId: m.GetToolCallId(),
	}
}

// fixedCount returns the raw count of the tool schemas and the reply
// priming for model.
func (c *counter) fixedCount(ctx context.Context, model string, mi *baagentv1.ModelInfo, tools []*baagentv1.ToolSchema) (toolsCount, error) {
	h := sha256.New()
	h.Write([]byte(model))
	for _, t := range tools {
		b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(t)
		h.Write(strconv.AppendInt(nil, int64(len(b)), 10))
		h.Write(b)
	}
	var key countKey
	key.encoding = mi.GetEncodingName()
	h.Sum(key.hash[:0])
	if tc, ok := c.tools.Get(key); ok {
		return tc, nil
	}
	resp, err := c.svc.CountMessages(ctx, &baagentv1.CountMessagesRequest{Model: model, Tools: tools})
	if err != nil {
		return toolsCount{}, fmt.Errorf("tokens service CountMessages (tools): %w", err)
	}
	tc := toolsCount{tools: resp.GetToolsRawCount(), priming: resp.GetReplyPrimingTokens()}
	c.tools.Put(key, tc, 0, modelInfoTTL)
	return tc, nil
}

func timestampNow(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

package orchestrator

import (
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/baagent/baagent/core/convmetrics"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// convMetrics accumulates the ConversationMetrics of one run (the
// collector scoped to a run: a run record carries its own
// metrics, so there is no process-wide map to bound). Safe for concurrent
// use by parallel tool calls.
type convMetrics struct {
	mu sync.Mutex
	m  *baagentv1.ConversationMetrics
}

func newConvMetrics(conversationID string, start time.Time) *convMetrics {
	return &convMetrics{m: &baagentv1.ConversationMetrics{
		ConversationId: conversationID,
		StartTime:      timestamppb.New(start),
	}}
}

// recordModelCall adds one model call's usage and cost.
func (c *convMetrics) recordModelCall(u *baagentv1.Usage, costUSD float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m.LlmCalls++
	c.m.TotalInputTokens += u.GetPromptTokens()
	c.m.TotalOutputTokens += u.GetCompletionTokens()
	c.m.TotalTokens = c.m.TotalInputTokens + c.m.TotalOutputTokens
	c.m.TotalCostUsd += costUSD
}

// recordToolCall records one tool call's metrics.
func (c *convMetrics) recordToolCall(t *baagentv1.ToolMetrics) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m.ToolCalls = append(c.m.ToolCalls, t)
	if t.GetSuccess() {
		c.m.SuccessfulCalls++
	} else {
		c.m.FailedCalls++
	}
	if t.GetRetryCount() > 0 {
		c.m.RetriedCalls++
	}
}

// recordSkill counts an activation of name.
func (c *convMetrics) recordSkill(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m.SkillActivations++
	if !slices.Contains(c.m.UniqueSkills, name) {
		c.m.UniqueSkills = append(c.m.UniqueSkills, name)
	}
}

// recordWindow notes the message count of the latest window and whether it
// was compressed.
func (c *convMetrics) recordWindow(messages int, compressed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m.MessagesCount = int32(messages)
	if compressed {
		c.m.CompressionEvents++
	}
}

// snapshot returns a copy with end time and duration as of now (the run's
// end, once it has ended).
func (c *convMetrics) snapshot(now time.Time, ended bool) *baagentv1.ConversationMetrics {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := proto.Clone(c.m).(*baagentv1.ConversationMetrics)
	out.ToolStats = convmetrics.ToolStats(out.ToolCalls)
	out.TotalDurationMs = float64(now.Sub(c.m.GetStartTime().AsTime()).Microseconds()) / 1000
	if ended {
		out.EndTime = timestamppb.New(now)
	}
	return out
}

// Package convmetrics accumulates the ConversationMetrics of one run (a
// metrics collector scoped to a run: a run record carries
// its own metrics, so there is no process-wide map to bound). The report
// rendered from them is core/convmetrics.
package convmetrics

import (
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	report "github.com/baagent/baagent/core/convmetrics"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Accumulator is one run's metrics so far. Safe for concurrent use by
// parallel tool calls.
type Accumulator struct {
	mu sync.Mutex
	m  *baagentv1.ConversationMetrics
}

// New starts the metrics of a run of the conversation starting now.
func New(conversationID string, start time.Time) *Accumulator {
	return &Accumulator{m: &baagentv1.ConversationMetrics{
		ConversationId: conversationID,
		StartTime:      timestamppb.New(start),
	}}
}

// Restore goes on from metrics a checkpoint holds; m is not copied.
func Restore(m *baagentv1.ConversationMetrics) *Accumulator {
	return &Accumulator{m: m}
}

// MaxCostModels bounds the models of cost_by_model; the cost of any further
// model of the run is added under [OtherModel].
const MaxCostModels = 32

// OtherModel is the cost_by_model key beyond [MaxCostModels] models.
const OtherModel = "other"

// RecordModelCall adds one call of model: its usage and, when its price is
// known, its cost (to the total and to the model's); an unpriced call is
// counted in unpriced_calls instead, so a total never passes for complete
// when it is not.
func (c *Accumulator) RecordModelCall(model string, u *baagentv1.Usage, costUSD float64, priced bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m.LlmCalls++
	c.m.TotalInputTokens += u.GetPromptTokens()
	c.m.TotalOutputTokens += u.GetCompletionTokens()
	c.m.TotalTokens = c.m.TotalInputTokens + c.m.TotalOutputTokens
	if !priced {
		c.m.UnpricedCalls++
		return
	}
	c.m.TotalCostUsd += costUSD
	if c.m.CostByModel == nil {
		c.m.CostByModel = map[string]float64{}
	}
	if _, ok := c.m.CostByModel[model]; !ok && len(c.m.CostByModel) >= MaxCostModels {
		model = OtherModel
	}
	c.m.CostByModel[model] += costUSD
}

// RecordToolCall adds one tool call to the run's metrics.
func (c *Accumulator) RecordToolCall(t *baagentv1.ToolMetrics) {
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

// RecordSkill counts an activation of name.
func (c *Accumulator) RecordSkill(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m.SkillActivations++
	if !slices.Contains(c.m.UniqueSkills, name) {
		c.m.UniqueSkills = append(c.m.UniqueSkills, name)
	}
}

// RecordWindow notes the message count of the latest window and whether
// it was compressed.
func (c *Accumulator) RecordWindow(messages int, compressed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m.MessagesCount = int32(messages)
	if compressed {
		c.m.CompressionEvents++
	}
}

// Snapshot returns a copy with end time and duration as of now (the run's
// end, once it has ended).
func (c *Accumulator) Snapshot(now time.Time, ended bool) *baagentv1.ConversationMetrics {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := proto.Clone(c.m).(*baagentv1.ConversationMetrics)
	out.ToolStats = report.ToolStats(out.ToolCalls)
	out.TotalDurationMs = float64(now.Sub(c.m.GetStartTime().AsTime()).Microseconds()) / 1000
	if ended {
		out.EndTime = timestamppb.New(now)
	}
	return out
}

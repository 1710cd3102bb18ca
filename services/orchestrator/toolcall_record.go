package orchestrator

import (
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
	"github.com/baagent/baagent/services/orchestrator/internal/protoenc"
)

// callResultRecord fills rec's result fields from res.
func callResultRecord(rec *checkpoint.ToolRecord, res *callResult) {
	rec.Message = protoenc.Marshal(res.msg)
	rec.Observe = protoenc.Marshal(res.observe)
	rec.Metrics = protoenc.Marshal(res.metrics)
	rec.Inject = nil
	for _, m := range res.inject {
		rec.Inject = append(rec.Inject, protoenc.Marshal(m))
	}
	rec.DurationMs = res.observe.GetDurationMs()
	rec.CompletedAt = time.Now()
	rec.Status = checkpoint.ToolSuccess
	if !res.observe.GetSuccess() {
		rec.Status = checkpoint.ToolFailure
	}
}

// restoredResult rebuilds a finished call's result from its record.
func restoredResult(rec checkpoint.ToolRecord) (*callResult, error) {
	msg, err := protoenc.Unmarshal[baagentv1.ChatMessage](rec.Message)
	if err != nil {
		return nil, err
	}
	obs, err := protoenc.Unmarshal[baagentv1.ObservePayload](rec.Observe)
	if err != nil {
		return nil, err
	}
	met, err := protoenc.Unmarshal[baagentv1.ToolMetrics](rec.Metrics)
	if err != nil {
		return nil, err
	}
	res := &callResult{msg: msg, observe: obs, metrics: met}
	for _, b := range rec.Inject {
		m, err := protoenc.Unmarshal[baagentv1.ChatMessage](b)
		if err != nil {
			return nil, err
		}
		res.inject = append(res.inject, m)
	}
	return res, nil
}

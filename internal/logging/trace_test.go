package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// Records logged with a traced context carry trace_id and span_id; others
// do not, and a logger that already names the trace is left alone.
func TestTraceIDsInLogs(t *testing.T) {
	t.Parallel()

	var buf bytes.Buffer
	log, err := New(&buf, "info")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 1},
		SpanID:     trace.SpanID{0x00, 0xf0, 2},
		TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	log.InfoContext(ctx, "traced")
	log.Info("plain")
	log.With("trace_id", "mine").InfoContext(ctx, "own")
	log.WithGroup("g").InfoContext(ctx, "grouped", "k", "v")

	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 4 {
		t.Fatalf("%d lines", len(lines))
	}
	var rec []map[string]any
	for _, l := range lines {
		m := map[string]any{}
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		rec = append(rec, m)
	}
	if rec[0]["trace_id"] != sc.TraceID().String() || rec[0]["span_id"] != sc.SpanID().String() {
		t.Errorf("traced record %v", rec[0])
	}
	if _, ok := rec[1]["trace_id"]; ok {
		t.Errorf("untraced record %v", rec[1])
	}
	if rec[2]["trace_id"] != "mine" || bytes.Count(lines[2], []byte("trace_id")) != 1 {
		t.Errorf("own trace_id record %s", lines[2])
	}
	if g, _ := rec[3]["g"].(map[string]any); g["trace_id"] != sc.TraceID().String() {
		t.Errorf("grouped record %v", rec[3])
	}
}

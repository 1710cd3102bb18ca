// Package logging builds the structured JSON logger every baagent process
// uses, so that logs from all services share one machine-readable format.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// Levels lists the accepted level names, for flag help and error messages.
const Levels = "debug|info|warn|error"

// ParseLevel turns a level name (case-insensitive) into a slog.Level. It
// rejects anything else rather than guessing, so a typo in a flag or an
// environment variable fails at startup instead of silently hiding logs.
func ParseLevel(level string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(level)) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	default:
		return 0, fmt.Errorf("invalid log level %q: want one of %s", level, Levels)
	}
}

// New returns a logger writing one JSON object per record to w, at the given
// level or above; records logged with a context that carries a span get its
// trace_id and span_id (WithTrace). The caller owns the logger and passes it
// down explicitly; nothing here touches slog.Default.
func New(w io.Writer, level string) (*slog.Logger, error) {
	if w == nil {
		return nil, fmt.Errorf("logging: nil writer")
	}
	lvl, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	return slog.New(WithTrace(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl}))), nil
}

// traceHandler adds the trace_id and span_id of the record's context to
// every record logged with a context that carries a valid span, so a log
// line leads to its trace. Loggers that already carry a trace_id attribute
// (a run's logger) are left alone.
type traceHandler struct {
	next slog.Handler
	has  bool // a With attribute named trace_id is present
}

// WithTrace wraps h so that records logged with a context carrying a valid
// span get trace_id and span_id attributes.
func WithTrace(h slog.Handler) slog.Handler {
	if _, ok := h.(*traceHandler); ok {
		return h
	}
	return &traceHandler{next: h}
}

func (h *traceHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if !h.has && ctx != nil {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			r = r.Clone()
			r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
		}
	}
	return h.next.Handle(ctx, r)
}

func (h *traceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	has := h.has
	for _, a := range attrs {
		has = has || a.Key == "trace_id"
	}
	return &traceHandler{next: h.next.WithAttrs(attrs), has: has}
}

func (h *traceHandler) WithGroup(name string) slog.Handler {
	return &traceHandler{next: h.next.WithGroup(name), has: h.has}
}

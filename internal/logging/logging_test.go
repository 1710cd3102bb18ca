package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

func TestNewWritesJSON(t *testing.T) {
	t.Parallel()

	var buf bytes.Buffer
	log, err := New(&buf, "info")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	log.Debug("hidden")
	log.Info("hello", "k", 1)

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want 1 line (debug filtered), got %d: %q", len(lines), buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatalf("output is not JSON: %v: %q", err, lines[0])
	}
	if rec["level"] != "INFO" || rec["msg"] != "hello" || rec["k"] != float64(1) {
		t.Fatalf("unexpected record: %v", rec)
	}
}

func TestParseLevel(t *testing.T) {
	t.Parallel()

	for in, want := range map[string]slog.Level{
		"debug": slog.LevelDebug, "INFO": slog.LevelInfo, " warn ": slog.LevelWarn, //nolint:gocritic // surrounding spaces are trimmed
		"Error": slog.LevelError,
	} {
		got, err := ParseLevel(in)
		if err != nil || got != want {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

func TestBadLevel(t *testing.T) {
	t.Parallel()

	for _, in := range []string{"", "verbose", "warning", "trace"} {
		_, err := New(&bytes.Buffer{}, in)
		if err == nil {
			t.Fatalf("New(level=%q): want error", in)
		}
		if !strings.Contains(err.Error(), `"`+in+`"`) || !strings.Contains(err.Error(), Levels) {
			t.Errorf("error should name the bad value and the choices: %v", err)
		}
	}
}

func TestNilWriter(t *testing.T) {
	t.Parallel()

	if _, err := New(nil, "info"); err == nil {
		t.Fatal("want error for nil writer")
	}
}

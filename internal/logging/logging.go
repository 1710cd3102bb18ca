// Package logging builds the structured JSON logger every baagent process
// uses, so that logs from all services share one machine-readable format.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
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
// level or above. The caller owns the logger and passes it down explicitly;
// nothing here touches slog.Default.
func New(w io.Writer, level string) (*slog.Logger, error) {
	if w == nil {
		return nil, fmt.Errorf("logging: nil writer")
	}
	lvl, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})), nil
}

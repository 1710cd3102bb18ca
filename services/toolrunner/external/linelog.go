package external

import (
	"bytes"
	"log/slog"
	"sync"
	"unicode/utf8"
)

// maxLogLine bounds one logged line of a child's stderr; the rest of an
// over-long line is dropped.
const maxLogLine = 2048

// lineLogger is an io.Writer that logs each line written to it, for a child
// process's stderr. Its buffer holds at most one line of maxLogLine bytes.
type lineLogger struct {
	log *slog.Logger
	msg string

	mu       sync.Mutex
	buf      []byte
	dropping bool // the current line was too long and is being skipped
}

func newLineLogger(log *slog.Logger, msg string) *lineLogger {
	return &lineLogger{log: log, msg: msg}
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !l.dropping {
			room := maxLogLine - len(l.buf)
			if len(chunk) > room {
				l.buf = append(l.buf, chunk[:room]...)
				l.emit(true)
				l.dropping = true
			} else {
				l.buf = append(l.buf, chunk...)
			}
		}
		if i < 0 {
			break
		}
		if !l.dropping {
			l.emit(false)
		}
		l.dropping = false
		p = p[i+1:]
	}
	return n, nil
}

func (l *lineLogger) emit(truncated bool) {
	line := bytes.TrimRight(l.buf, "\r")
	if len(line) > 0 {
		s := string(line)
		if !utf8.ValidString(s) {
			s = string(bytes.ToValidUTF8(line, []byte("\uFFFD")))
		}
		l.log.Info(l.msg, "line", s, "truncated", truncated)
	}
	l.buf = l.buf[:0]
}

package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/baagent/baagent/internal/validate"
	"github.com/baagent/baagent/services/gateway/internal/hub"
)

// Server-Sent Events: GET /v1/runs/{run_id}/events. Each event is
//
//	id: <cursor>
//	event: <type>
//	data: <envelope JSON>
//
// Resume with the Last-Event-ID header (sent by EventSource on its own
// reconnects), else ?cursor=; cursor=earliest replays everything retained;
// none streams live. A comment line is sent every Heartbeat. After the
// terminal event the response ends; a reconnect after it gets 204, which
// stops EventSource from retrying. A client cut for falling behind gets an
// `event: slow_consumer` with `retry:` and reconnects from its cursor.

// sseFirstWait is how long the handler waits for a first event before
// committing to a 200 response, so a stream that is already over can be
// answered 204.
const sseFirstWait = 50 * time.Millisecond

// sseRetryMillis is the reconnect delay suggested to EventSource.
var sseRetryMillis = strconv.FormatInt(hub.RetryAfter.Milliseconds(), 10)

func (s *Server) httpSSE(w http.ResponseWriter, r *http.Request) {
	tenant, err := s.httpTenant(r, true)
	if err != nil {
		writeError(w, err)
		return
	}
	runID, cursor, err := streamParams(r)
	if err != nil {
		writeError(w, err)
		return
	}
	sub, err := s.openStream(r.Context(), tenant, runID, cursor, hub.TransportSSE)
	if err != nil {
		writeError(w, err)
		return
	}
	defer sub.Close()
	s.pumpSSE(r.Context(), w, sub, cursor)
}

// streamParams reads the run id and the resume cursor (Last-Event-ID wins
// over ?cursor=, since EventSource sends it on reconnects to the original
// URL).
func streamParams(r *http.Request) (runID, cursor string, err error) {
	runID = r.PathValue("run_id")
	cursor = r.URL.Query().Get("cursor")
	field := "cursor"
	if h := r.Header.Get("Last-Event-ID"); h != "" {
		cursor, field = h, "Last-Event-ID"
	}
	var e validate.Errors
	validate.RunID(&e, "run_id", runID)
	validate.Optional(&e, field, cursor, validate.Cursor)
	return runID, cursor, e.Err()
}

func (s *Server) pumpSSE(ctx context.Context, w http.ResponseWriter, sub *hub.Subscription, cursor string) {
	rc := http.NewResponseController(w)
	first := time.NewTimer(sseFirstWait)
	defer first.Stop()
	heartbeat := time.NewTicker(s.opts.Heartbeat)
	defer heartbeat.Stop()
	started := false
	start := func() bool {
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
		started = true
		return s.sseWrite(rc, w, sub, []byte("retry: "+sseRetryMillis+"\n: stream open\n\n"))
	}
	var batch []hub.Item // allocated with the first event: idle clients stay small
	for {
		tick := heartbeat.C
		if !started {
			tick = first.C
		}
		it, ticked, err := sub.NextOrTick(ctx, tick)
		switch {
		case ticked && !started:
			if !start() {
				return
			}
			continue
		case ticked:
			if !s.sseWrite(rc, w, sub, []byte(": heartbeat\n\n")) {
				return
			}
			continue
		case errors.Is(err, io.EOF):
			if !started {
				w.WriteHeader(http.StatusNoContent)
			}
			return
		case hub.IsSlowConsumer(err):
			if !started && !start() {
				return
			}
			s.sseSlowConsumer(rc, w, cursor)
			return
		case err != nil:
			if !started && ctx.Err() == nil {
				writeError(w, errUnavailable(err))
			}
			return
		}
		if !started && !start() {
			return
		}
		// Write every event already available, then flush once: a client
		// catching up, or a burst, costs one deadline and one flush (and
		// usually one syscall) instead of one per event. Each frame is the
		// entry's shared rendering.
		if batch == nil {
			batch = make([]hub.Item, 0, sseBatchEvents)
		}
		batch = append(batch[:0], it)
		size := len(it.SSE)
		for size < sseBatchBytes && len(batch) < cap(batch) {
			more, ok := sub.TryNext()
			if !ok {
				break
			}
			batch = append(batch, more)
			size += len(more.SSE)
		}
		if !s.sseWriteBatch(rc, w, sub, batch) {
			return
		}
		for _, it := range batch {
			sub.Delivered(it)
			if it.Cursor != "" {
				cursor = it.Cursor
			}
		}
		clear(batch) // do not keep entries the feed has trimmed alive
	}
}

// Bounds of one SSE write: enough to catch up quickly, small enough that
// the write deadline stays meaningful.
const (
	sseBatchBytes  = 64 << 10
	sseBatchEvents = 256
)

// sseWrite writes and flushes within WriteTimeout; false means the client
// is gone or too slow (counted as a slow consumer).
func (s *Server) sseWrite(rc *http.ResponseController, w http.ResponseWriter, sub *hub.Subscription, p []byte) bool {
	_ = rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
	_, err := w.Write(p)
	if err == nil {
		err = rc.Flush()
	}
	return s.sseWritten(sub, err)
}

// sseWriteBatch writes the frames of items and flushes once, within one
// WriteTimeout.
func (s *Server) sseWriteBatch(rc *http.ResponseController, w http.ResponseWriter, sub *hub.Subscription, items []hub.Item) bool {
	_ = rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
	var err error
	for _, it := range items {
		if _, err = w.Write(it.SSE); err != nil {
			break
		}
	}
	if err == nil {
		err = rc.Flush()
	}
	return s.sseWritten(sub, err)
}

func (s *Server) sseWritten(sub *hub.Subscription, err error) bool {
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			sub.WriteTimedOut()
		}
		return false
	}
	return true
}

// sseSlowConsumer tells the client why it is cut and when to come back.
func (s *Server) sseSlowConsumer(rc *http.ResponseController, w http.ResponseWriter, cursor string) {
	_ = rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
	c, _ := json.Marshal(cursor)
	body := `{"reason":"slow_consumer","retry_after_ms":` + sseRetryMillis + `,"cursor":` + string(c) + `}`
	_, _ = io.WriteString(w, "retry: "+sseRetryMillis+"\nevent: "+SlowConsumerReason+"\ndata: "+body+"\n\n")
	_ = rc.Flush()
}

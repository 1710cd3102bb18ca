package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
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
// Over HTTP/1.1 the response is sent with `Connection: close` and ends
// when the connection does (see sseOut); over HTTP/2 it is a normal
// streamed response.

// appendSSE renders e as one SSE frame (id, event and data lines and the
// blank line). JSON from protojson is one line, and the hub builds or
// validates an entry's type and cursor, which never hold a newline, so
// the frame cannot be split.
func appendSSE(b []byte, e *hub.Entry) []byte {
	b = slices.Grow(b, len(e.Cursor)+len(e.Type)+len(e.JSON)+24)
	if e.Cursor != "" {
		b = append(b, "id: "...)
		b = append(b, e.Cursor...)
		b = append(b, '\n')
	}
	b = append(b, "event: "...)
	b = append(b, e.Type...)
	b = append(b, "\ndata: "...)
	b = append(b, e.JSON...)
	return append(b, '\n', '\n')
}

// sseFirstWait is how long the handler waits for a first event before
// committing to a 200 response, so a stream that is already over can be
// answered 204.
const sseFirstWait = 50 * time.Millisecond

// sseRetryMillis is the reconnect delay suggested to EventSource.
var sseRetryMillis = strconv.FormatInt(hub.RetryAfter.Milliseconds(), 10)

func (s *Server) httpSSE(w http.ResponseWriter, r *http.Request) {
	c, runID, cursor, err := s.streamRequest(r)
	if err != nil {
		writeError(w, err)
		return
	}
	done, err := s.hold(c, s.streamSlots, apiHTTP)
	if err != nil {
		writeError(w, err)
		return
	}
	defer done()
	if !s.streams.add() {
		writeError(w, errUnavailable(hub.ErrClosed))
		return
	}
	defer s.streams.done()
	sub, err := s.openStream(r.Context(), c.tenant, runID, cursor, hub.TransportSSE)
	if err != nil {
		writeError(w, err)
		return
	}
	defer sub.Close()
	s.pumpSSE(r.Context(), w, r, sub, cursor, nil)
}

// httpStartRunStream is POST /v1/runs?stream=true: StartRunStream as SSE.
// The response is an `event: run` frame whose data is the run (QUEUED),
// then the run's events exactly as GET /v1/runs/{run_id}/events?cursor=
// earliest sends them. The stream slot is taken before the run starts. If
// the stream cannot be opened once the run has started, the error names
// the run, so the caller can stream it with GET .../events?cursor=earliest.
func (s *Server) httpStartRunStream(w http.ResponseWriter, r *http.Request) {
	c, err := s.httpCaller(r, false)
	if err != nil {
		writeError(w, err)
		return
	}
	done, err := s.hold(c, s.streamSlots, apiHTTP)
	if err != nil {
		writeError(w, err)
		return
	}
	defer done()
	req := &baagentv1.StartRunRequest{}
	if err := s.readBody(w, r, req); err != nil {
		writeError(w, err)
		return
	}
	if err := validateStartRun(req); err != nil {
		writeError(w, err)
		return
	}
	if err := s.ready(); err != nil {
		writeError(w, err)
		return
	}
	if s.hub == nil {
		writeError(w, status.Error(codes.Unavailable, "event streaming needs NATS JetStream, which this gateway is not connected to"))
		return
	}
	if !s.streams.add() {
		writeError(w, errUnavailable(hub.ErrClosed))
		return
	}
	defer s.streams.done()
	resp, err := s.startRun(withKeyID(r.Context(), c), c.tenant, req)
	if err != nil {
		writeError(w, err)
		return
	}
	run := resp.GetRun()
	sub, err := s.openStream(r.Context(), c.tenant, run.GetRunId(), hub.Earliest, hub.TransportSSE)
	if err != nil {
		writeError(w, status.Errorf(status.Code(err), "run %s started, but its event stream failed: %s; stream it with GET /v1/runs/%s/events?cursor=earliest",
			run.GetRunId(), status.Convert(err).Message(), run.GetRunId()))
		return
	}
	defer sub.Close()
	data, err := hub.JSONOptions.Marshal(run)
	if err != nil {
		writeError(w, status.Errorf(codes.Internal, "run %s started, but it could not be encoded: %v", run.GetRunId(), err))
		return
	}
	frame := make([]byte, 0, len(data)+20)
	frame = append(frame, "event: run\ndata: "...)
	frame = append(frame, data...)
	frame = append(frame, '\n', '\n')
	s.pumpSSE(r.Context(), w, r, sub, hub.Earliest, frame)
}

// streamRequest authenticates an SSE or WebSocket stream request (a
// ?token= stream token is accepted), then reads the run id and the resume
// cursor (Last-Event-ID wins over ?cursor=, since EventSource sends it on
// reconnects to the original URL).
func (s *Server) streamRequest(r *http.Request) (c caller, runID, cursor string, err error) {
	if c, err = s.httpCaller(r, true); err != nil {
		return caller{}, "", "", err
	}
	runID = r.PathValue("run_id")
	cursor = r.URL.Query().Get("cursor")
	field := "cursor"
	if h := r.Header.Get("Last-Event-ID"); h != "" {
		cursor, field = h, "Last-Event-ID"
	}
	var e validate.Errors
	validate.RunID(&e, "run_id", runID)
	validate.Optional(&e, field, cursor, validate.Cursor)
	return c, runID, cursor, e.Err()
}

// pumpSSE writes the subscription to w as SSE. A non-empty preamble (the
// `run` frame of POST /v1/runs?stream=true) is written first, and the 200
// response starts at once instead of after a first event.
func (s *Server) pumpSSE(ctx context.Context, w http.ResponseWriter, r *http.Request, sub *hub.Subscription, cursor string, preamble []byte) {
	first := time.NewTimer(sseFirstWait)
	defer first.Stop()
	heartbeat := time.NewTicker(s.opts.Heartbeat)
	defer heartbeat.Stop()
	var out *sseOut // set once the 200 response has started
	defer func() {
		if out != nil {
			out.close()
		}
	}()
	start := func() bool {
		out = s.startSSE(ctx, w, r)
		if !s.sseWritten(sub, out.write(append([]byte("retry: "+sseRetryMillis+"\n: stream open\n\n"), preamble...))) {
			return false
		}
		if out.direct() && !s.opts.noDirect {
			out.enableDirect(sub)
		}
		return true
	}
	if len(preamble) > 0 && !start() {
		return
	}
	var batch []hub.Item // grown with the first events: idle clients stay small
	for {
		tick := heartbeat.C
		if out == nil {
			tick = first.C
		}
		ctx := ctx
		if out != nil {
			ctx = out.ctx
		}
		var ticked bool
		var err error
		batch, ticked, err = sub.NextBatch(ctx, tick, batch[:0], sseBatchEvents, sseBatchBytes)
		switch {
		case ticked && out == nil:
			if !start() {
				return
			}
			continue
		case ticked:
			if !s.sseWritten(sub, out.write([]byte(": heartbeat\n\n"))) {
				return
			}
			continue
		case errors.Is(err, io.EOF):
			if out == nil {
				w.WriteHeader(http.StatusNoContent)
			}
			return
		case hub.IsSlowConsumer(err):
			if out == nil && !start() {
				return
			}
			s.sseSlowConsumer(out, resumeCursor(sub, cursor))
			return
		case err != nil:
			if out == nil && ctx.Err() == nil {
				writeError(w, errUnavailable(err))
			}
			return
		}
		if out == nil && !start() {
			return
		}
		// Every event already available goes out in one write (writev on
		// a hijacked connection) under one deadline: a client catching up,
		// or a burst, costs one syscall instead of one per event. Each frame
		// is the entry's shared rendering.
		if !s.sseWritten(sub, out.writeItems(batch)) {
			return
		}
		sub.DeliveredBatch(batch)
		clear(batch) // do not keep entries the feed has trimmed alive
	}
}

// Bounds of one SSE or WebSocket write: enough to catch up quickly, small
// enough that the write deadline stays meaningful.
const (
	sseBatchBytes  = 64 << 10
	sseBatchEvents = 256
)

// resumeCursor is where a cut client should resume: after the last event
// written to it in full, or where it started when none was.
func resumeCursor(sub *hub.Subscription, requested string) string {
	if c := sub.Cursor(); c != "" {
		return c
	}
	return requested
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
func (s *Server) sseSlowConsumer(out *sseOut, cursor string) {
	c, _ := json.Marshal(cursor)
	body := `{"reason":"slow_consumer","retry_after_ms":` + sseRetryMillis + `,"cursor":` + string(c) + `}`
	_ = out.write([]byte("retry: " + sseRetryMillis + "\nevent: " + SlowConsumerReason + "\ndata: " + body + "\n\n"))
}

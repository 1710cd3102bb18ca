package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/baagent/baagent/services/gateway/internal/hub"
)

// WebSocket: GET /v1/runs/{run_id}/ws. Each event is one text message
// holding the JSON envelope (its `cursor` is the resume position). Resume
// with ?cursor= (browsers cannot set headers; authenticate with ?token=).
// Pings every Heartbeat. After the terminal event the server closes with
// 1000; a client cut for falling behind gets 1013 (try again later) with
// reason "slow_consumer retry_after_ms=1000 cursor=<cursor>". Messages the
// client sends are read and discarded.

// wsMaxClientMessage bounds a message the client may send; clients have
// nothing to send but control frames, so this is small.
const wsMaxClientMessage = 64 << 10

func (s *Server) httpWebSocket(w http.ResponseWriter, r *http.Request) {
	// CORS does not apply to WebSockets: a page of any site may open one
	// and read it, with whatever credential its URL carries. So in every
	// mode a browser's handshake must come from an allowed origin (the
	// gateway's own policy, so websocket.Accept's is skipped below).
	if err := s.origins.checkOrigin(r); err != nil {
		s.edge.browserRefused.WithLabelValues(refusedOrigin).Inc()
		writeError(w, err)
		return
	}
	c, err := s.httpCaller(r, true)
	if err != nil {
		writeError(w, err)
		return
	}
	runID, cursor, err := streamParams(r)
	if err != nil {
		writeError(w, err)
		return
	}
	// A request that is no handshake at all is refused before it takes a
	// stream slot; websocket.Accept checks the rest.
	if code, reason := wsNotHandshake(r); code != 0 {
		http.Error(w, "websocket handshake: "+reason, code)
		return
	}
	done, err := s.hold(c, s.streamSlots, apiHTTP)
	if err != nil {
		writeError(w, err)
		return
	}
	defer done()
	sub, err := s.openStream(r.Context(), c.tenant, runID, cursor, hub.TransportWS)
	if err != nil {
		writeError(w, err)
		return
	}
	defer sub.Close()
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		s.log.Debug("websocket upgrade failed", "err", err)
		return
	}
	s.pumpWS(r.Context(), conn, sub, cursor)
}

// wsNotHandshake reports a request that does not ask for a WebSocket: the
// HTTP status to answer and why, or 0.
func wsNotHandshake(r *http.Request) (int, string) {
	switch {
	case r.Method != http.MethodGet:
		return http.StatusMethodNotAllowed, "method must be GET"
	case !headerHasToken(r.Header, "Connection", "upgrade"):
		return http.StatusBadRequest, "missing Connection: Upgrade"
	case !headerHasToken(r.Header, "Upgrade", "websocket"):
		return http.StatusBadRequest, "missing Upgrade: websocket"
	}
	return 0, ""
}

// headerHasToken reports whether a comma-separated header holds token
// (case-insensitively), e.g. "Connection: keep-alive, Upgrade".
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

func (s *Server) pumpWS(ctx context.Context, conn *websocket.Conn, sub *hub.Subscription, cursor string) {
	// The client's frames are read (pings and the close answered, data
	// discarded) until it goes away, which ends the stream.
	conn.SetReadLimit(wsMaxClientMessage)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		defer cancel()
		for {
			_, rd, err := conn.Reader(ctx)
			if err != nil {
				return
			}
			if _, err := io.Copy(io.Discard, rd); err != nil {
				return
			}
		}
	}()
	heartbeat := time.NewTicker(s.opts.Heartbeat)
	defer heartbeat.Stop()
	timeout := s.opts.WriteTimeout
	var batch []hub.Item // grown with the first events: idle clients stay small
	for {
		var ticked bool
		var err error
		batch, ticked, err = sub.NextBatch(ctx, heartbeat.C, batch[:0], sseBatchEvents, sseBatchBytes)
		switch {
		case ticked:
			if wsPing(ctx, conn, timeout) != nil {
				_ = conn.Close(websocket.StatusGoingAway, "")
				return
			}
			continue
		case errors.Is(err, io.EOF):
			_ = conn.Close(websocket.StatusNormalClosure, "run ended")
			return
		case hub.IsSlowConsumer(err):
			_ = conn.Close(websocket.StatusTryAgainLater, slowReason(resumeCursor(sub, cursor)))
			return
		case errors.Is(err, hub.ErrClosed):
			_ = conn.Close(websocket.StatusGoingAway, "gateway shutting down")
			return
		case err != nil:
			_ = conn.Close(websocket.StatusGoingAway, "")
			return
		}
		// One text message per event, every event already available under
		// one deadline.
		if err := wsWrite(ctx, conn, batch, timeout); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				sub.WriteTimedOut()
			}
			_ = conn.Close(websocket.StatusTryAgainLater, slowReason(resumeCursor(sub, cursor)))
			return
		}
		sub.DeliveredBatch(batch)
		clear(batch) // do not keep entries the feed has trimmed alive
	}
}

func wsWrite(ctx context.Context, conn *websocket.Conn, batch []hub.Item, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, it := range batch {
		if err := conn.Write(ctx, websocket.MessageText, it.JSON); err != nil {
			return err
		}
	}
	return nil
}

// wsPing pings the client and waits for its pong within timeout.
func wsPing(ctx context.Context, conn *websocket.Conn, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return conn.Ping(ctx)
}

func slowReason(cursor string) string {
	return SlowConsumerReason + " retry_after_ms=" + sseRetryMillis + " cursor=" + cursor
}

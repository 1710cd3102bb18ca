package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/baagent/baagent/services/gateway/internal/hub"
	"github.com/baagent/baagent/services/gateway/internal/wsock"
)

// WebSocket: GET /v1/runs/{run_id}/ws. Each event is one text message
// holding the JSON envelope (its `cursor` is the resume position). Resume
// with ?cursor= (browsers cannot set headers; authenticate with ?token=).
// Pings every Heartbeat. After the terminal event the server closes with
// 1000; a client cut for falling behind gets 1013 (try again later) with
// reason "slow_consumer retry_after_ms=1000 cursor=<cursor>".

func (s *Server) httpWebSocket(w http.ResponseWriter, r *http.Request) {
	// CORS does not apply to WebSockets: a page of any site may open one
	// and read it, with whatever credential its URL carries. So in every
	// mode a browser's handshake must come from an allowed origin.
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
	var he *wsock.HandshakeError
	if err := wsock.Check(r); errors.As(err, &he) {
		http.Error(w, he.Error(), he.Status)
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
	conn, err := wsock.Upgrade(w, r)
	if err != nil {
		s.log.Debug("websocket upgrade failed", "err", err)
		return
	}
	s.pumpWS(r.Context(), conn, sub, cursor)
}

func (s *Server) pumpWS(ctx context.Context, conn *wsock.Conn, sub *hub.Subscription, cursor string) {
	// The stream also ends when the client closes the socket.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-conn.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	heartbeat := time.NewTicker(s.opts.Heartbeat)
	defer heartbeat.Stop()
	timeout := s.opts.WriteTimeout
	if !s.opts.noDirect && conn.EnableDirect() {
		// The run's fan-out writes to this client itself while it keeps
		// up (see hub.DirectWriter).
		sub.EnableDirect(conn, hub.FormatWS)
	}
	var (
		batch []hub.Item // grown with the first events: idle clients stay small
		msgs  [][]byte
	)
	for {
		var ticked bool
		var err error
		batch, ticked, err = sub.NextBatch(ctx, heartbeat.C, batch[:0], sseBatchEvents, sseBatchBytes)
		switch {
		case ticked:
			if conn.Ping(timeout) != nil {
				_ = conn.Close(wsock.CloseGoingAway, "", timeout)
				return
			}
			continue
		case errors.Is(err, io.EOF):
			_ = conn.Close(wsock.CloseNormal, "run ended", timeout)
			return
		case hub.IsSlowConsumer(err):
			_ = conn.Close(wsock.CloseTryAgain, slowReason(resumeCursor(sub, cursor)), timeout)
			return
		case errors.Is(err, hub.ErrClosed):
			_ = conn.Close(wsock.CloseGoingAway, "gateway shutting down", timeout)
			return
		case err != nil:
			_ = conn.Close(wsock.CloseGoingAway, "", timeout)
			return
		}
		// One text frame per event, every event already available in one
		// write under one deadline (less what the fan-out already wrote of
		// the first).
		msgs = msgs[:0]
		for _, it := range batch {
			msgs = append(msgs, it.JSON)
		}
		if err := conn.WriteTextsFrom(msgs, batch[0].Offset, timeout); err != nil {
			if isTimeout(err) {
				sub.WriteTimedOut()
			}
			_ = conn.Close(wsock.CloseTryAgain, slowReason(resumeCursor(sub, cursor)), timeout)
			return
		}
		sub.DeliveredBatch(batch)
		clear(batch) // do not keep entries the feed has trimmed alive
		clear(msgs)
	}
}

func slowReason(cursor string) string {
	return SlowConsumerReason + " retry_after_ms=" + sseRetryMillis + " cursor=" + cursor
}

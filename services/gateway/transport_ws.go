package gateway

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/baagent/baagent/services/gateway/internal/hub"
	"github.com/baagent/baagent/services/gateway/internal/nbwrite"
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
	// gateway's own policy, so websocket.Accept's is skipped).
	if err := s.origins.checkOrigin(r); err != nil {
		s.edge.browserRefused.WithLabelValues(refusedOrigin).Inc()
		writeError(w, err)
		return
	}
	c, runID, cursor, err := s.streamRequest(r)
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
	conn, sock, err := wsUpgrade(w, r)
	if err != nil {
		s.log.Debug("websocket upgrade failed", "err", err)
		return
	}
	s.pumpWS(r.Context(), conn, sock, sub, cursor)
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

func (s *Server) pumpWS(ctx context.Context, conn *websocket.Conn, sock *wsSocket, sub *hub.Subscription, cursor string) {
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
	if !s.opts.noDirect && sock.enableDirect() {
		// The run's fan-out writes to this client itself while it keeps
		// up (see hub.DirectWriter).
		sub.EnableDirect(sock, framingWS)
	}
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
		// One text frame per event, every event already available in one
		// write under one deadline (less what the fan-out already wrote of
		// the first).
		if err := sock.writeItems(batch, timeout); err != nil {
			if isTimeout(err) {
				sub.WriteTimedOut()
			}
			_ = conn.Close(websocket.StatusTryAgainLater, slowReason(resumeCursor(sub, cursor)))
			return
		}
		sub.DeliveredBatch(batch)
		clear(batch) // do not keep entries the feed has trimmed alive
	}
}

// wsPing pings the client and waits for its pong within timeout.
func wsPing(ctx context.Context, conn *websocket.Conn, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return conn.Ping(ctx)
}

// appendWSText renders e as one unmasked, final WebSocket text frame
// holding its JSON, as a server sends it (RFC 6455 §5.2).
func appendWSText(b []byte, e *hub.Entry) []byte {
	n := len(e.JSON)
	b = slices.Grow(b, n+10)
	b = append(b, 0x81) // FIN, text
	switch {
	case n <= 125:
		b = append(b, byte(n))
	case n <= 0xFFFF:
		b = append(b, 126, byte(n>>8), byte(n))
	default:
		b = binary.BigEndian.AppendUint64(append(b, 127), uint64(n))
	}
	return append(b, e.JSON...)
}

// wsSocket is the connection under one WebSocket. coder/websocket runs the
// protocol on it (the handshake, reading, pings, the close), and its
// writes, control frames each written whole with one Write, come through
// Write below. The event messages are written here instead: the hub's
// frames as they are, with writev, and, while the client keeps up, by the
// run's fan-out with writes that never block (hub.DirectWriter). Writing
// every event with websocket.Conn.Write from the client's goroutine
// instead took 1,000 clients of one run 40% more gateway CPU and ten
// times the p50 latency (BENCHMARKS.md). One lock orders all writes, so
// frames never interleave.
type wsSocket struct {
	net.Conn

	mu   sync.Mutex
	nb   *nbwrite.Writer // set by enableDirect
	bufs net.Buffers     // reused for writev
	vec  net.Buffers     // what WriteTo consumes (a field: no allocation per write)
}

// wsUpgrade accepts the WebSocket on a wsSocket.
func wsUpgrade(w http.ResponseWriter, r *http.Request) (*websocket.Conn, *wsSocket, error) {
	h := &wsHijacker{ResponseWriter: w}
	// Origin is checked by the gateway's own policy first (httpWebSocket).
	conn, err := websocket.Accept(h, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return nil, nil, err
	}
	return conn, h.sock, nil
}

// wsHijacker hands websocket.Accept the connection as a wsSocket, with
// its write buffer moved onto it.
type wsHijacker struct {
	http.ResponseWriter
	sock *wsSocket
}

func (h *wsHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Writer.Flush(); err != nil {
		_ = nc.Close()
		return nil, nil, err
	}
	h.sock = &wsSocket{Conn: nc}
	brw.Writer.Reset(h.sock)
	return h.sock, brw, nil
}

// Write is coder/websocket's: in turn with the event writes.
func (c *wsSocket) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Conn.Write(p)
}

// enableDirect readies TryWrite; false when the connection cannot take
// writes that never block (TLS, a wrapper).
func (c *wsSocket) enableDirect() bool {
	nb := nbwrite.New(c.Conn)
	if nb == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nb = nb
	return true
}

// TryWrite implements hub.DirectWriter: it writes what the socket takes
// now, never waiting, and nothing while another write is under way.
func (c *wsSocket) TryWrite(frames [][]byte) (int, error) {
	if !c.mu.TryLock() {
		return 0, nil
	}
	defer c.mu.Unlock()
	return c.nb.TryWrite(frames)
}

// writeItems writes the text frames of items (of the first, what the
// fan-out has not written) in one writev within timeout. The deadline is
// cleared after, since one left behind would fail the writes that do not
// carry their own. A failed write closes the socket: a frame may be cut.
func (c *wsSocket) writeItems(items []hub.Item, timeout time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bufs = c.bufs[:0]
	for _, it := range items {
		c.bufs = append(c.bufs, it.Frame(framingWS)[it.Offset:])
	}
	err := c.Conn.SetWriteDeadline(time.Now().Add(timeout))
	if err == nil {
		c.vec = c.bufs // WriteTo consumes its receiver
		_, err = c.vec.WriteTo(c.Conn)
		c.vec = nil
		_ = c.Conn.SetWriteDeadline(time.Time{})
	}
	clear(c.bufs) // do not keep frames the feed has trimmed alive
	if err != nil {
		_ = c.Conn.Close()
	}
	return err
}

func slowReason(cursor string) string {
	return SlowConsumerReason + " retry_after_ms=" + sseRetryMillis + " cursor=" + cursor
}

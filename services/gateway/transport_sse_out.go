package gateway

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"time"

	"github.com/baagent/baagent/services/gateway/internal/hub"
	"github.com/baagent/baagent/services/gateway/internal/nbwrite"
)

// sseOut is the write side of one SSE response once it has started.
//
// Over HTTP/1.1 the connection is taken over from net/http (hijacked) and
// the stream is written to the socket as is, delimited by the connection's
// close: a batch of events is one writev of the frames every viewer
// shares, with no chunk framing, no formatted chunk header and no copy
// through net/http's two buffers. With many clients on one run that is
// most of the gateway's per-event cost besides the syscall itself. Where
// the connection cannot be taken over (HTTP/2, a wrapped ResponseWriter)
// it falls back to writes and one flush through the ResponseWriter.
type sseOut struct {
	timeout time.Duration

	// ctx ends when the client goes away or the stream's own context ends:
	// a hijacked connection is no longer watched by net/http, so a reader
	// goroutine watches it.
	ctx    context.Context
	cancel context.CancelFunc

	conn       net.Conn        // set when hijacked
	nb         *nbwrite.Writer // conn's writes that never block (nil: none)
	directOn   bool            // the run's fan-out writes too (enableDirect)
	head       []byte          // the response head, sent with the first write
	armed      time.Time       // when the write deadline was last set
	readerDone chan struct{}
	bufs       net.Buffers // reused for writev
	vec        net.Buffers // what WriteTo consumes (a field: no allocation per write)

	rc *http.ResponseController // the fallback
	w  http.ResponseWriter
}

// startSSE starts the 200 response, hijacking the connection if it can.
func (s *Server) startSSE(ctx context.Context, w http.ResponseWriter, r *http.Request) *sseOut {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	out := &sseOut{timeout: s.opts.WriteTimeout}
	if r.ProtoMajor == 1 && r.ProtoMinor >= 1 {
		if conn, head, ok := hijackSSE(w, h); ok {
			out.conn, out.head = conn, head
			out.nb = nbwrite.New(conn)
			out.ctx, out.cancel = context.WithCancel(ctx)
			out.readerDone = make(chan struct{})
			go out.watchClient()
			return out
		}
	}
	out.ctx, out.cancel = context.WithCancel(ctx)
	out.rc = http.NewResponseController(w)
	out.w = w
	w.WriteHeader(http.StatusOK)
	return out
}

// hijackSSE takes over the connection and writes the response head. The
// body then runs until the connection closes (Connection: close, no
// Content-Length, no chunking), as HTTP/1.1 allows.
// The head is sent with the first write (the opening comment), so it costs
// no syscall of its own.
func hijackSSE(w http.ResponseWriter, h http.Header) (net.Conn, []byte, bool) {
	// The buffered reader returned holds nothing an SSE stream reads, and
	// nothing has been written yet.
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, nil, false
	}
	// A body deadline (bodyDeadline, for a GET that came with a body)
	// must not end the stream's watch for the client going away.
	_ = conn.SetReadDeadline(time.Time{})
	h.Set("Connection", "close")
	var head bytes.Buffer
	head.WriteString("HTTP/1.1 200 OK\r\n")
	_ = h.Write(&head)
	head.WriteString("\r\n")
	return conn, head.Bytes(), true
}

// watchClient ends the stream when the client closes its side (or sends
// anything, which an SSE client has no reason to do). It stops when the
// connection is closed.
func (o *sseOut) watchClient() {
	defer close(o.readerDone)
	defer o.cancel()
	var b [64]byte
	for {
		if _, err := o.conn.Read(b[:]); err != nil {
			return
		}
	}
}

// write sends p within the write deadline and flushes it.
func (o *sseOut) write(p []byte) error {
	return o.writeFrames(p, nil)
}

// writeItems sends the SSE frames of items in one write (of each frame,
// what the run's fan-out has not already written).
func (o *sseOut) writeItems(items []hub.Item) error {
	if len(items) == 1 {
		return o.writeFrames(items[0].Frame(framingSSE)[items[0].Offset:], nil)
	}
	return o.writeFrames(nil, items)
}

// direct reports whether the run's fan-out may write to this client
// itself: the connection is a plain socket and the response head is out.
func (o *sseOut) direct() bool { return o.nb != nil && o.head == nil }

// enableDirect lets the run's fan-out write to this client (see
// hub.Subscription.EnableDirect); from then on this goroutine's writes
// carry their own deadline and clear it after.
func (o *sseOut) enableDirect(sub *hub.Subscription) {
	if err := o.conn.SetWriteDeadline(time.Time{}); err != nil {
		return
	}
	o.directOn = true
	sub.EnableDirect(o, framingSSE)
}

// TryWrite implements hub.DirectWriter: it writes what the socket takes
// now, never waiting.
func (o *sseOut) TryWrite(frames [][]byte) (int, error) { return o.nb.TryWrite(frames) }

func (o *sseOut) writeFrames(p []byte, items []hub.Item) error {
	now := time.Now()
	if o.conn == nil {
		_ = o.rc.SetWriteDeadline(now.Add(o.timeout))
		var err error
		if p != nil {
			_, err = o.w.Write(p)
		}
		for _, it := range items {
			if err != nil {
				break
			}
			_, err = o.w.Write(it.Frame(framingSSE)[it.Offset:])
		}
		if err == nil {
			err = o.rc.Flush()
		}
		return err
	}
	if o.directOn {
		// The run's fan-out writes between this goroutine's writes, and a
		// deadline left behind would fail its writes: set one for this write
		// only.
		if err := o.conn.SetWriteDeadline(now.Add(o.timeout)); err != nil {
			return err
		}
		defer func() { _ = o.conn.SetWriteDeadline(time.Time{}) }()
	} else if now.Sub(o.armed) > o.timeout/8 {
		// The deadline is moved only when it has come an eighth of the
		// timeout closer, so a write always gets between 7/8 of
		// WriteTimeout and all of it, and a client taking an event every
		// millisecond does not move a runtime timer every millisecond.
		if err := o.conn.SetWriteDeadline(now.Add(o.timeout)); err != nil {
			return err
		}
		o.armed = now
	}
	o.bufs = o.bufs[:0]
	if o.head != nil {
		o.bufs = append(o.bufs, o.head)
		o.head = nil
	}
	if p != nil {
		if len(o.bufs) == 0 {
			_, err := o.conn.Write(p)
			return err
		}
		o.bufs = append(o.bufs, p)
	}
	for _, it := range items {
		o.bufs = append(o.bufs, it.Frame(framingSSE)[it.Offset:])
	}
	o.vec = o.bufs // WriteTo consumes its receiver
	_, err := o.vec.WriteTo(o.conn)
	clear(o.bufs) // do not keep frames the feed has trimmed alive
	o.vec = nil
	return err
}

// close ends the response: a hijacked connection is closed (which ends
// the body) after its reader has stopped.
func (o *sseOut) close() {
	o.cancel()
	if o.conn == nil {
		return
	}
	_ = o.conn.Close()
	<-o.readerDone
}

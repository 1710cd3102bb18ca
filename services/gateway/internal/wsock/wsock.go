// Package wsock is the small server side of RFC 6455 the gateway needs to
// stream events: the opening handshake, unfragmented text frames and pings
// from the server, and a reader that answers the client's pings and close
// and discards its data frames. No extensions, no subprotocols.
package wsock

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/baagent/baagent/services/gateway/internal/nbwrite"
)

// Opcodes (RFC 6455 §5.2).
const (
	OpContinuation = 0x0
	OpText         = 0x1
	OpBinary       = 0x2
	OpClose        = 0x8
	OpPing         = 0x9
	OpPong         = 0xA
)

// Close codes used by the gateway (RFC 6455 §7.4.1).
const (
	CloseNormal     = 1000
	CloseGoingAway  = 1001
	CloseProtocol   = 1002
	ClosePolicy     = 1008
	CloseTooBig     = 1009
	CloseInternal   = 1011
	CloseTryAgain   = 1013
	maxControlBytes = 125
)

// MaxClientFrame bounds a frame the client may send; clients only need to
// send control frames, so this is small.
const MaxClientFrame = 64 << 10

const handshakeGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// ErrClosed is returned by writes after the connection closed.
var ErrClosed = errors.New("websocket closed")

// Conn is a server-side WebSocket connection. Writes are serialised; one
// internal goroutine reads the client's frames until the connection closes.
type Conn struct {
	nc net.Conn
	br *bufio.Reader

	wmu     sync.Mutex
	wbuf    []byte          // frame headers (and control frames) being written
	wvec    net.Buffers     // headers and payloads of a batch, for one writev
	wsend   net.Buffers     // what WriteTo consumes (a field: no allocation per write)
	wends   []int           // end of each header in wbuf
	closing bool            // a close frame was sent
	nb      *nbwrite.Writer // writes that never block, once EnableDirect is called

	done    chan struct{} // closed when the reader stops
	readErr error         // why the reader stopped, set before done closes
	once    sync.Once
}

// Accept computes Sec-WebSocket-Accept for a client key.
func Accept(key string) string {
	h := sha1.Sum([]byte(key + handshakeGUID))
	return base64.StdEncoding.EncodeToString(h[:])
}

// HandshakeError is a refused upgrade; Status is the HTTP status to answer.
type HandshakeError struct {
	Status int
	Reason string
}

func (e *HandshakeError) Error() string { return "websocket handshake: " + e.Reason }

// Check validates an upgrade request without answering it.
func Check(r *http.Request) error {
	switch {
	case r.Method != http.MethodGet:
		return &HandshakeError{http.StatusMethodNotAllowed, "method must be GET"}
	case !headerHasToken(r.Header, "Connection", "upgrade"):
		return &HandshakeError{http.StatusBadRequest, "missing Connection: Upgrade"}
	case !headerHasToken(r.Header, "Upgrade", "websocket"):
		return &HandshakeError{http.StatusBadRequest, "missing Upgrade: websocket"}
	case r.Header.Get("Sec-WebSocket-Version") != "13":
		return &HandshakeError{http.StatusUpgradeRequired, "Sec-WebSocket-Version must be 13"}
	}
	key := r.Header.Get("Sec-WebSocket-Key")
	if b, err := base64.StdEncoding.DecodeString(key); err != nil || len(b) != 16 {
		return &HandshakeError{http.StatusBadRequest, "Sec-WebSocket-Key must be 16 bytes in base64"}
	}
	return nil
}

// Upgrade completes the handshake of a request that passed Check and takes
// over its connection.
func Upgrade(w http.ResponseWriter, r *http.Request) (*Conn, error) {
	if err := Check(r); err != nil {
		return nil, err
	}
	nc, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, fmt.Errorf("websocket: take over the connection: %w", err)
	}
	resp := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
		Accept(r.Header.Get("Sec-WebSocket-Key")) + "\r\n\r\n"
	_ = nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(nc, resp); err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("websocket: write handshake: %w", err)
	}
	_ = nc.SetDeadline(time.Time{})
	return newConn(nc, brw.Reader), nil
}

func newConn(nc net.Conn, br *bufio.Reader) *Conn {
	c := &Conn{nc: nc, br: br, done: make(chan struct{})}
	go c.readLoop()
	return c
}

// Done is closed when the client has closed the connection or it failed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the connection ended, once Done is closed.
func (c *Conn) Err() error {
	<-c.done
	return c.readErr
}

// WriteText sends one text frame within timeout.
func (c *Conn) WriteText(p []byte, timeout time.Duration) error {
	return c.write(OpText, p, timeout)
}

// WriteTexts sends one text frame per message, all in one write (writev:
// the payloads are not copied) within timeout, so a batch of events costs
// one syscall instead of one per event.
func (c *Conn) WriteTexts(msgs [][]byte, timeout time.Duration) error {
	return c.WriteTextsFrom(msgs, 0, timeout)
}

// WriteTextsFrom is WriteTexts without the first skip bytes of the first
// frame (header included), which were already sent by TryWrite.
func (c *Conn) WriteTextsFrom(msgs [][]byte, skip int, timeout time.Duration) error {
	if len(msgs) == 1 && skip == 0 {
		return c.write(OpText, msgs[0], timeout)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closing {
		return ErrClosed
	}
	c.wbuf, c.wends = c.wbuf[:0], c.wends[:0]
	for _, p := range msgs {
		c.wbuf = AppendHeader(c.wbuf, OpText, len(p))
		c.wends = append(c.wends, len(c.wbuf))
	}
	c.wvec = c.wvec[:0]
	start := 0
	for i, p := range msgs {
		c.wvec = append(c.wvec, c.wbuf[start:c.wends[i]], p)
		start = c.wends[i]
	}
	for skip > 0 && len(c.wvec) > 0 {
		n := min(skip, len(c.wvec[0]))
		c.wvec[0] = c.wvec[0][n:]
		skip -= n
		if len(c.wvec[0]) == 0 {
			c.wvec = c.wvec[1:]
		}
	}
	c.armLocked(timeout)
	c.wsend = c.wvec // WriteTo consumes its receiver
	_, err := c.wsend.WriteTo(c.nc)
	c.disarmLocked()
	clear(c.wvec) // do not keep the payloads alive
	c.wsend = nil
	if err != nil {
		c.closing = true
		c.shutdown()
	}
	return err
}

// EnableDirect lets TryWrite write to the connection (see
// hub.DirectWriter). It reports false when the connection cannot take
// writes that never block (TLS, a wrapper). From then on every other write
// clears its deadline when done, since a deadline left behind would fail
// TryWrite.
func (c *Conn) EnableDirect() bool {
	nb := nbwrite.New(c.nc)
	if nb == nil {
		return false
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.nb = nb
	return true
}

// TryWrite writes as much of frames (whole frames, header included, as
// hub.FormatWS renders them) as the socket takes now and returns the
// bytes written. While another write (a pong, a close) is under way it
// writes nothing.
func (c *Conn) TryWrite(frames [][]byte) (int, error) {
	if !c.wmu.TryLock() {
		return 0, nil
	}
	defer c.wmu.Unlock()
	if c.closing {
		return 0, ErrClosed
	}
	if c.nb == nil {
		return 0, nil
	}
	return c.nb.TryWrite(frames)
}

// armLocked sets the deadline of a write; disarmLocked clears it again
// when writes that never block share the connection.
func (c *Conn) armLocked(timeout time.Duration) {
	_ = c.nc.SetWriteDeadline(time.Now().Add(timeout))
}

func (c *Conn) disarmLocked() {
	if c.nb != nil {
		_ = c.nc.SetWriteDeadline(time.Time{})
	}
}

// Ping sends a ping within timeout.
func (c *Conn) Ping(timeout time.Duration) error { return c.write(OpPing, nil, timeout) }

// Close sends a close frame with code and reason (cut to fit a control
// frame), waits briefly for the client's answer, and closes the socket.
func (c *Conn) Close(code int, reason string, timeout time.Duration) error {
	p := make([]byte, 2, 2+len(reason))
	binary.BigEndian.PutUint16(p, uint16(code))
	p = append(p, reason...)
	if len(p) > maxControlBytes {
		p = p[:maxControlBytes]
	}
	err := c.write(OpClose, p, timeout)
	c.wmu.Lock()
	c.closing = true
	c.wmu.Unlock()
	if err == nil {
		select {
		case <-c.done:
		case <-time.After(timeout):
		}
	}
	c.shutdown()
	<-c.done
	return err
}

func (c *Conn) shutdown() { c.once.Do(func() { _ = c.nc.Close() }) }

func (c *Conn) write(op byte, p []byte, timeout time.Duration) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closing {
		return ErrClosed
	}
	c.wbuf = AppendFrame(c.wbuf[:0], op, p)
	c.armLocked(timeout)
	_, err := c.nc.Write(c.wbuf)
	c.disarmLocked()
	if err != nil {
		c.closing = true
		c.shutdown()
	}
	if cap(c.wbuf) > 256<<10 {
		c.wbuf = nil // do not pin a large event's buffer for the connection's life
	}
	return err
}

// AppendFrame appends an unmasked, final frame (as a server sends).
func AppendFrame(b []byte, op byte, p []byte) []byte {
	return append(AppendHeader(b, op, len(p)), p...)
}

// AppendHeader appends the header of an unmasked, final frame of n bytes
// (at most 10 bytes).
func AppendHeader(b []byte, op byte, n int) []byte {
	b = append(b, 0x80|op)
	switch {
	case n <= 125:
		return append(b, byte(n))
	case n <= 0xFFFF:
		return append(b, 126, byte(n>>8), byte(n))
	}
	b = append(b, 127)
	return binary.BigEndian.AppendUint64(b, uint64(n))
}

// readLoop answers pings and the close handshake and discards data frames,
// until the client closes or the connection fails.
func (c *Conn) readLoop() {
	defer close(c.done)
	defer c.shutdown()
	buf := make([]byte, 0, 256)
	for {
		f, err := ReadFrame(c.br, buf[:0], MaxClientFrame)
		if err != nil {
			c.readErr = err
			return
		}
		switch f.Op {
		case OpPing:
			_ = c.write(OpPong, f.Payload, 5*time.Second)
		case OpClose:
			c.wmu.Lock()
			answered := c.closing
			c.wmu.Unlock()
			if !answered {
				// Echo the status code, as §5.5.1 asks.
				code := f.Payload
				if len(code) > 2 {
					code = code[:2]
				}
				_ = c.write(OpClose, code, 5*time.Second)
			}
			c.readErr = io.EOF
			return
		}
	}
}

// Frame is one frame read from a client, unmasked.
type Frame struct {
	Fin     bool
	Op      byte
	Payload []byte
}

// ReadFrame reads one client frame into buf (reused when large enough).
// Client frames must be masked (§5.1); control frames must be final and at
// most 125 bytes; reserved bits must be zero (no extension is negotiated).
func ReadFrame(r io.Reader, buf []byte, maxPayload int) (Frame, error) {
	var h [14]byte
	if _, err := io.ReadFull(r, h[:2]); err != nil {
		return Frame{}, err
	}
	f := Frame{Fin: h[0]&0x80 != 0, Op: h[0] & 0x0F}
	if h[0]&0x70 != 0 {
		return Frame{}, errors.New("websocket: reserved bits set")
	}
	switch f.Op {
	case OpContinuation, OpText, OpBinary:
	case OpClose, OpPing, OpPong:
		if !f.Fin {
			return Frame{}, errors.New("websocket: fragmented control frame")
		}
	default:
		return Frame{}, fmt.Errorf("websocket: unknown opcode %#x", f.Op)
	}
	if h[1]&0x80 == 0 {
		return Frame{}, errors.New("websocket: client frame not masked")
	}
	n := uint64(h[1] & 0x7F)
	switch n {
	case 126:
		if _, err := io.ReadFull(r, h[2:4]); err != nil {
			return Frame{}, unexpected(err)
		}
		n = uint64(binary.BigEndian.Uint16(h[2:4]))
	case 127:
		if _, err := io.ReadFull(r, h[2:10]); err != nil {
			return Frame{}, unexpected(err)
		}
		n = binary.BigEndian.Uint64(h[2:10])
	}
	if f.Op >= OpClose && n > maxControlBytes {
		return Frame{}, errors.New("websocket: control frame over 125 bytes")
	}
	if n > uint64(maxPayload) {
		return Frame{}, fmt.Errorf("websocket: frame of %d bytes exceeds %d", n, maxPayload)
	}
	var mask [4]byte
	if _, err := io.ReadFull(r, mask[:]); err != nil {
		return Frame{}, unexpected(err)
	}
	if uint64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	p := buf[:n]
	if _, err := io.ReadFull(r, p); err != nil {
		return Frame{}, unexpected(err)
	}
	for i := range p {
		p[i] ^= mask[i&3]
	}
	f.Payload = p
	return f, nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// headerHasToken reports whether a comma-separated header holds token
// (case-insensitively), e.g. "Connection: keep-alive, Upgrade".
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

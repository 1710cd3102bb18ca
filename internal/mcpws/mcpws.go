// Package mcpws carries the Model Context Protocol over WebSocket: one
// JSON-RPC message per text message, negotiated with the subprotocol `mcp`.
//
// [ClientTransport] and [Handler] plug into the official MCP Go SDK as its
// Transport and as an http.Handler serving an SDK server. Every message is
// bounded ([DefaultMaxMessageBytes]); a binary message, an oversize one or one
// that is not a single JSON-RPC message ends the connection with the matching
// WebSocket close code, since a peer that sends them speaks something else.
// Close performs the WebSocket close handshake (status 1000).
package mcpws

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Subprotocol is the WebSocket subprotocol both sides must agree on.
const Subprotocol = "mcp"

// DefaultMaxMessageBytes bounds one message in either direction unless a
// transport sets its own limit.
const DefaultMaxMessageBytes = 4 << 20

// DefaultWriteTimeout bounds writing one message: a peer that stops reading
// for this long is treated as gone and the connection is closed.
const DefaultWriteTimeout = 30 * time.Second

// ErrMessageTooBig is returned by Write for a message over the limit;
// nothing is sent (the peer would close the connection with 1009).
var ErrMessageTooBig = errors.New("mcpws: message exceeds the size limit")

// ClientTransport is an mcp.Transport that dials a WebSocket MCP endpoint.
// It is used for one Connect, as every SDK transport.
type ClientTransport struct {
	// URL is the endpoint: ws://, wss:// (or http://, https://, dialled as
	// ws:// and wss://).
	URL string
	// HTTPClient performs the handshake; nil uses http.DefaultClient. Its
	// Transport may add headers (authentication).
	HTTPClient *http.Client
	// Header is sent with the handshake.
	Header http.Header
	// MaxMessageBytes bounds one message; 0 means DefaultMaxMessageBytes.
	MaxMessageBytes int64
	// WriteTimeout bounds writing one message; 0 means DefaultWriteTimeout.
	WriteTimeout time.Duration
}

// Connect dials the endpoint. ctx bounds the handshake only; the connection
// lives until it is closed.
func (t *ClientTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	ws, resp, err := websocket.Dial(ctx, t.URL, &websocket.DialOptions{
		HTTPClient:   t.HTTPClient,
		HTTPHeader:   t.Header,
		Subprotocols: []string{Subprotocol},
	})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("websocket dial: %w", err)
	}
	if ws.Subprotocol() != Subprotocol {
		_ = ws.Close(websocket.StatusProtocolError, "subprotocol mcp required")
		return nil, fmt.Errorf("websocket dial: the server did not accept subprotocol %q", Subprotocol)
	}
	return NewConn(ws, t.MaxMessageBytes, t.WriteTimeout), nil
}

// Handler serves MCP over WebSocket: each connection is one session of the
// server GetServer returns.
type Handler struct {
	// GetServer returns the server of a request; nil refuses it (400).
	GetServer func(*http.Request) *mcp.Server
	// AcceptOptions are passed to websocket.Accept (OriginPatterns for
	// browsers); Subprotocols is always [Subprotocol].
	AcceptOptions websocket.AcceptOptions
	// MaxMessageBytes bounds one message; 0 means DefaultMaxMessageBytes.
	MaxMessageBytes int64
	// WriteTimeout bounds writing one message; 0 means DefaultWriteTimeout.
	WriteTimeout time.Duration
	// Logger receives connection failures; nil discards them.
	Logger *slog.Logger
}

// ServeHTTP upgrades the request and runs the session until either side
// closes it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	log := h.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	server := h.GetServer(r)
	if server == nil {
		http.Error(w, "no MCP server for this request", http.StatusBadRequest)
		return
	}
	opts := h.AcceptOptions
	opts.Subprotocols = []string{Subprotocol}
	ws, err := websocket.Accept(w, r, &opts)
	if err != nil {
		log.Debug("websocket accept failed", "error", err)
		return // Accept has answered
	}
	if ws.Subprotocol() != Subprotocol {
		_ = ws.Close(websocket.StatusProtocolError, "subprotocol mcp required")
		return
	}
	conn := NewConn(ws, h.MaxMessageBytes, h.WriteTimeout)
	ss, err := server.Connect(r.Context(), &connTransport{conn: conn}, nil)
	if err != nil {
		log.Debug("MCP session over websocket failed to start", "error", err)
		_ = conn.Close()
		return
	}
	if err := ss.Wait(); err != nil {
		log.Debug("MCP session over websocket ended", "error", err)
	}
}

// connTransport hands an established connection to Server.Connect.
type connTransport struct{ conn mcp.Connection }

func (t *connTransport) Connect(context.Context) (mcp.Connection, error) { return t.conn, nil }

// Conn is one MCP connection over an established WebSocket. It implements
// mcp.Connection: Read and Write may run concurrently, Close any number of
// times.
type Conn struct {
	ws           *websocket.Conn
	max          int64
	writeTimeout time.Duration

	closeOnce sync.Once
	closeErr  error
}

// NewConn wraps ws; max and writeTimeout of 0 take the defaults.
func NewConn(ws *websocket.Conn, max int64, writeTimeout time.Duration) *Conn {
	if max <= 0 {
		max = DefaultMaxMessageBytes
	}
	if writeTimeout <= 0 {
		writeTimeout = DefaultWriteTimeout
	}
	ws.SetReadLimit(max)
	return &Conn{ws: ws, max: max, writeTimeout: writeTimeout}
}

// Read returns the next message. A message that is not one JSON-RPC message
// in a text frame closes the connection (1003 for binary, 1007 for a bad
// payload; an oversize one is closed with 1009 by the WebSocket library).
func (c *Conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	typ, data, err := c.ws.Read(ctx)
	if err != nil {
		return nil, err
	}
	msg, err := DecodeFrame(typ, data)
	if err != nil {
		code := websocket.StatusInvalidFramePayloadData
		if typ != websocket.MessageText {
			code = websocket.StatusUnsupportedData
		}
		c.closeWith(code, "not an MCP message")
		return nil, err
	}
	return msg, nil
}

// DecodeFrame decodes the payload of one WebSocket data message: it must be
// a text message holding exactly one JSON-RPC request, notification or
// response.
func DecodeFrame(typ websocket.MessageType, data []byte) (jsonrpc.Message, error) {
	if typ != websocket.MessageText {
		return nil, fmt.Errorf("mcpws: %v message; MCP messages are text", typ)
	}
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return nil, fmt.Errorf("mcpws: not a JSON-RPC message: %w", err)
	}
	return msg, nil
}

// Write sends msg as one text message. ctx may cancel the write before it
// starts; once started it is bounded by the write timeout only, because an
// abandoned half-written message would break the connection for every
// other call on it.
func (c *Conn) Write(ctx context.Context, msg jsonrpc.Message) error {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	if int64(len(data)) > c.max {
		return fmt.Errorf("%w (%d > %d bytes)", ErrMessageTooBig, len(data), c.max)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.writeTimeout)
	defer cancel()
	return c.ws.Write(wctx, websocket.MessageText, data)
}

// Close closes the connection with status 1000 and the close handshake
// (bounded by the WebSocket library to a few seconds).
func (c *Conn) Close() error {
	c.closeWith(websocket.StatusNormalClosure, "")
	return c.closeErr
}

func (c *Conn) closeWith(code websocket.StatusCode, reason string) {
	c.closeOnce.Do(func() {
		err := c.ws.Close(code, reason)
		// A connection the peer closed first, or one that already failed,
		// is as closed as wanted.
		if err != nil && !errors.Is(err, net.ErrClosed) && websocket.CloseStatus(err) == -1 && !errors.Is(err, io.EOF) {
			c.closeErr = err
		}
	})
}

// SessionID implements mcp.Connection; WebSocket sessions have no id.
func (c *Conn) SessionID() string { return "" }

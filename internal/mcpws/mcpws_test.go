package mcpws

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoArgs struct {
	Message string `json:"message"`
}

// newServer is an SDK MCP server with one tool, `echo`, that returns its
// message; closed records the sessions that ended.
func newServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes."}, func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Message}}}, nil, nil
	})
	return s
}

func serve(t testing.TB, h *Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

func connect(t testing.TB, url string, tr *ClientTransport) *mcp.ClientSession {
	t.Helper()
	if tr == nil {
		tr = &ClientTransport{URL: url}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	var gotHeader string
	h := &Handler{GetServer: func(r *http.Request) *mcp.Server {
		gotHeader = r.Header.Get("X-Token")
		return newServer()
	}}
	url := serve(t, h)
	cs := connect(t, url, &ClientTransport{URL: url, Header: http.Header{"X-Token": {"t1"}}})
	if gotHeader != "t1" {
		t.Fatalf("handshake header = %q", gotHeader)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "echo" {
		t.Fatalf("tools/list: %+v, %v", tools, err)
	}
	// Concurrent calls share the connection.
	errs := make(chan error, 8)
	for i := range 8 {
		go func() {
			msg := strings.Repeat("x", i*1000)
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": msg}})
			if err == nil && res.Content[0].(*mcp.TextContent).Text != msg {
				err = errors.New("wrong echo")
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := cs.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// TestSubprotocolRequired checks both sides refuse a peer that does not
// speak the `mcp` subprotocol.
func TestSubprotocolRequired(t *testing.T) {
	t.Parallel()
	url := serve(t, &Handler{GetServer: func(*http.Request) *mcp.Server { return newServer() }})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// A client without the subprotocol is closed with 1002.
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = ws.Read(ctx)
	if websocket.CloseStatus(err) != websocket.StatusProtocolError {
		t.Fatalf("read from a server that refused the subprotocol: %v", err)
	}
	ws.CloseNow()

	// A server without it is refused by the client.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		_, _, _ = c.Read(r.Context())
		c.CloseNow()
	}))
	defer plain.Close()
	_, err = (&ClientTransport{URL: plain.URL}).Connect(ctx)
	if err == nil || !strings.Contains(err.Error(), "subprotocol") {
		t.Fatalf("connect to a server without the subprotocol: %v", err)
	}
}

// TestBadFrames sends what is not an MCP message: the server closes the
// connection with the matching status.
func TestBadFrames(t *testing.T) {
	t.Parallel()
	url := serve(t, &Handler{GetServer: func(*http.Request) *mcp.Server { return newServer() }, MaxMessageBytes: 1024})
	for _, tc := range []struct {
		name string
		typ  websocket.MessageType
		data []byte
		want websocket.StatusCode
	}{
		{"binary", websocket.MessageBinary, []byte(`{"jsonrpc":"2.0","method":"ping","id":1}`), websocket.StatusUnsupportedData},
		{"not json", websocket.MessageText, []byte(`hello`), websocket.StatusInvalidFramePayloadData},
		{"batch", websocket.MessageText, []byte(`[{"jsonrpc":"2.0","method":"ping","id":1}]`), websocket.StatusInvalidFramePayloadData},
		{"too big", websocket.MessageText, []byte(`{"jsonrpc":"2.0","method":"ping","id":"` + strings.Repeat("a", 2000) + `"}`), websocket.StatusMessageTooBig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{Subprotocol}})
			if err != nil {
				t.Fatal(err)
			}
			defer ws.CloseNow()
			if err := ws.Write(ctx, tc.typ, tc.data); err != nil {
				t.Fatal(err)
			}
			_, _, err = ws.Read(ctx)
			if got := websocket.CloseStatus(err); got != tc.want {
				t.Fatalf("close status = %v (%v), want %v", got, err, tc.want)
			}
		})
	}
}

// TestWriteTooBig refuses an oversize outgoing message without breaking the
// connection.
func TestWriteTooBig(t *testing.T) {
	t.Parallel()
	url := serve(t, &Handler{GetServer: func(*http.Request) *mcp.Server { return newServer() }})
	cs := connect(t, url, &ClientTransport{URL: url, MaxMessageBytes: 4096})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": strings.Repeat("y", 8000)}})
	if err == nil || !strings.Contains(err.Error(), "size limit") {
		t.Fatalf("oversize call: %v", err)
	}
}

// TestCleanClose checks that closing the client session ends the server's
// session with a normal closure.
func TestCleanClose(t *testing.T) {
	t.Parallel()
	ended := make(chan error, 1)
	srv := newServer()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{Subprotocol}})
		if err != nil {
			return
		}
		conn := &recordingConn{Conn: NewConn(ws, 0, 0)}
		ss, err := srv.Connect(r.Context(), &connTransport{conn: conn}, nil)
		if err != nil {
			ended <- err
			return
		}
		_ = ss.Wait()
		ended <- conn.readErr
	})
	hs := httptest.NewServer(h)
	defer hs.Close()
	cs := connect(t, "", &ClientTransport{URL: hs.URL})
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if s := websocket.CloseStatus(err); s != websocket.StatusNormalClosure {
			t.Fatalf("server saw %v (status %v), want a normal closure", err, s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server session did not end after the client closed")
	}
}

// FuzzWSFrame feeds arbitrary data messages to the frame decoder: it never
// panics, refuses binary messages, and what it accepts is a JSON-RPC
// message that encodes back to JSON the decoder accepts again.
func FuzzWSFrame(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","method":"tools/list","id":1}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"a","result":{"tools":[]}}`,
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no"}}`,
		`[{"jsonrpc":"2.0","method":"x","id":1}]`,
		`{"jsonrpc":"1.0","method":"x"}`,
		`{"id":null}`,
		``,
		`{`,
	} {
		f.Add(true, []byte(s))
		f.Add(false, []byte(s))
	}
	f.Fuzz(func(t *testing.T, text bool, data []byte) {
		typ := websocket.MessageBinary
		if text {
			typ = websocket.MessageText
		}
		msg, err := DecodeFrame(typ, data)
		if err != nil {
			return
		}
		if !text {
			t.Fatal("accepted a binary message")
		}
		out, err := jsonrpc.EncodeMessage(msg)
		if err != nil {
			t.Fatalf("accepted %q but cannot encode it: %v", data, err)
		}
		if !json.Valid(out) {
			t.Fatalf("encoded %q as invalid JSON %q", data, out)
		}
		again, err := DecodeFrame(websocket.MessageText, out)
		if err != nil {
			t.Fatalf("re-decoding %q (from %q): %v", out, data, err)
		}
		switch m := msg.(type) {
		case *jsonrpc.Request:
			if r, ok := again.(*jsonrpc.Request); !ok || r.Method != m.Method || r.ID != m.ID {
				t.Fatalf("request %q changed to %q", data, out)
			}
		case *jsonrpc.Response:
			if r, ok := again.(*jsonrpc.Response); !ok || r.ID != m.ID {
				t.Fatalf("response %q changed to %q", data, out)
			}
		}
	})
}

// recordingConn keeps the error of the Read that ended the connection.
type recordingConn struct {
	*Conn
	readErr error // written by the one reading goroutine before the session ends
}

func (c *recordingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Conn.Read(ctx)
	if err != nil && c.readErr == nil {
		c.readErr = err
	}
	return m, err
}

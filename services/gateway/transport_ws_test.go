package gateway

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/coder/websocket"

	"github.com/baagent/baagent/services/gateway/internal/hub"
)

// wsClient is a test's WebSocket client: it reads the server's text
// messages; the server's close comes back as a websocket.CloseError.
type wsClient struct{ c *websocket.Conn }

// dialWS opens a WebSocket to rawURL (ws://host/path?query) with extra
// request headers.
func dialWS(ctx context.Context, rawURL string, header http.Header) (*wsClient, error) {
	c, _, err := websocket.Dial(ctx, rawURL, &websocket.DialOptions{HTTPHeader: header})
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(-1)
	return &wsClient{c}, nil
}

// Read returns the next message.
func (w *wsClient) Read() ([]byte, error) {
	_, p, err := w.c.Read(context.Background())
	return p, err
}

// Close closes the socket without a handshake.
func (w *wsClient) Close() error { return w.c.CloseNow() }

// A text frame's length takes 1, 3 or 9 bytes (RFC 6455 §5.2).
func TestWSTextFrameOfAnEntry(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n    int
		head string
	}{{5, "\x81\x05"}, {125, "\x81\x7d"}, {126, "\x81\x7e\x00\x7e"}, {70000, "\x81\x7f\x00\x00\x00\x00\x00\x01\x11\x70"}} {
		e := &hub.Entry{JSON: bytes.Repeat([]byte("x"), c.n)}
		f := appendWSText(nil, e)
		if string(f[:len(c.head)]) != c.head || !bytes.Equal(f[len(c.head):], e.JSON) {
			t.Errorf("%d bytes: frame starts % x, want % x and the JSON", c.n, f[:min(len(f), 10)], c.head)
		}
	}
}

package gateway

import (
	"context"
	"net/http"

	"github.com/coder/websocket"
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

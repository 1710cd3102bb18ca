package wsock

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
)

// Client is a minimal WebSocket client for the gateway's tests and load
// generator: it reads the server's text frames and can send a close.
type Client struct {
	nc net.Conn
	br *bufio.Reader
}

// CloseError is the server's close frame.
type CloseError struct {
	Code   int
	Reason string
}

func (e *CloseError) Error() string { return fmt.Sprintf("websocket closed: %d %s", e.Code, e.Reason) }

// Dial opens a WebSocket to rawURL (ws://host/path?query) with extra
// request headers.
func Dial(ctx context.Context, rawURL string, header http.Header) (*Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, err
	}
	var k [16]byte
	_, _ = rand.Read(k[:])
	key := base64.StdEncoding.EncodeToString(k[:])
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+u.Host+u.RequestURI(), nil)
	for name, v := range header {
		req.Header[name] = v
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", key)
	if err := req.Write(nc); err != nil {
		_ = nc.Close()
		return nil, err
	}
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		_ = nc.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		_ = nc.Close()
		return nil, fmt.Errorf("websocket handshake: %s: %s", resp.Status, body)
	}
	if resp.Header.Get("Sec-WebSocket-Accept") != Accept(key) {
		_ = nc.Close()
		return nil, errors.New("websocket handshake: wrong Sec-WebSocket-Accept")
	}
	return &Client{nc: nc, br: br}, nil
}

// Conn is the underlying connection (for deadlines).
func (c *Client) Conn() net.Conn { return c.nc }

// Read returns the next text message; pings are skipped; a close frame is
// returned as *CloseError.
func (c *Client) Read() ([]byte, error) {
	for {
		var h [10]byte
		if _, err := io.ReadFull(c.br, h[:2]); err != nil {
			return nil, err
		}
		op := h[0] & 0x0F
		n := uint64(h[1] & 0x7F)
		switch n {
		case 126:
			if _, err := io.ReadFull(c.br, h[2:4]); err != nil {
				return nil, err
			}
			n = uint64(binary.BigEndian.Uint16(h[2:4]))
		case 127:
			if _, err := io.ReadFull(c.br, h[2:10]); err != nil {
				return nil, err
			}
			n = binary.BigEndian.Uint64(h[2:10])
		}
		if n > 64<<20 {
			return nil, errors.New("websocket: server frame too large")
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(c.br, p); err != nil {
			return nil, err
		}
		switch op {
		case OpText, OpBinary:
			return p, nil
		case OpClose:
			ce := &CloseError{Code: 1005}
			if len(p) >= 2 {
				ce.Code, ce.Reason = int(binary.BigEndian.Uint16(p)), string(p[2:])
			}
			return nil, ce
		}
	}
}

// Close closes the socket without a handshake.
func (c *Client) Close() error { return c.nc.Close() }

// AppendMaskedFrame appends a final client frame masked with mask.
func AppendMaskedFrame(b []byte, op byte, p []byte, mask [4]byte) []byte {
	start := len(b)
	b = AppendFrame(b, op, p)
	hdr := len(b) - len(p) - start
	out := append(b[:start+hdr:start+hdr], mask[:]...)
	out[start+1] |= 0x80
	for i, c := range p {
		out = append(out, c^mask[i&3])
	}
	return out
}

package security

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Helpers of the gateway edge tests: raw HTTP requests (own Host, Origin,
// source address), WebSocket handshakes and runs that stay open.

// waitQuestion is the input of testdata/scenarios/security-wait.yaml: the
// run asks a question and waits up to an hour for the answer.
const waitQuestion = "Security test, wait for my answer."

// scenariosDir is the flag that serves the waiting scenario (and only it).
func scenariosDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "scenarios"))
	if err != nil {
		t.Fatal(err)
	}
	return "-scenarios-dir=" + dir
}

// edgeRequest is one HTTP request to the gateway's edge.
type edgeRequest struct {
	method, path, body string
	host               string            // the Host header; empty: the address dialled
	header             map[string]string // set as given
	from               string            // source IP; empty: any
}

// httpClient returns a client whose connections come from the IP from
// (any loopback address works on Linux), one connection per request.
func httpClient(from string) *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

// do sends r to the gateway at addr and returns the status and (the first
// 64 KiB of) the body.
func (r edgeRequest) do(t *testing.T, ctx context.Context, addr string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, r.method, "http://"+addr+r.path, strings.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	if r.host != "" {
		req.Host = r.host
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	resp, err := httpClient(r.from).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(b)
}

// wsConn is a WebSocket handshake's connection, open when it was answered
// 101.
type wsConn struct {
	conn   net.Conn
	status int
	body   string
}

func (c *wsConn) Close() { _ = c.conn.Close() }

// wsHandshake sends a complete WebSocket opening handshake for path with
// the extra headers and reads the answer. A 101 leaves the connection open
// (the caller closes it); anything else is read and closed.
func wsHandshake(t *testing.T, ctx context.Context, addr, path string, header map[string]string) *wsConn {
	t.Helper()
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	var b strings.Builder
	b.WriteString("GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\n")
	b.WriteString("Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n")
	for k, v := range header {
		b.WriteString(k + ": " + v + "\r\n")
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		conn.Close()
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		conn.Close()
		t.Fatalf("WebSocket handshake %s: %v", path, err)
	}
	c := &wsConn{conn: conn, status: resp.StatusCode}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		c.body = string(body)
		conn.Close()
		return c
	}
	_ = conn.SetDeadline(time.Time{})
	t.Cleanup(c.Close)
	return c
}

// waitingRun starts a run of waitQuestion (the suite must serve
// testdata/scenarios) and returns its id once it waits for its answer, so
// that its streams stay open; the run is cancelled when the test ends.
func waitingRun(t *testing.T, c *tenantClient) string {
	t.Helper()
	ctx := c.ctx(t)
	started, err := c.gw.StartRun(ctx, &baagentv1.StartRunRequest{Spec: &baagentv1.RunSpec{Input: waitQuestion}})
	if err != nil {
		t.Fatalf("StartRun: %v", err)
	}
	id := started.GetRun().GetRunId()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+c.key), 10*time.Second)
		defer cancel()
		_, _ = c.gw.CancelRun(ctx, &baagentv1.CancelRunRequest{RunId: id, Reason: "test over"})
	})
	// Polled with unary calls, which hold nothing once answered (a stream
	// would hold one of the key's stream slots until the server noticed
	// its end).
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		got, err := c.gw.GetRun(ctx, &baagentv1.GetRunRequest{RunId: id})
		if err != nil {
			t.Fatalf("GetRun %s: %v", id, err)
		}
		switch got.GetRun().GetState() {
		case baagentv1.RunState_RUN_STATE_WAITING_INPUT:
			return id
		case baagentv1.RunState_RUN_STATE_COMPLETED, baagentv1.RunState_RUN_STATE_FAILED, baagentv1.RunState_RUN_STATE_CANCELLED:
			t.Fatalf("run %s ended (%s) before it asked its question", id, got.GetRun().GetState())
		}
		select {
		case <-ctx.Done():
			t.Fatalf("run %s never waited for its answer: %v", id, ctx.Err())
		case <-tick.C:
		}
	}
}

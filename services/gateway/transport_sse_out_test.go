package gateway

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/baagent/baagent/services/gateway/internal/hub"
)

// Over HTTP/1.1 the stream is written straight to the connection, which
// carries it without chunking and closes after the terminal event.
func TestSSEOverHTTP11IsUnchunkedAndClosedAtTheEnd(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := testCtx(t)
	r := e.run("acme", "run-raw")
	publishN(t, r, 3)
	if _, err := r.Complete(ctx, "ok"); err != nil {
		t.Fatal(err)
	}
	c, err := e.sse(ctx, "/v1/runs/run-raw/events?cursor=earliest", bearerHeader(keyAcme))
	if err != nil {
		t.Fatal(err)
	}
	resp := c.resp
	if got := resp.Header.Get("Content-Type"); got != "text/event-stream" {
		t.Errorf("Content-Type %q", got)
	}
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("headers %v", resp.Header)
	}
	if len(resp.TransferEncoding) != 0 || !resp.Close {
		t.Errorf("transfer encoding %v, close %v: want the body delimited by the connection's close", resp.TransferEncoding, resp.Close)
	}
	evs, err := c.all()
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 4 || evs[3].event != "complete" || evs[3].id != "4" {
		t.Fatalf("events %+v", evs)
	}
}

// Where the connection cannot be taken over (HTTP/2, a wrapping
// ResponseWriter) the stream goes through the ResponseWriter.
func TestSSEWithoutHijackWritesThroughTheResponseWriter(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := testCtx(t)
	r := e.run("acme", "run-rw")
	publishN(t, r, 5)
	if _, err := r.Complete(ctx, "ok"); err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/v1/runs/run-rw/events?cursor=earliest", nil)
	req.Header = bearerHeader(keyAcme)
	rec := httptest.NewRecorder() // cannot be hijacked
	e.srv.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, headers %v", rec.Code, rec.Header())
	}
	body := rec.Body.String()
	if !strings.HasPrefix(body, "retry: 1000\n: stream open\n\n") {
		t.Fatalf("body starts %q", body[:min(len(body), 40)])
	}
	for i := 1; i <= 6; i++ {
		if !strings.Contains(body, "id: "+string(rune('0'+i))+"\n") {
			t.Fatalf("event %d missing from %q", i, body)
		}
	}
	if !strings.HasSuffix(body, "\n\n") || !strings.Contains(body, "event: complete\n") {
		t.Fatalf("body %q", body)
	}
}

// Stopping the server ends open SSE streams (on connections net/http no
// longer tracks) and Run returns only after they have ended.
func TestShutdownEndsOpenSSEStreams(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := testCtx(t)
	r := e.run("acme", "run-stop")
	publishN(t, r, 2)
	c, err := e.sse(ctx, "/v1/runs/run-stop/events?cursor=earliest", bearerHeader(keyAcme))
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	for range 2 {
		if _, err := c.next(); err != nil {
			t.Fatal(err)
		}
	}
	stopped := make(chan error, 1)
	go func() { stopped <- e.stop() }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return with a stream open")
	}
	if got := streamClients(t, e, "sse"); got != 0 {
		t.Fatalf("%d SSE clients still counted after Run returned", got)
	}
	readErr := make(chan error, 1)
	go func() {
		_, err := c.next()
		readErr <- err
	}()
	select {
	case err := <-readErr:
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("client read after shutdown: %v, want the stream ended", err)
		}
	case <-ctx.Done():
		t.Fatal("the client's stream stayed open after shutdown")
	}
}

// A client that goes away mid-stream is noticed without waiting for a
// write to fail: the hijacked connection is watched.
func TestSSEClientDisconnectReleasesItsSubscription(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := testCtx(t)
	r := e.run("acme", "run-gone")
	publishN(t, r, 1)
	c, err := e.sse(ctx, "/v1/runs/run-gone/events?cursor=earliest", bearerHeader(keyAcme))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.next(); err != nil {
		t.Fatal(err)
	}
	waitClients(ctx, t, e, 1)
	c.close()
	waitClients(ctx, t, e, 0) // no event is published meanwhile
}

// An SSE frame is the id, event and data lines and the blank line.
func TestSSEFrameOfAnEntry(t *testing.T) {
	t.Parallel()
	e := &hub.Entry{Cursor: "7", Type: "text_delta", JSON: []byte(`{"cursor":"7"}`)}
	if got, want := string(appendSSE(nil, e)), "id: 7\nevent: text_delta\ndata: {\"cursor\":\"7\"}\n\n"; got != want {
		t.Errorf("frame %q, want %q", got, want)
	}
	// A reset that resumes from the start has no cursor: no id line.
	e = &hub.Entry{Type: hub.TypeStreamReset, JSON: []byte(`{}`)}
	if got, want := string(appendSSE(nil, e)), "event: stream_reset\ndata: {}\n\n"; got != want {
		t.Errorf("frame %q, want %q", got, want)
	}
}

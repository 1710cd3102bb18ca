package wsock

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestAcceptKeyFromRFC(t *testing.T) {
	// RFC 6455 §1.3.
	if got := Accept("dGhlIHNhbXBsZSBub25jZQ=="); got != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("Accept = %q", got)
	}
}

func TestFrameRoundTrip(t *testing.T) {
	for _, n := range []int{0, 5, 125, 126, 65535, 65536} {
		p := bytes.Repeat([]byte{'a'}, n)
		b := AppendMaskedFrame(nil, OpText, p, [4]byte{1, 2, 3, 4})
		f, err := ReadFrame(bytes.NewReader(b), nil, 1<<20)
		if err != nil || !f.Fin || f.Op != OpText || !bytes.Equal(f.Payload, p) {
			t.Fatalf("n=%d: %v %+v", n, err, f.Op)
		}
	}
}

func TestReadFrameRefuses(t *testing.T) {
	mask := [4]byte{9, 9, 9, 9}
	cases := map[string][]byte{
		"unmasked":         AppendFrame(nil, OpText, []byte("x")),
		"reserved bit":     func() []byte { b := AppendMaskedFrame(nil, OpText, []byte("x"), mask); b[0] |= 0x40; return b }(),
		"unknown opcode":   func() []byte { b := AppendMaskedFrame(nil, OpText, []byte("x"), mask); b[0] = 0x83; return b }(),
		"big control":      AppendMaskedFrame(nil, OpPing, bytes.Repeat([]byte{1}, 126), mask),
		"fragmented ping":  func() []byte { b := AppendMaskedFrame(nil, OpPing, nil, mask); b[0] &^= 0x80; return b }(),
		"too large":        AppendMaskedFrame(nil, OpBinary, make([]byte, 2000), mask),
		"truncated header": {0x81},
		"truncated body":   AppendMaskedFrame(nil, OpText, []byte("hello"), mask)[:8],
	}
	for name, b := range cases {
		if _, err := ReadFrame(bytes.NewReader(b), nil, 1000); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzReadFrame(f *testing.F) {
	f.Add(AppendMaskedFrame(nil, OpText, []byte("hello"), [4]byte{1, 2, 3, 4}))
	f.Add(AppendMaskedFrame(nil, OpClose, []byte{3, 232}, [4]byte{}))
	f.Add([]byte{0x81, 0xFF, 0, 0, 0, 0, 0, 0, 0, 10})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := ReadFrame(bytes.NewReader(b), nil, 4096)
		if err != nil {
			return
		}
		if len(fr.Payload) > 4096 || (fr.Op >= OpClose && len(fr.Payload) > 125) {
			t.Fatalf("accepted payload of %d bytes, op %d", len(fr.Payload), fr.Op)
		}
		// Re-encoding what was read and reading it again is stable.
		again, err := ReadFrame(bytes.NewReader(AppendMaskedFrame(nil, fr.Op, fr.Payload, [4]byte{7, 7, 7, 7})), nil, 4096)
		if err != nil || !bytes.Equal(again.Payload, fr.Payload) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func TestHandshakeMessagesPingsAndClose(t *testing.T) {
	srvErr := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Upgrade(w, r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, m := range []string{"one", strings.Repeat("x", 70000)} {
			if err := c.WriteText([]byte(m), time.Second); err != nil {
				srvErr <- err
				return
			}
		}
		_ = c.Ping(time.Second)
		srvErr <- c.Close(CloseTryAgain, "slow_consumer", time.Second)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m1, err := c.Read()
	if err != nil || string(m1) != "one" {
		t.Fatalf("first: %q %v", m1, err)
	}
	m2, err := c.Read()
	if err != nil || len(m2) != 70000 {
		t.Fatalf("second: %d %v", len(m2), err)
	}
	_, err = c.Read()
	var ce *CloseError
	if !errors.As(err, &ce) || ce.Code != CloseTryAgain || ce.Reason != "slow_consumer" {
		t.Fatalf("close: %v", err)
	}
	// Answer the close so the server's handshake completes.
	if _, err := c.Conn().Write(AppendMaskedFrame(nil, OpClose, []byte{0x03, 0xF5}, [4]byte{1, 1, 1, 1})); err != nil {
		t.Fatal(err)
	}
	if err := <-srvErr; err != nil {
		t.Fatalf("server Close: %v", err)
	}
}

func TestClientPingIsAnsweredAndCloseEchoed(t *testing.T) {
	done := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Upgrade(w, r)
		if err != nil {
			return
		}
		done <- c.Err()
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := [4]byte{5, 6, 7, 8}
	var b []byte
	b = AppendMaskedFrame(b, OpPing, []byte("hi"), m)
	b = AppendMaskedFrame(b, OpText, []byte("ignored"), m)
	b = AppendMaskedFrame(b, OpClose, []byte{0x03, 0xE8}, m)
	if _, err := c.Conn().Write(b); err != nil {
		t.Fatal(err)
	}
	// The pong is not a message; the echoed close is.
	_, err = c.Read()
	var ce *CloseError
	if !errors.As(err, &ce) || ce.Code != CloseNormal {
		t.Fatalf("want echoed close 1000, got %v", err)
	}
	if err := <-done; !errors.Is(err, io.EOF) {
		t.Fatalf("server reader ended with %v", err)
	}
}

func TestCheckRefusesBadUpgrades(t *testing.T) {
	good := func() *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/ws", nil)
		r.Header.Set("Connection", "keep-alive, Upgrade")
		r.Header.Set("Upgrade", "websocket")
		r.Header.Set("Sec-WebSocket-Version", "13")
		r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		return r
	}
	if err := Check(good()); err != nil {
		t.Fatalf("good request refused: %v", err)
	}
	for name, mod := range map[string]func(*http.Request){
		"post":       func(r *http.Request) { r.Method = http.MethodPost },
		"no upgrade": func(r *http.Request) { r.Header.Del("Upgrade") },
		"version 8":  func(r *http.Request) { r.Header.Set("Sec-WebSocket-Version", "8") },
		"short key":  func(r *http.Request) { r.Header.Set("Sec-WebSocket-Key", "YWJj") },
		"no conn":    func(r *http.Request) { r.Header.Set("Connection", "close") },
	} {
		r := good()
		mod(r)
		var he *HandshakeError
		if err := Check(r); !errors.As(err, &he) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestWriteTextsSendsOneFramePerMessageInOrder(t *testing.T) {
	msgs := [][]byte{[]byte("a"), bytes.Repeat([]byte("m"), 300), bytes.Repeat([]byte("L"), 70000), []byte(`{"seq":4}`)}
	srvErr := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Upgrade(w, r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := c.WriteTexts(msgs, time.Second); err != nil {
			srvErr <- err
			return
		}
		if err := c.WriteTexts(msgs[:1], time.Second); err != nil {
			srvErr <- err
			return
		}
		srvErr <- c.Close(CloseNormal, "", time.Second)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i, want := range append(msgs, msgs[0]) {
		got, err := c.Read()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("message %d: %d bytes, %v; want %d bytes", i, len(got), err, len(want))
		}
	}
	if _, err := c.Conn().Write(AppendMaskedFrame(nil, OpClose, []byte{0x03, 0xE8}, [4]byte{1, 1, 1, 1})); err != nil {
		t.Fatal(err)
	}
	if err := <-srvErr; err != nil {
		t.Fatalf("server: %v", err)
	}
}

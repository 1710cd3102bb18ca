//go:build darwin || linux || openbsd

package nbwrite

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// pair returns both ends of a loopback TCP connection.
func pair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := lis.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

func TestTryWriteSendsFramesInOrder(t *testing.T) {
	server, client := pair(t)
	w := New(server)
	if w == nil {
		t.Fatal("no non-blocking writer for a TCP connection")
	}
	frames := [][]byte{[]byte("id: 1\n"), []byte("data: {}\n\n"), []byte("id: 2\n\n")}
	n, err := w.TryWrite(frames)
	want := bytes.Join(frames, nil)
	if err != nil || n != len(want) {
		t.Fatalf("TryWrite = %d, %v; want %d, nil", n, err, len(want))
	}
	if n, err := w.TryWrite(frames[:1]); err != nil || n != len(frames[0]) {
		t.Fatalf("one frame: %d, %v", n, err)
	}
	got := make([]byte, len(want)+len(frames[0]))
	_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(client, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, append(want, frames[0]...)) {
		t.Fatalf("read %q", got)
	}
}

// A peer that does not read fills the socket: TryWrite then returns a
// short count (eventually 0) without an error and without waiting.
func TestTryWriteNeverWaitsForAFullSocket(t *testing.T) {
	server, _ := pair(t)
	_ = server.(*net.TCPConn).SetWriteBuffer(16 << 10)
	w := New(server)
	chunk := [][]byte{bytes.Repeat([]byte("z"), 64<<10)}
	start := time.Now()
	full := false
	for range 100000 {
		n, err := w.TryWrite(chunk)
		if err != nil {
			t.Fatalf("TryWrite on a full socket: %v", err)
		}
		if n == 0 {
			full = true
			break
		}
	}
	if !full {
		t.Fatal("6.4 GB went into a socket nobody reads")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("TryWrite waited: %v", d)
	}
}

func TestTryWriteAfterCloseFails(t *testing.T) {
	server, _ := pair(t)
	w := New(server)
	server.Close()
	if _, err := w.TryWrite([][]byte{[]byte("x")}); err == nil {
		t.Fatal("TryWrite on a closed connection: no error")
	}
}

func TestNewRefusesWhatIsNotASocket(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if New(a) != nil {
		t.Fatal("a non-blocking writer for an in-memory pipe")
	}
}

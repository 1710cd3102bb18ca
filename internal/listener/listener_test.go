package listener

import (
	"net"
	"strings"
	"testing"
)

func TestListenIsIdempotentAndCloseReleases(t *testing.T) {
	t.Parallel()
	l := New("127.0.0.1:0", "test")
	if l.Addr() != nil {
		t.Fatal("Addr before Listen is not nil")
	}
	if err := l.Listen(); err != nil {
		t.Fatal(err)
	}
	addr := l.Addr()
	if err := l.Listen(); err != nil || l.Addr().String() != addr.String() {
		t.Fatalf("second Listen: %v, addr %v then %v", err, addr, l.Addr())
	}
	bound, err := l.Bound()
	if err != nil || bound.Addr().String() != addr.String() {
		t.Fatalf("Bound: %v, %v", bound, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l.Addr() != nil {
		t.Fatal("Addr after Close is not nil")
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// The port is free again.
	again, err := net.Listen("tcp", addr.String())
	if err != nil {
		t.Fatalf("port not released: %v", err)
	}
	_ = again.Close()
}

func TestListenErrorNamesOwnerAndAddress(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := busy.Addr().String()
	err = New(addr, "service skills").Listen()
	if err == nil || !strings.HasPrefix(err.Error(), "service skills: listen on "+addr+": ") {
		t.Fatalf("Listen on a busy port: %v", err)
	}
}

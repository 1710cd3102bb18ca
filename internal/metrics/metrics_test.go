package metrics

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestServeMetrics(t *testing.T) {
	t.Parallel()

	reg := NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "baagent_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Add(3)

	s, err := NewServer(Options{Addr: "127.0.0.1:0", Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()

	resp, err := http.Get("http://" + s.Addr().String() + Path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	for _, want := range []string{"go_goroutines", "process_", "baagent_test_total 3", "promhttp_metric_handler_requests_total"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
}

func TestHandlerOnlyServesMetrics(t *testing.T) {
	t.Parallel()

	s, err := NewServer(Options{Registry: NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/other", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("GET /other: %d, want 404", rec.Code)
	}
}

func TestTwoServersShareRegistry(t *testing.T) {
	t.Parallel()

	reg := NewRegistry()
	for range 2 {
		if _, err := NewServer(Options{Registry: reg}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestListenPortInUse(t *testing.T) {
	t.Parallel()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().String()
	s, err := NewServer(Options{Addr: addr, Registry: NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Serve(context.Background())
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Fatalf("want error naming %s, got %v", addr, err)
	}
}

func TestNewServerNeedsRegistry(t *testing.T) {
	t.Parallel()

	if _, err := NewServer(Options{}); err == nil {
		t.Fatal("want error without registry")
	}
}

// Package harness starts the whole suite (-target=all) in the test process
// on loopback ports, with every log record captured, for the reliability
// and security tests under test/reliability.
package harness

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/baagent/baagent/cmd/baagent/app"
	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/internal/topology"
)

// Logs is a goroutine-safe buffer of JSON log records.
type Logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String returns everything logged so far.
func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Suite is a running -target=all process inside the test.
type Suite struct {
	App  *app.App
	Cfg  *app.Config
	Logs *Logs
}

// RepoRoot is the module root, found from this file's location so that
// tests in any package below test/reliability can use the examples.
func RepoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the harness source")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Args puts every listener on a free loopback port and the state in a
// temporary directory; extra flags come last and win.
func Args(t testing.TB, extra ...string) []string {
	t.Helper()
	root := RepoRoot(t)
	args := []string{
		"-data-dir=" + t.TempDir(),
		"-metrics-addr=127.0.0.1:0",
		"-embedded-nats-addr=127.0.0.1:0",
		"-gateway-http-listen=127.0.0.1:0",
		"-skills-dir=" + filepath.Join(root, "examples", "skills"),
		"-workspace-seed-dir=" + filepath.Join(root, "examples", "data"),
		"-scenarios-dir=" + filepath.Join(root, "examples", "scenarios"),
		"-log-level=debug",
		"-shutdown-timeout=2s",
	}
	for _, svc := range config.Services {
		args = append(args, "-"+svc+"-listen=127.0.0.1:0")
	}
	return append(args, extra...)
}

// Start loads the flags (env supplies the environment variables config
// reads), starts the suite, waits until every service is SERVING and stops
// it when the test ends, failing the test if shutdown reports an error.
func Start(t testing.TB, args []string, env map[string]string) *Suite {
	t.Helper()
	cfg, err := app.LoadConfig(args, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	logs := &Logs{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := app.New(ctx, cfg, log)
	if err != nil {
		t.Fatalf("app.New: %v", err)
	}
	testkit.Run(t, context.Background(), a.Run)
	s := &Suite{App: a, Cfg: cfg, Logs: logs}
	for svc := range topology.GRPCServices {
		if err := s.WaitServing(ctx, svc); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// Addr is the loopback address at which svc serves gRPC.
func (s *Suite) Addr(svc string) string { return s.App.Addr(svc).String() }

// Dial connects to svc; the connection is closed when the test ends.
func (s *Suite) Dial(t testing.TB, svc string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	conn, err := grpc.NewClient(s.Addr(svc), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// WaitServing blocks until svc reports SERVING on its health service.
func (s *Suite) WaitServing(ctx context.Context, svc string) error {
	conn, err := grpc.NewClient(s.Addr(svc), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	stream, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{Service: topology.GRPCServices[svc]})
	if err != nil {
		return err
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		if resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
	}
}

// Healthy checks every service answers its health check now.
func (s *Suite) Healthy(ctx context.Context) error {
	for svc, name := range topology.GRPCServices {
		conn, err := grpc.NewClient(s.Addr(svc), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: name})
		conn.Close()
		if err != nil {
			return err
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return &notServing{svc: svc, status: resp.GetStatus()}
		}
	}
	return nil
}

type notServing struct {
	svc    string
	status healthpb.HealthCheckResponse_ServingStatus
}

func (e *notServing) Error() string { return e.svc + " is " + e.status.String() }

// IsLoopback reports whether addr is a loopback TCP address.
func IsLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

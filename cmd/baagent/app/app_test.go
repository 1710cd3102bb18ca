package app

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/internal/topology"
)

// testArgs puts every listener of -target=all on a free loopback port and
// the state in a temporary directory.
func testArgs(t *testing.T, extra ...string) []string {
	t.Helper()
	args := []string{
		"-data-dir=" + t.TempDir(),
		"-metrics-addr=127.0.0.1:0",
		"-embedded-nats-addr=127.0.0.1:0",
		"-gateway-http-listen=127.0.0.1:0",
		"-skills-dir=../../../examples/skills", "-workspace-seed-dir=../../../examples/data", "-scenarios-dir=../../../examples/scenarios",
		"-log-level=warn",
	}
	for _, svc := range config.Services {
		args = append(args, "-"+svc+"-listen=127.0.0.1:0")
	}
	return append(args, extra...)
}

func testLogger() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

func mustLoad(t *testing.T, args []string) *Config {
	t.Helper()
	cfg, err := LoadConfig(args, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// waitServing blocks until the health of service at addr is SERVING, using
// the Watch stream so there is no polling interval to tune.
func waitServing(ctx context.Context, t *testing.T, addr, service string) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		t.Fatalf("watch %s: %v", service, err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("%s at %s never became SERVING: %v", service, addr, err)
		}
		if resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return
		}
	}
}

// startServing builds the app, runs it until the test ends and waits until
// every service is SERVING.
func startServing(t *testing.T, ctx context.Context, cfg *Config, opts ...Option) *App {
	t.Helper()
	a, err := New(ctx, cfg, testLogger(), opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	testkit.Run(t, ctx, a.Run)
	for svc, name := range topology.GRPCServices {
		waitServing(ctx, t, a.Addr(svc).String(), name)
	}
	return a
}

func TestAllTargetServesEveryServiceAndShutsDownCleanly(t *testing.T) {
	cfg := mustLoad(t, testArgs(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	a, err := New(ctx, cfg, testLogger())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()

	bound := map[string]string{}
	for svc, name := range topology.GRPCServices {
		addr := a.Addr(svc)
		if addr == nil {
			t.Fatalf("%s is not running", svc)
		}
		bound[svc] = addr.String()
		waitServing(ctx, t, addr.String(), name)
		waitServing(ctx, t, addr.String(), "") // the server as a whole
	}

	// A validated request reaches the service: an empty one is refused by
	// the edge validation, which proves the service is registered.
	conn, err := grpc.NewClient(a.Addr(config.TargetTokens).String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = baagentv1.NewTokensServiceClient(conn).CountTokens(ctx, &baagentv1.CountTokensRequest{})
	if code := status.Code(err); code != codes.InvalidArgument {
		t.Errorf("CountTokens({}) = %v, want InvalidArgument", err)
	}
	conn.Close()

	// JetStream is up and provisioned.
	js, err := jetstream.New(a.NATS())
	if err != nil {
		t.Fatal(err)
	}
	for _, stream := range []string{"BAAGENT_EVENTS", "BAAGENT_RUNS", "BAAGENT_HISTORY"} {
		if _, err := js.Stream(ctx, stream); err != nil {
			t.Errorf("stream %s: %v", stream, err)
		}
	}
	for _, bucket := range []string{"baagent_checkpoints", "baagent_runs"} {
		if _, err := js.KeyValue(ctx, bucket); err != nil {
			t.Errorf("KV bucket %s: %v", bucket, err)
		}
	}

	// Metrics are served, including the gRPC server metrics.
	resp, err := http.Get("http://" + a.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "grpc") {
		t.Errorf("GET /metrics = %d, body without gRPC metrics:\n%.500s", resp.StatusCode, body)
	}

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10 s of shutdown")
	}
	for svc, addr := range bound {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after shutdown", svc)
		}
	}
}

// newWithoutNATS builds the app for args under a 30 s context that ends
// with the test, and checks that the process (named by what) did not
// connect to NATS.
func newWithoutNATS(t *testing.T, what string, args ...string) (context.Context, *App) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	a, err := New(ctx, mustLoad(t, args), testLogger())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if a.NATS() != nil {
		t.Error(what + " connected to NATS")
	}
	return ctx, a
}

// serveUntilHealthy runs a until target's gRPC service reports serving,
// then stops it; Run must return no error.
func serveUntilHealthy(ctx context.Context, t *testing.T, a *App, target string) {
	t.Helper()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	waitServing(ctx, t, a.Addr(target).String(), topology.GRPCServices[target])
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestSingleTargetNeedsNoNATS(t *testing.T) {
	ctx, a := newWithoutNATS(t, "tokens alone", "-target=tokens", "-tokens-listen=127.0.0.1:0", "-metrics-addr=127.0.0.1:0", "-data-dir="+t.TempDir())
	if a.Addr(config.TargetGateway) != nil {
		t.Error("tokens process runs the gateway")
	}
	serveUntilHealthy(ctx, t, a, config.TargetTokens)
}

// TestSkillsStoreOffNeedsNoNATS: skills uses NATS only for its store.
func TestSkillsStoreOffNeedsNoNATS(t *testing.T) {
	ctx, a := newWithoutNATS(t, "skills with -skills-store=off", "-target=skills", "-skills-store=off", "-skills-listen=127.0.0.1:0", "-metrics-addr=127.0.0.1:0",
		"-data-dir="+t.TempDir(), "-skills-dir=../../../examples/skills", "-tokens-addr=127.0.0.1:1")
	serveUntilHealthy(ctx, t, a, config.TargetSkills)
}

func TestPortInUseFailsFastNamingTheSetting(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := mustLoad(t, testArgs(t, "-skills-listen="+busy.Addr().String()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = New(ctx, cfg, testLogger())
	if err == nil {
		t.Fatal("New succeeded with the skills port taken")
	}
	for _, want := range []string{"setting skills-listen", busy.Addr().String()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	// Nothing is left bound: the same configuration with the port freed
	// starts (the metrics and other ports were released on failure).
	busy.Close()
	a, err := New(ctx, cfg, testLogger())
	if err != nil {
		t.Fatalf("New after freeing the port: %v", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	stop()
	if err := a.Run(runCtx); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestExternalNATSUnreachableFailsNamingTheSetting(t *testing.T) {
	// A port that nothing listens on: bind and close.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg := mustLoad(t, []string{"-target=context", "-context-listen=127.0.0.1:0", "-metrics-addr=127.0.0.1:0", "-data-dir=" + t.TempDir(), "-nats-url=nats://" + addr})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = New(ctx, cfg, testLogger())
	if err == nil || !strings.Contains(err.Error(), "setting nats-url") {
		t.Fatalf("New = %v, want an error naming nats-url", err)
	}
}

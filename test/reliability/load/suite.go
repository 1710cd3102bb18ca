package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/baagent/baagent/cmd/baagent/app"
	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/internal/topology"
)

// SuiteOptions says where the suite keeps its state and what it serves.
type SuiteOptions struct {
	// RepoRoot is the module root (for the sample data and skills).
	RepoRoot string
	// DataDir holds JetStream, workspaces and artifacts; ScenariosDir the
	// scenario files (WriteScenario writes the load scenario there).
	DataDir, ScenariosDir string
	// Tenants is the number of tenants, each with its own API key
	// ("load-test-api-key-<i>" for tenant "load-<i>"): the orchestrator bounds the
	// runs of one tenant, so load is spread over several.
	Tenants int
	// Extra flags come last and win.
	Extra []string
}

// Suite is a running -target=all process inside this one.
type Suite struct {
	App *app.App
	// Keys are the gateway API keys, one per tenant.
	Keys []string
	// Logs keeps the warnings and errors the suite logged (bounded).
	Logs *LogTail

	stop context.CancelFunc
	done chan error
}

// StartSuite builds and starts the suite on free loopback ports and waits
// until every service is SERVING.
func StartSuite(ctx context.Context, o SuiteOptions) (*Suite, error) {
	if o.Tenants <= 0 {
		return nil, errors.New("SuiteOptions.Tenants must be positive")
	}
	keys := make([]string, o.Tenants)
	pairs := make([]string, o.Tenants)
	for i := range keys {
		keys[i] = fmt.Sprintf("load-test-api-key-%04d", i)
		pairs[i] = fmt.Sprintf("%s=load-%d", keys[i], i)
	}
	args := []string{
		"-data-dir=" + o.DataDir,
		"-metrics-addr=127.0.0.1:0",
		"-embedded-nats-addr=127.0.0.1:0",
		"-gateway-http-listen=127.0.0.1:0",
		"-skills-dir=" + filepath.Join(o.RepoRoot, "examples", "skills"),
		"-workspace-seed-dir=" + filepath.Join(o.RepoRoot, "examples", "data"),
		"-scenarios-dir=" + o.ScenariosDir,
		"-log-level=warn",
		"-shutdown-timeout=5s",
	}
	for _, svc := range config.Services {
		args = append(args, "-"+svc+"-listen=127.0.0.1:0")
	}
	args = append(args, o.Extra...)
	env := map[string]string{"BAAGENT_API_KEYS": strings.Join(pairs, ",")}
	cfg, err := app.LoadConfig(args, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	logs := &LogTail{max: 50}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := app.New(ctx, cfg, log)
	if err != nil {
		return nil, fmt.Errorf("app.New: %w", err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	s := &Suite{App: a, Keys: keys, Logs: logs, stop: stop, done: make(chan error, 1)}
	go func() { s.done <- a.Run(runCtx) }()
	for svc, name := range topology.GRPCServices {
		if err := waitServing(ctx, a.Addr(svc), name); err != nil {
			_ = s.Stop()
			return nil, fmt.Errorf("%s: %w", svc, err)
		}
	}
	return s, nil
}

// Stop shuts the suite down and returns what Run returned.
func (s *Suite) Stop() error {
	s.stop()
	return <-s.done
}

// Tenant is the tenant of API key i.
func Tenant(i int) string { return fmt.Sprintf("load-%d", i) }

// waitServing blocks until the service reports SERVING on its health
// Watch stream (no polling interval to tune).
func waitServing(ctx context.Context, addr net.Addr, service string) error {
	conn, err := grpc.NewClient(addr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	stream, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return err
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("never SERVING: %w", err)
		}
		if resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
	}
}

// LogTail keeps the first max log records written to it and counts the
// rest, so a long soak's warnings cannot grow memory.
type LogTail struct {
	mu      sync.Mutex
	max     int
	records []string
	dropped int
}

func (l *LogTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.records) < l.max {
		l.records = append(l.records, strings.TrimSpace(string(p)))
	} else {
		l.dropped++
	}
	return len(p), nil
}

// Count is the number of records written.
func (l *LogTail) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.records) + l.dropped
}

// String returns the records kept and how many were not.
func (l *LogTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := strings.Join(l.records, "\n")
	if l.dropped > 0 {
		s += fmt.Sprintf("\n… and %d more", l.dropped)
	}
	return s
}

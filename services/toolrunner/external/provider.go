package external

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/retry"
)

// Defaults of a provider entry.
const (
	DefaultProviderTimeout = 30 * time.Second
	DefaultRefreshInterval = time.Minute
	// maxMsgBytes bounds one ExecuteTool answer, as the toolrunner's own
	// gRPC server bounds its messages.
	maxMsgBytes = 16 << 20
)

// providerSource is a tool.Source backed by one ToolProvider server. Its run
// loop describes the tools on connect, every RefreshInterval and whenever the
// connection leaves READY, and withdraws them while the provider is down.
type providerSource struct {
	*sourceState
	cfg      ProviderConfig
	backoff  retry.Backoff
	dialOpts []grpc.DialOption

	// conn and client exist while run runs; tools are only offered then.
	connMu sync.RWMutex
	conn   *grpc.ClientConn
	client baagentv1.ToolProviderServiceClient
}

// providerDialOptions builds the gRPC options of a provider entry and checks
// its target, so that New fails on a bad entry before starting anything.
func providerDialOptions(cfg ProviderConfig, b retry.Backoff) ([]grpc.DialOption, error) {
	creds, err := cfg.TLS.Credentials()
	if err != nil {
		return nil, fmt.Errorf("provider %q: tls: %w", cfg.Name, err)
	}
	b = reconnectBackoff(b)
	// gRPC reconnects on its own; its backoff follows ours so that a
	// provider that comes back is seen within Backoff.Max.
	dialOpts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: b.Initial, Multiplier: b.Multiplier, Jitter: b.Jitter, MaxDelay: b.Max},
			MinConnectTimeout: min(5*time.Second, max(b.Max, time.Second)),
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgBytes), grpc.MaxCallSendMsgSize(maxMsgBytes)),
	}
	// NewClient does not connect; run makes the real connection.
	probe, err := grpc.NewClient(cfg.Address, dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("provider %q: address %q: %w", cfg.Name, cfg.Address, err)
	}
	_ = probe.Close()
	return dialOpts, nil
}

func newProviderSource(cfg ProviderConfig, dialOpts []grpc.DialOption, b retry.Backoff, log *slog.Logger, m *metrics, names *nameRegistry) *providerSource {
	if cfg.Timeout == 0 {
		cfg.Timeout = Duration(DefaultProviderTimeout)
	}
	if cfg.RefreshInterval == 0 {
		cfg.RefreshInterval = Duration(DefaultRefreshInterval)
	}
	return &providerSource{
		sourceState: newSourceState("provider:"+cfg.Name, log, m, names),
		cfg:         cfg,
		backoff:     reconnectBackoff(b),
		dialOpts:    dialOpts,
	}
}

// run keeps the tool list current until ctx ends, then closes the
// connection.
func (p *providerSource) run(ctx context.Context) {
	conn, err := grpc.NewClient(p.cfg.Address, p.dialOpts...)
	if err != nil { // checked by New; cannot happen
		p.log.Error("provider connection", "error", err)
		return
	}
	p.connMu.Lock()
	p.conn, p.client = conn, baagentv1.NewToolProviderServiceClient(conn)
	p.connMu.Unlock()
	defer func() {
		p.setDown(context.Cause(ctx))
		p.names.release(p.name)
		p.connMu.Lock()
		p.conn, p.client = nil, nil
		p.connMu.Unlock()
		if err := conn.Close(); err != nil {
			p.log.Debug("closing provider connection", "error", err)
		}
	}()
	failures := 0
	for ctx.Err() == nil {
		if err := p.refresh(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			p.metrics.listFailures.WithLabelValues(p.name).Inc()
			if !p.setDown(err) {
				p.log.Debug("provider still unreachable", "error", err, "attempt", failures+1)
			}
			if !retry.Sleep(ctx, p.backoff.Jittered(failures)) {
				return
			}
			failures++
			continue
		}
		failures = 0
		p.waitForChange(ctx)
	}
}

// refresh describes the provider's tools and publishes them.
func (p *providerSource) refresh(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout.Std())
	defer cancel()
	client, _ := p.current()
	resp, err := client.DescribeTools(rctx, &baagentv1.DescribeToolsRequest{})
	if err != nil {
		return fmt.Errorf("DescribeTools: %w", err)
	}
	tools, invalid := providerTools(p, resp.GetTools())
	p.setTools(tools, invalid)
	return nil
}

// waitForChange returns after RefreshInterval, when the connection leaves
// READY (the provider went away or restarted), or when ctx ends.
func (p *providerSource) waitForChange(ctx context.Context) {
	wctx, cancel := context.WithTimeout(ctx, p.cfg.RefreshInterval.Std())
	defer cancel()
	_, conn := p.current()
	for {
		s := conn.GetState()
		if s != connectivity.Ready {
			return // dropped, idle or reconnecting: describe again
		}
		if !conn.WaitForStateChange(wctx, s) {
			return // refresh interval elapsed or ctx ended
		}
	}
}

// current returns the client and connection while run runs, else nils.
func (p *providerSource) current() (baagentv1.ToolProviderServiceClient, *grpc.ClientConn) {
	p.connMu.RLock()
	defer p.connMu.RUnlock()
	return p.client, p.conn
}

// keep applies the entry's tool filter.
func (p *providerSource) keep(name string) bool {
	return len(p.cfg.Tools) == 0 || slices.Contains(p.cfg.Tools, name)
}

// attemptTimeout is the default attempt timeout of a tool of this provider.
func (p *providerSource) attemptTimeout() time.Duration { return p.cfg.Timeout.Std() }

var errNoOutcome = errors.New("the provider answered with neither data nor an error")

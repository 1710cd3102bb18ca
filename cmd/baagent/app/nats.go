package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/internal/natsx"
)

// natsStartupTimeout bounds the first connection to an external NATS and
// provisioning, so a process whose NATS never appears exits with a clear
// error (and is restarted by its supervisor) instead of hanging.
const natsStartupTimeout = 30 * time.Second

// startNATS starts the embedded server in -target=all and connects and
// provisions JetStream when a service this process runs needs it.
func (a *App) startNATS(ctx context.Context) error {
	needed := false
	for _, svc := range a.order {
		// Skills uses NATS only for its store of uploaded skills.
		off := svc == config.TargetSkills && !a.cfg.Skills.StoreEnabled()
		needed = needed || config.NeedsNATS(svc) && !off
	}
	if !needed {
		return nil
	}
	url := a.cfg.NATSURL
	setting := "nats-url"
	if a.cfg.Target == config.TargetAll {
		host, portStr, err := net.SplitHostPort(a.cfg.EmbeddedNATSAddr)
		if err != nil {
			return fmt.Errorf("setting embedded-nats-addr: %w", err)
		}
		port, _ := strconv.Atoi(portStr)
		if port == 0 {
			port = -1 // nats-server's "any free port"
		}
		a.embedded, err = natsx.StartEmbedded(natsx.EmbeddedOptions{
			Host:     host,
			Port:     port,
			StoreDir: filepath.Join(a.cfg.DataDir, "jetstream"),
			Logger:   a.log,
		})
		if err != nil {
			return fmt.Errorf("setting embedded-nats-addr: %w", err)
		}
		a.cleanup = append(a.cleanup, a.embedded.Shutdown)
		url = a.embedded.ClientURL()
		setting = "embedded-nats-addr"
	}

	ctx, cancel := context.WithTimeout(ctx, natsStartupTimeout)
	defer cancel()
	nc, err := natsx.Connect(ctx, url, "baagent-"+a.cfg.Target, a.log)
	if err != nil {
		return fmt.Errorf("setting %s: %w", setting, err)
	}
	a.nc = nc
	a.cleanup = append(a.cleanup, nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("JetStream: %w", err)
	}
	if err := natsx.Provision(ctx, js, natsx.ProvisionConfig{Replicas: a.cfg.NATSReplicas}); err != nil {
		return fmt.Errorf("JetStream (is it enabled on %s?): %w", url, err)
	}
	return nil
}

// jetStream is the JetStream handle on the process's NATS connection.
func (a *App) jetStream() (jetstream.JetStream, error) {
	if a.nc == nil {
		return nil, errors.New("no NATS connection (setting nats-url)")
	}
	js, err := jetstream.New(a.nc)
	if err != nil {
		return nil, fmt.Errorf("JetStream: %w", err)
	}
	return js, nil
}

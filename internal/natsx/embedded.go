// Package natsx is the NATS plumbing shared by the services: an embedded
// JetStream server for the all-in-one mode, a resilient client connection,
// idempotent provisioning of the streams and buckets the design needs, and
// validated subject builders.
package natsx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Defaults for EmbeddedOptions.
const (
	DefaultEmbeddedHost         = "127.0.0.1"
	DefaultEmbeddedPort         = 4222
	DefaultEmbeddedName         = "baagent"
	DefaultEmbeddedReadyTimeout = 10 * time.Second
)

// EmbeddedOptions configures an in-process NATS server with JetStream.
type EmbeddedOptions struct {
	// Host to listen on; "" means DefaultEmbeddedHost (loopback only).
	Host string
	// Port to listen on; 0 means DefaultEmbeddedPort and -1 a random free
	// port (for tests), as in nats-server.
	Port int
	// StoreDir holds the JetStream file store; required, so that data is
	// never silently kept in a temporary location.
	StoreDir string
	// Name is the server name; "" means DefaultEmbeddedName. Keep it stable
	// across restarts on the same StoreDir.
	Name string
	// Logger receives the server's logs; nil discards them. Server debug
	// logs are enabled when the logger is enabled at debug level.
	Logger *slog.Logger
	// ReadyTimeout bounds startup (including JetStream recovering a large
	// store); 0 means DefaultEmbeddedReadyTimeout.
	ReadyTimeout time.Duration
	// MaxPayload bounds one message in bytes; 0 keeps the NATS default
	// (1 MiB), matching an external server with default settings.
	MaxPayload int32
	// MaxStoreBytes and MaxMemoryBytes cap JetStream's file and memory use;
	// 0 lets the server size them from the machine.
	MaxStoreBytes, MaxMemoryBytes int64
}

// EmbeddedServer is a running in-process NATS server.
type EmbeddedServer struct {
	srv *server.Server
}

// StartEmbedded starts the server and waits until it accepts connections.
// A port already in use is reported as an error naming the address, never
// by exiting the process.
func StartEmbedded(opts EmbeddedOptions) (*EmbeddedServer, error) {
	if opts.StoreDir == "" {
		return nil, errors.New("embedded NATS: StoreDir is required (the JetStream data directory)")
	}
	if opts.Host == "" {
		opts.Host = DefaultEmbeddedHost
	}
	if opts.Port == 0 {
		opts.Port = DefaultEmbeddedPort
	}
	if opts.Name == "" {
		opts.Name = DefaultEmbeddedName
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = DefaultEmbeddedReadyTimeout
	}
	addr := net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port))
	if opts.Port > 0 {
		// Probe the port so "address already in use" comes back as a wrapped
		// *net.OpError at once, instead of after ReadyTimeout.
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("embedded NATS: listen on %s: %w", addr, err)
		}
		_ = l.Close()
	}

	sopts := &server.Options{
		ServerName:             opts.Name,
		Host:                   opts.Host,
		Port:                   opts.Port,
		JetStream:              true,
		StoreDir:               opts.StoreDir,
		JetStreamMaxStore:      opts.MaxStoreBytes,
		JetStreamMaxMemory:     opts.MaxMemoryBytes,
		MaxPayload:             opts.MaxPayload,
		NoSigs:                 true,
		DisableJetStreamBanner: true,
	}
	srv, err := server.NewServer(sopts)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS on %s: %w", addr, err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sl := newServerLogger(log.With("component", "nats-server"))
	srv.SetLoggerV2(sl, sl.debugEnabled(), false, false)

	srv.Start()
	deadline := time.Now().Add(opts.ReadyTimeout)
	for {
		select {
		case msg := <-sl.fatal:
			srv.Shutdown()
			srv.WaitForShutdown()
			return nil, fmt.Errorf("embedded NATS on %s (store %s): %s", addr, opts.StoreDir, msg)
		default:
		}
		if srv.ReadyForConnections(50 * time.Millisecond) {
			return &EmbeddedServer{srv: srv}, nil
		}
		if time.Now().After(deadline) {
			srv.Shutdown()
			srv.WaitForShutdown()
			return nil, fmt.Errorf("embedded NATS on %s: not ready for connections after %s", addr, opts.ReadyTimeout)
		}
	}
}

// ClientURL is the URL clients connect to, e.g. "nats://127.0.0.1:4222"
// (with the actual port when a random one was requested).
func (e *EmbeddedServer) ClientURL() string { return e.srv.ClientURL() }

// Server exposes the underlying server, e.g. for nats.InProcessServer.
func (e *EmbeddedServer) Server() *server.Server { return e.srv }

// Shutdown stops the server and returns once it has fully shut down and
// flushed its store, so the same StoreDir can be reopened right away.
func (e *EmbeddedServer) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

// serverLogger implements server.Logger over slog. Fatalf does not exit the
// process: it logs, then reports the failure to StartEmbedded.
type serverLogger struct {
	log   *slog.Logger
	fatal chan string
}

func newServerLogger(log *slog.Logger) *serverLogger {
	return &serverLogger{log: log, fatal: make(chan string, 1)}
}

func (l *serverLogger) debugEnabled() bool {
	return l.log.Enabled(context.Background(), slog.LevelDebug)
}

// Noticef logs at info.
func (l *serverLogger) Noticef(format string, v ...any) { l.log.Info(fmt.Sprintf(format, v...)) }

// Warnf logs at warn.
func (l *serverLogger) Warnf(format string, v ...any) { l.log.Warn(fmt.Sprintf(format, v...)) }

// Errorf logs at error.
func (l *serverLogger) Errorf(format string, v ...any) { l.log.Error(fmt.Sprintf(format, v...)) }

// Fatalf logs at error and signals StartEmbedded, keeping the first message.
func (l *serverLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.log.Error(msg, "fatal", true)
	select {
	case l.fatal <- msg:
	default:
	}
}

// Debugf logs at debug.
func (l *serverLogger) Debugf(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }

// Tracef logs at debug; tracing is only on if enabled explicitly.
func (l *serverLogger) Tracef(format string, v ...any) {
	l.log.Debug(fmt.Sprintf(format, v...), "trace", true)
}

var _ server.Logger = (*serverLogger)(nil)

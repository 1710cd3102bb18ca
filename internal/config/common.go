package config

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/baagent/baagent/internal/logging"
)

// Limits of a few settings.
const (
	MinMsgBytes = 1 << 10
	MaxMsgBytes = 1 << 30
)

// Common holds the settings every baagent process has, whichever services
// it runs: what it runs and where its state is, its NATS, its listeners
// and peers, logging and shutdown, the model endpoint and tracing.
type Common struct {
	// Target is TargetAll or one of Services.
	Target string
	// ConfigFile is the YAML file the settings were read from, if any.
	ConfigFile string
	DataDir    string

	// NATSURL is the external NATS of a single-target process.
	NATSURL string
	// EmbeddedNATSAddr is where -target=all runs its embedded NATS.
	EmbeddedNATSAddr string
	// NATSReplicas is the replication factor of the JetStream streams and
	// buckets this process provisions (3 on a three-node NATS cluster).
	NATSReplicas int

	// Listen maps each service to the gRPC address it listens on when this
	// process runs it.
	Listen map[string]string
	// Dial maps each service to the address its peers dial. In
	// -target=all the peers dial the bound loopback listeners instead.
	Dial map[string]string
	// GatewayHTTPAddr serves HTTP/JSON, SSE, WebSocket and the dashboard.
	GatewayHTTPAddr string
	// MetricsAddr serves /metrics for the whole process.
	MetricsAddr string

	LogLevel        string
	ShutdownTimeout time.Duration
	MaxMsgBytes     int

	// ModelBaseURL is an OpenAI-compatible endpoint; empty selects the
	// scripted model, which replays the scenarios in ScenariosDir. The
	// orchestrator's runs and the context service's summaries use it.
	ModelBaseURL string
	ModelAPIKey  string
	Model        string
	ScenariosDir string

	// Tracing (OpenTelemetry). OTLPEndpoint empty: off, unless the
	// OTEL_EXPORTER_OTLP_* environment names an endpoint. OTLPProtocol is
	// "grpc", "http" or "" (the OTEL_* environment, else grpc).
	OTLPEndpoint      string
	OTLPProtocol      string
	OTLPHeaders       map[string]string
	OTLPInsecure      bool
	OTLPExportTimeout time.Duration
	OTLPBatchSize     int
	// TraceSampling is a level: always, high, medium, low or never.
	TraceSampling string
	// TraceServiceName is service.name; empty: OTEL_SERVICE_NAME, else
	// baagent-<target> (baagent for all).
	TraceServiceName string
	TraceEnvironment string
	TraceTags        map[string]string

	// The settings as given, which Validate resolves into Listen, Dial,
	// OTLPHeaders and TraceTags.
	listen, dial           map[string]*string
	otlpHeaders, traceTags string
}

// Runs reports whether this process runs service.
func (c *Common) Runs(service string) bool {
	return c.Target == TargetAll || c.Target == service
}

// RunServices lists the services this process runs, in start order.
func (c *Common) RunServices() []string {
	if c.Target == TargetAll {
		return append([]string(nil), Services...)
	}
	return []string{c.Target}
}

// NeedsNATS reports whether service publishes or consumes on NATS.
func NeedsNATS(service string) bool {
	switch service {
	case TargetGateway, TargetOrchestrator, TargetContext, TargetToolRunner, TargetSkills, TargetMemory:
		// The toolrunner keeps its idempotency records in a KV bucket
		// that every replica shares; skills keeps uploaded skills in
		// JetStream (unless -skills-store=off); memory consumes the
		// capture queue of finished runs.
		return true
	}
	return false
}

// RegisterFlags registers the common settings on fs.
func (c *Common) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.ConfigFile, ConfigFlag, "", "optional YAML file whose keys are these flag names")
	fs.StringVar(&c.Target, "target", TargetAll, "what to run: all, or one of "+strings.Join(Services, ", "))
	fs.StringVar(&c.DataDir, "data-dir", "./data", "state directory (embedded JetStream store)")

	fs.StringVar(&c.NATSURL, "nats-url", "nats://localhost:4222", "NATS server(s) of a single-target process, comma-separated")
	fs.StringVar(&c.EmbeddedNATSAddr, "embedded-nats-addr", "127.0.0.1:4222", "listen address of the embedded NATS in -target=all")
	fs.IntVar(&c.NATSReplicas, "nats-replicas", 1, "replicas of each JetStream stream and KV bucket (1-5; 3 on a three-node cluster)")

	c.listen = map[string]*string{}
	c.dial = map[string]*string{}
	for _, svc := range Services {
		c.listen[svc] = fs.String(svc+"-listen", "", fmt.Sprintf("%s gRPC listen address (default 127.0.0.1:%d in -target=all, else :%d)", svc, DefaultPorts[svc], DefaultPorts[svc]))
		c.dial[svc] = fs.String(svc+"-addr", DefaultDialAddr(svc), fmt.Sprintf("address at which peers reach %s: host:port, dns:///name:port, or static:///host1:port1,host2:port2 listing its replicas (calls go round-robin)", svc))
	}
	fs.StringVar(&c.GatewayHTTPAddr, "gateway-http-listen", "", fmt.Sprintf("gateway HTTP listen address (default 127.0.0.1:%d in -target=all, else :%d)", DefaultGatewayHTTPPort, DefaultGatewayHTTPPort))
	fs.StringVar(&c.MetricsAddr, "metrics-addr", "", fmt.Sprintf("Prometheus /metrics listen address (default 127.0.0.1:%d in -target=all, else :%d)", DefaultMetricsPort, DefaultMetricsPort))

	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 4*time.Second, "how long SIGTERM waits for in-flight requests")
	fs.IntVar(&c.MaxMsgBytes, "max-msg-bytes", 16<<20, "largest gRPC message accepted or sent, in bytes")

	fs.StringVar(&c.ModelBaseURL, "model-base-url", "", "OpenAI-compatible endpoint; empty uses the scripted model")
	fs.StringVar(&c.ModelAPIKey, "model-api-key", "", "API key of the model endpoint (prefer the environment variable)")
	fs.StringVar(&c.Model, "model", "gpt-4o", "default model")
	fs.StringVar(&c.ScenariosDir, "scenarios-dir", "examples/scenarios", "scenarios of the scripted model")

	fs.StringVar(&c.OTLPEndpoint, "otlp-endpoint", "", "OpenTelemetry: OTLP endpoint for traces, host:port or http(s)://host:port; empty: tracing off (unless OTEL_EXPORTER_OTLP_ENDPOINT is set)")
	fs.StringVar(&c.OTLPProtocol, "otlp-protocol", "", "OTLP transport: grpc or http (default grpc, or what OTEL_EXPORTER_OTLP_PROTOCOL says)")
	fs.StringVar(&c.otlpHeaders, "otlp-headers", "", "headers sent with every OTLP export, as k=v,k=v (prefer the environment variable for secrets)")
	fs.BoolVar(&c.OTLPInsecure, "otlp-insecure", false, "export OTLP without TLS to a host:port endpoint (an http:// URL is plaintext anyway)")
	fs.DurationVar(&c.OTLPExportTimeout, "otlp-export-timeout", 5*time.Second, "how long one OTLP export may take")
	fs.IntVar(&c.OTLPBatchSize, "otlp-batch-size", 100, "spans per OTLP export batch (1-10000)")
	fs.StringVar(&c.TraceSampling, "trace-sampling", "always", "share of runs traced, decided once per run: always (1), high (0.5), medium (0.1), low (0.01) or never (0)")
	fs.StringVar(&c.TraceServiceName, "trace-service-name", "", "service.name of this process's spans (default OTEL_SERVICE_NAME, else baagent-<target>, or baagent for all)")
	fs.StringVar(&c.TraceEnvironment, "trace-environment", "", "deployment.environment of this process's spans (e.g. prod, staging)")
	fs.StringVar(&c.traceTags, "trace-tags", "", "extra resource attributes of this process's spans, as k=v,k=v")
}

// Validate checks the common settings, fills in the defaults that depend
// on the target (listen addresses on loopback in -target=all, on every
// interface otherwise) and resolves the settings given as lists.
func (c *Common) Validate() error {
	for _, check := range []func() error{
		c.validateTarget,
		c.validateListeners,
		c.validateNATS,
		c.validateProcess,
		c.validateModel,
		c.validateTracing,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateTarget checks what the process runs and where it keeps state.
func (c *Common) validateTarget() error {
	if c.Target != TargetAll && !IsService(c.Target) {
		return fmt.Errorf("setting target: unknown target %q (want all, %s)", c.Target, strings.Join(Services, ", "))
	}
	if c.DataDir == "" {
		return errors.New("setting data-dir: must not be empty")
	}
	return nil
}

// validateListeners fills in the default listen addresses and checks that
// every listener this process opens is valid and distinct, so a typo
// fails here rather than as a bind error later, and that every peer
// address is one to dial.
func (c *Common) validateListeners() error {
	host := ""
	if c.Target == TargetAll {
		host = "127.0.0.1"
	}
	c.Listen = map[string]string{}
	c.Dial = map[string]string{}
	for _, svc := range Services {
		c.Listen[svc] = *c.listen[svc]
		if c.Listen[svc] == "" {
			c.Listen[svc] = net.JoinHostPort(host, strconv.Itoa(DefaultPorts[svc]))
		}
		c.Dial[svc] = *c.dial[svc]
	}
	if c.GatewayHTTPAddr == "" {
		c.GatewayHTTPAddr = net.JoinHostPort(host, strconv.Itoa(DefaultGatewayHTTPPort))
	}
	if c.MetricsAddr == "" {
		c.MetricsAddr = net.JoinHostPort(host, strconv.Itoa(DefaultMetricsPort))
	}

	bound := map[string]string{}
	checkListen := func(setting, addr string) error {
		if err := checkAddr(addr); err != nil {
			return fmt.Errorf("setting %s: %w", setting, err)
		}
		if _, port, _ := net.SplitHostPort(addr); port != "0" {
			if other, dup := bound[port]; dup {
				return fmt.Errorf("setting %s: port %s is also used by %s", setting, port, other)
			}
			bound[port] = setting
		}
		return nil
	}
	if err := checkListen("metrics-addr", c.MetricsAddr); err != nil {
		return err
	}
	if c.Target == TargetAll {
		if err := checkListen("embedded-nats-addr", c.EmbeddedNATSAddr); err != nil {
			return err
		}
		// The embedded NATS has no authentication: anyone who reaches it
		// can read every tenant's events. It stays on loopback; a shared
		// NATS is an external one with its own auth (-nats-url).
		if host, _, _ := net.SplitHostPort(c.EmbeddedNATSAddr); !isLoopbackHost(host) {
			return fmt.Errorf("setting embedded-nats-addr: the embedded NATS has no authentication, so it listens on loopback only (127.0.0.1, ::1 or localhost), got %q", c.EmbeddedNATSAddr)
		}
	}
	for _, svc := range c.RunServices() {
		if err := checkListen(svc+"-listen", c.Listen[svc]); err != nil {
			return err
		}
	}
	if c.Runs(TargetGateway) {
		if err := checkListen("gateway-http-listen", c.GatewayHTTPAddr); err != nil {
			return err
		}
	}
	for _, svc := range Services {
		if err := checkDialAddr(c.Dial[svc]); err != nil {
			return fmt.Errorf("setting %s-addr: %w", svc, err)
		}
	}
	return nil
}

// validateNATS checks the external NATS of a single-target process and
// the replication of what this process provisions.
func (c *Common) validateNATS() error {
	if c.Target != TargetAll && NeedsNATS(c.Target) {
		if err := checkNATSURL(c.NATSURL); err != nil {
			return fmt.Errorf("setting nats-url: %w", err)
		}
	}
	if c.NATSReplicas < 1 || c.NATSReplicas > 5 {
		return fmt.Errorf("setting nats-replicas: must be between 1 and 5, got %d", c.NATSReplicas)
	}
	if c.Target == TargetAll && c.NATSReplicas != 1 {
		return fmt.Errorf("setting nats-replicas: the embedded NATS of -target=all is a single node, so it must be 1, got %d", c.NATSReplicas)
	}
	return nil
}

// validateProcess checks logging, shutdown and the gRPC message limit.
func (c *Common) validateProcess() error {
	if _, err := logging.ParseLevel(c.LogLevel); err != nil {
		return fmt.Errorf("setting log-level: %w", err)
	}
	if c.ShutdownTimeout <= 0 {
		return fmt.Errorf("setting shutdown-timeout: must be positive, got %s", c.ShutdownTimeout)
	}
	if c.MaxMsgBytes < MinMsgBytes || c.MaxMsgBytes > MaxMsgBytes {
		return fmt.Errorf("setting max-msg-bytes: must be between %d and %d, got %d", MinMsgBytes, MaxMsgBytes, c.MaxMsgBytes)
	}
	return nil
}

// validateModel checks the model endpoint.
func (c *Common) validateModel() error {
	if c.ModelBaseURL != "" {
		u, err := url.Parse(c.ModelBaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("setting model-base-url: want an http(s) URL such as https://api.openai.com/v1, got %q", c.ModelBaseURL)
		}
	}
	if c.Model == "" {
		return errors.New("setting model: must not be empty")
	}
	return nil
}

// validateTracing checks the tracing settings and normalizes them: the
// protocol and sampling level lowercased, names trimmed, lists parsed.
func (c *Common) validateTracing() error {
	c.OTLPEndpoint = strings.TrimSpace(c.OTLPEndpoint)
	if c.OTLPEndpoint != "" {
		if strings.Contains(c.OTLPEndpoint, "://") {
			u, err := url.Parse(c.OTLPEndpoint)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("setting otlp-endpoint: want host:port or an http(s) URL such as http://collector:4318, got %q", c.OTLPEndpoint)
			}
		} else if err := checkAddr(c.OTLPEndpoint); err != nil {
			return fmt.Errorf("setting otlp-endpoint: %w", err)
		}
	}
	switch p := strings.ToLower(strings.TrimSpace(c.OTLPProtocol)); p {
	case "", "grpc", "http":
		c.OTLPProtocol = p
	case "http/protobuf":
		c.OTLPProtocol = "http"
	default:
		return fmt.Errorf("setting otlp-protocol: want grpc or http, got %q", c.OTLPProtocol)
	}
	headers, err := parsePairs(c.otlpHeaders)
	if err != nil {
		return fmt.Errorf("setting otlp-headers: %w", err)
	}
	c.OTLPHeaders = headers
	if c.OTLPExportTimeout <= 0 || c.OTLPExportTimeout > 5*time.Minute {
		return fmt.Errorf("setting otlp-export-timeout: want more than 0 and at most 5m, got %s", c.OTLPExportTimeout)
	}
	if c.OTLPBatchSize < 1 || c.OTLPBatchSize > 10000 {
		return fmt.Errorf("setting otlp-batch-size: want 1 to 10000, got %d", c.OTLPBatchSize)
	}
	level := strings.ToLower(strings.TrimSpace(c.TraceSampling))
	switch level {
	case "always", "high", "medium", "low", "never":
	default:
		return fmt.Errorf("setting trace-sampling: want always, high, medium, low or never, got %q", c.TraceSampling)
	}
	c.TraceSampling = level
	for _, s := range []struct{ name, v string }{{"trace-service-name", c.TraceServiceName}, {"trace-environment", c.TraceEnvironment}} {
		if len(s.v) > 256 || strings.ContainsFunc(s.v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return fmt.Errorf("setting %s: at most 256 printable characters, got %q", s.name, s.v)
		}
	}
	c.TraceServiceName = strings.TrimSpace(c.TraceServiceName)
	c.TraceEnvironment = strings.TrimSpace(c.TraceEnvironment)
	tags, err := parsePairs(c.traceTags)
	if err != nil {
		return fmt.Errorf("setting trace-tags: %w", err)
	}
	c.TraceTags = tags
	return nil
}

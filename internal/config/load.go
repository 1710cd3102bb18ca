// Package config is the configuration of the baagent binary: command-line
// flags, each with a BAAGENT_* environment variable, and one optional YAML
// file whose keys are the flag names. Precedence: flag > environment > file >
// default. The whole configuration is validated before anything starts, and
// every error names the setting at fault.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/baagent/baagent/internal/logging"
	"github.com/baagent/baagent/internal/natsx"
)

// Limits of a few settings.
const (
	MinMsgBytes = 1 << 10
	MaxMsgBytes = 1 << 30
	// maxConfigFileBytes bounds the YAML file so a wrong path (a log, a
	// disk image) fails fast instead of being read whole.
	maxConfigFileBytes = 1 << 20
)

// Config is the validated configuration of one baagent process.
type Config struct {
	// Target is TargetAll or one of Services.
	Target string
	// ConfigFile is the YAML file the settings were read from, if any.
	ConfigFile string

	DataDir   string
	SkillsDir string
	// SubAgentsDir holds the sub-agent definitions the orchestrator's
	// `task` tool offers (none when empty or missing).
	SubAgentsDir string
	// SubAgentMaxDepth and SubAgentTimeout bound delegation through the
	// task tool; ClarificationTimeout and DecisionTimeout how long a run
	// waits for the user before it takes the recommended option.
	// MaxConcurrentRuns, MaxQueuedRuns and MaxRunsPerTenant bound the
	// orchestrator: runs executing on one replica, runs queued or in
	// progress overall, and per tenant.
	MaxConcurrentRuns int
	MaxQueuedRuns     int
	MaxRunsPerTenant  int
	// WorkspaceMaxIdle is how long a conversation's workspace may stay
	// unused before the toolrunner removes it.
	WorkspaceMaxIdle     time.Duration
	SubAgentMaxDepth     int
	SubAgentTimeout      time.Duration
	ClarificationTimeout time.Duration
	DecisionTimeout      time.Duration
	WorkspaceDir         string
	ArtifactDir          string
	ScenariosDir         string
	// TokenEncodersFile overrides the built-in model registry of the tokens
	// service (seed 000 token_encoders.yaml format); empty keeps the default.
	TokenEncodersFile string
	// ToolsFile configures external tools (MCP servers, ToolProvider
	// servers) and per-tool policies; empty runs the built-in tools only.
	ToolsFile string
	// WorkspaceSeedDir holds files copied into every new conversation
	// workspace (the sample datasets); empty seeds nothing.
	WorkspaceSeedDir string

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
	// GatewayRateLimit is the calls and stream opens per second each API
	// key may make (0: unlimited); GatewayRateBurst how many at once.
	GatewayRateLimit float64
	GatewayRateBurst int
	// ToolBudgets bound what one built-in tool call and one tenant's
	// files may cost the toolrunner.
	ToolBudgets ToolBudgets
	// GatewayEdge holds the gateway's other per-client limits and its
	// browser rules.
	GatewayEdge GatewayEdge
	// MetricsAddr serves /metrics for the whole process.
	MetricsAddr string

	LogLevel        string
	ShutdownTimeout time.Duration
	MaxMsgBytes     int

	// ModelBaseURL is an OpenAI-compatible endpoint; empty selects the
	// scripted model.
	ModelBaseURL string
	ModelAPIKey  string
	Model        string
	// ModelFirstByteTimeout and ModelIdleTimeout bound a stalled model
	// stream per attempt; ModelMaxAttempts bounds the attempts of one
	// model call (429, 5xx, timeouts and broken streams are retried).
	ModelFirstByteTimeout time.Duration
	ModelIdleTimeout      time.Duration
	ModelMaxAttempts      int

	// APIKeys maps gateway API keys to tenants, from -api-keys and
	// -api-keys-file together.
	APIKeys map[string]string

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
	// TraceLinkTemplate makes a run's trace id a link in the dashboard:
	// a URL with {trace_id} in it; empty: no link.
	TraceLinkTemplate string
}

// ToolBudgets are the toolrunner settings that keep one tenant's tool
// calls from hurting the others. Counts of 0 take the default (derived
// from the cores); quotas of 0 are unlimited.
type ToolBudgets struct {
	SQLMaxValueBytes    int
	SQLHeapLimitBytes   int64
	SQLMaxConcurrent    int
	SQLMaxPerTenant     int
	SearchTimeout       time.Duration
	GrepMaxBytes        int64
	GrepMaxConcurrent   int
	GrepMaxPerTenant    int
	WorkspaceQuotaBytes int64
	ArtifactQuotaBytes  int64
}

// GatewayEdge are the gateway settings that keep one client from hurting
// the others and keep foreign web pages out. Limits of 0 are unlimited.
type GatewayEdge struct {
	// TokenSecret signs browser stream tokens; every replica shares it.
	TokenSecret string
	TokenTTL    time.Duration
	// AllowedOrigins are browser origins, besides the gateway's own, that
	// may use it (WebSockets in every mode; everything without API keys).
	AllowedOrigins    []string
	MaxStreamsPerKey  int
	MaxInFlightPerKey int
	AuthFailureLimit  int
	AuthFailureWindow time.Duration
	BodyReadTimeout   time.Duration
}

// Runs reports whether this process runs service.
func (c *Config) Runs(service string) bool {
	return c.Target == TargetAll || c.Target == service
}

// RunServices lists the services this process runs, in start order.
func (c *Config) RunServices() []string {
	if c.Target == TargetAll {
		return append([]string(nil), Services...)
	}
	return []string{c.Target}
}

// NeedsNATS reports whether service publishes or consumes on NATS.
func NeedsNATS(service string) bool {
	switch service {
	case TargetGateway, TargetOrchestrator, TargetContext, TargetToolRunner:
		// The toolrunner keeps its idempotency records in a KV bucket
		// that every replica shares.
		return true
	}
	return false
}

// raw holds the flag values before validation.
type raw struct {
	configFile                                    string
	target                                        string
	dataDir, skillsDir, workspaceDir, artifactDir string
	subAgentsDir                                  string
	subAgentDepth                                 int
	maxConcurrentRuns, maxQueuedRuns              int
	maxRunsPerTenant                              int
	workspaceMaxIdle                              time.Duration
	subAgentTimeout, clarifyTimeout               time.Duration
	decisionTimeout                               time.Duration
	scenariosDir, tokenEncodersFile, toolsFile    string
	workspaceSeedDir                              string
	natsURL, embeddedNATSAddr                     string
	listen, dial                                  map[string]*string
	gatewayHTTPAddr, metricsAddr                  string
	logLevel                                      string
	shutdownTimeout                               time.Duration
	gatewayRateLimit                              float64
	gatewayRateBurst                              int
	gatewayTokenSecret, gatewayOrigins            string
	gatewayTokenTTL, gatewayAuthWindow            time.Duration
	gatewayBodyTimeout                            time.Duration
	gatewayMaxStreams, gatewayMaxInFlight         int
	gatewayAuthFailures                           int
	tools                                         ToolBudgets
	modelFirstByte, modelIdle                     time.Duration
	modelAttempts                                 int
	maxMsgBytes                                   int
	natsReplicas                                  int
	modelBaseURL, modelAPIKey, model              string
	apiKeys, apiKeysFile                          string
	otlpEndpoint, otlpProtocol, otlpHeaders       string
	otlpInsecure                                  bool
	otlpExportTimeout                             time.Duration
	otlpBatchSize                                 int
	traceSampling, traceServiceName, traceEnv     string
	traceTags, traceLinkTemplate                  string
}

func newFlagSet(r *raw, output io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("baagent", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&r.configFile, "config", "", "optional YAML file whose keys are these flag names")
	fs.StringVar(&r.target, "target", TargetAll, "what to run: all, or one of "+strings.Join(Services, ", "))
	fs.StringVar(&r.dataDir, "data-dir", "./data", "state directory (embedded JetStream store)")
	fs.StringVar(&r.skillsDir, "skills-dir", "examples/skills", "skills root: system skills at the top, tenants/<tenant>/... below")
	fs.StringVar(&r.workspaceDir, "workspace-dir", "", "per-conversation tool workspaces (default <data-dir>/workspaces)")
	fs.StringVar(&r.artifactDir, "artifact-dir", "", "tool artifact store (default <data-dir>/artifacts)")
	fs.StringVar(&r.scenariosDir, "scenarios-dir", "examples/scenarios", "scenarios of the scripted model")
	fs.IntVar(&r.maxConcurrentRuns, "max-concurrent-runs", 64, "runs one orchestrator replica executes at once")
	fs.IntVar(&r.maxQueuedRuns, "max-queued-runs", 1024, "runs queued or in progress over all replicas and tenants; StartRun beyond is refused (ResourceExhausted)")
	fs.IntVar(&r.maxRunsPerTenant, "max-runs-per-tenant", 32, "runs one tenant may have queued or in progress; StartRun beyond is refused (ResourceExhausted)")
	fs.DurationVar(&r.workspaceMaxIdle, "workspace-max-idle", 7*24*time.Hour, "how long a conversation's workspace may stay unused before the toolrunner removes it")
	fs.IntVar(&r.tools.SQLMaxValueBytes, "sql-max-value-bytes", 1<<20, "largest string, blob or row one sql_query may build (SQLite's length limit); its result is bounded at 16 times this")
	fs.Int64Var(&r.tools.SQLHeapLimitBytes, "sql-heap-limit-bytes", 512<<20, "memory SQLite may use for all sql_query calls of the process together; 0 = no limit")
	fs.IntVar(&r.tools.SQLMaxConcurrent, "sql-max-concurrent", 0, "sql_query calls executing at once per toolrunner (0: one per core)")
	fs.IntVar(&r.tools.SQLMaxPerTenant, "sql-max-per-tenant", 0, "sql_query slots one tenant may hold (0: all but one, so one tenant never holds them all)")
	fs.DurationVar(&r.tools.SearchTimeout, "search-timeout", 30*time.Second, "time one glob or grep may search; a search that spends it is not retried")
	fs.Int64Var(&r.tools.GrepMaxBytes, "grep-max-bytes", 64<<20, "bytes one grep call may read")
	fs.IntVar(&r.tools.GrepMaxConcurrent, "grep-max-concurrent", 0, "grep calls searching at once per toolrunner (0: one per core)")
	fs.IntVar(&r.tools.GrepMaxPerTenant, "grep-max-per-tenant", 0, "grep slots one tenant may hold (0: all but one)")
	fs.Int64Var(&r.tools.WorkspaceQuotaBytes, "workspace-quota-bytes", 1<<30, "disk space one tenant's conversation workspaces may use, seed copies included; a write past it fails with QUOTA_EXCEEDED; 0 = no quota")
	fs.Int64Var(&r.tools.ArtifactQuotaBytes, "artifact-quota-bytes", 2<<30, "disk space one tenant's stored tool results (artifacts) may use; past it the tenant's least recently used artifacts are removed; 0 = no quota")
	fs.IntVar(&r.subAgentDepth, "subagent-max-depth", 1, "delegation depth through the task tool (1: sub-agents never delegate further; at most 4)")
	fs.DurationVar(&r.subAgentTimeout, "subagent-timeout", 30*time.Minute, "how long a task call waits for its sub-agent run before cancelling it")
	fs.DurationVar(&r.clarifyTimeout, "clarification-timeout", 60*time.Second, "how long a run waits for a clarification answer before taking the recommended option")
	fs.DurationVar(&r.decisionTimeout, "decision-timeout", 300*time.Second, "how long a run waits for a decision (also doom-loop and tool-approval questions) before its default")
	fs.StringVar(&r.subAgentsDir, "subagents-dir", "examples/agents", "sub-agent definitions (*.yaml) offered through the task tool; empty or missing: none")
	fs.StringVar(&r.tokenEncodersFile, "token-encoders-file", "", "token_encoders.yaml overriding the built-in model registry")
	fs.StringVar(&r.toolsFile, "tools-file", "", "tools.yaml: MCP servers, ToolProvider servers and per-tool policies")
	fs.StringVar(&r.workspaceSeedDir, "workspace-seed-dir", "examples/data", "files copied into every new conversation workspace (empty: none)")
	fs.StringVar(&r.natsURL, "nats-url", "nats://localhost:4222", "NATS server(s) of a single-target process, comma-separated")
	fs.StringVar(&r.embeddedNATSAddr, "embedded-nats-addr", "127.0.0.1:4222", "listen address of the embedded NATS in -target=all")
	fs.IntVar(&r.natsReplicas, "nats-replicas", 1, "replicas of each JetStream stream and KV bucket (1-5; 3 on a three-node cluster)")
	r.listen = map[string]*string{}
	r.dial = map[string]*string{}
	for _, svc := range Services {
		r.listen[svc] = fs.String(svc+"-listen", "", fmt.Sprintf("%s gRPC listen address (default 127.0.0.1:%d in -target=all, else :%d)", svc, DefaultPorts[svc], DefaultPorts[svc]))
		r.dial[svc] = fs.String(svc+"-addr", DefaultDialAddr(svc), fmt.Sprintf("address at which peers reach %s: host:port, dns:///name:port, or static:///host1:port1,host2:port2 listing its replicas (calls go round-robin)", svc))
	}
	fs.Float64Var(&r.gatewayRateLimit, "gateway-rate-limit", 50, "calls and stream opens per second each gateway API key may make; 0 = unlimited")
	fs.IntVar(&r.gatewayRateBurst, "gateway-rate-burst", 100, "calls an idle gateway API key may make at once")
	fs.StringVar(&r.gatewayTokenSecret, "gateway-token-secret", "", "secret (at least 16 bytes) signing browser stream tokens, shared by every gateway replica; empty: derived from the API keys (prefer the environment variable)")
	fs.DurationVar(&r.gatewayTokenTTL, "gateway-token-ttl", 10*time.Minute, "lifetime of a browser stream token; tokens that expire later are refused")
	fs.StringVar(&r.gatewayOrigins, "gateway-allowed-origins", "", "browser origins (scheme://host[:port], comma-separated) besides the gateway's own that may use it; WebSockets from other origins are refused")
	fs.IntVar(&r.gatewayMaxStreams, "gateway-max-streams-per-key", 100, "event streams (gRPC, SSE, WebSocket together) one API key may hold open; 0 = unlimited")
	fs.IntVar(&r.gatewayMaxInFlight, "gateway-max-in-flight-per-key", 64, "requests one API key may have in progress at once; 0 = unlimited")
	fs.IntVar(&r.gatewayAuthFailures, "gateway-auth-failure-limit", 20, "invalid API keys or tokens one client address may present per window before its requests are refused (429); 0 = no throttling")
	fs.DurationVar(&r.gatewayAuthWindow, "gateway-auth-failure-window", time.Minute, "window of gateway-auth-failure-limit")
	fs.DurationVar(&r.gatewayBodyTimeout, "gateway-body-read-timeout", 30*time.Second, "how long an HTTP request body may take to arrive (408 after); 0 = no limit")
	fs.StringVar(&r.gatewayHTTPAddr, "gateway-http-listen", "", fmt.Sprintf("gateway HTTP listen address (default 127.0.0.1:%d in -target=all, else :%d)", DefaultGatewayHTTPPort, DefaultGatewayHTTPPort))
	fs.StringVar(&r.metricsAddr, "metrics-addr", "", fmt.Sprintf("Prometheus /metrics listen address (default 127.0.0.1:%d in -target=all, else :%d)", DefaultMetricsPort, DefaultMetricsPort))
	fs.StringVar(&r.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.DurationVar(&r.shutdownTimeout, "shutdown-timeout", 4*time.Second, "how long SIGTERM waits for in-flight requests")
	fs.IntVar(&r.maxMsgBytes, "max-msg-bytes", 16<<20, "largest gRPC message accepted or sent, in bytes")
	fs.StringVar(&r.modelBaseURL, "model-base-url", "", "OpenAI-compatible endpoint; empty uses the scripted model")
	fs.DurationVar(&r.modelFirstByte, "model-first-byte-timeout", 120*time.Second, "how long one model attempt may wait for its first streamed chunk")
	fs.DurationVar(&r.modelIdle, "model-idle-timeout", 60*time.Second, "how long a model stream may stay silent between two chunks")
	fs.IntVar(&r.modelAttempts, "model-max-attempts", 4, "attempts of one model call, the first included (1-10; 429, 5xx, timeouts and broken streams are retried)")
	fs.StringVar(&r.modelAPIKey, "model-api-key", "", "API key of the model endpoint (prefer the environment variable)")
	fs.StringVar(&r.model, "model", "gpt-4o", "default model")
	fs.StringVar(&r.apiKeys, "api-keys", "", "gateway API keys as key=tenant,key=tenant (prefer the environment variable)")
	fs.StringVar(&r.apiKeysFile, "api-keys-file", "", "file of key=tenant lines mapping gateway API keys to tenants")
	fs.StringVar(&r.otlpEndpoint, "otlp-endpoint", "", "OpenTelemetry: OTLP endpoint for traces, host:port or http(s)://host:port; empty: tracing off (unless OTEL_EXPORTER_OTLP_ENDPOINT is set)")
	fs.StringVar(&r.otlpProtocol, "otlp-protocol", "", "OTLP transport: grpc or http (default grpc, or what OTEL_EXPORTER_OTLP_PROTOCOL says)")
	fs.StringVar(&r.otlpHeaders, "otlp-headers", "", "headers sent with every OTLP export, as k=v,k=v (prefer the environment variable for secrets)")
	fs.BoolVar(&r.otlpInsecure, "otlp-insecure", false, "export OTLP without TLS to a host:port endpoint (an http:// URL is plaintext anyway)")
	fs.DurationVar(&r.otlpExportTimeout, "otlp-export-timeout", 5*time.Second, "how long one OTLP export may take")
	fs.IntVar(&r.otlpBatchSize, "otlp-batch-size", 100, "spans per OTLP export batch (1-10000)")
	fs.StringVar(&r.traceSampling, "trace-sampling", "always", "share of runs traced, decided once per run: always (1), high (0.5), medium (0.1), low (0.01) or never (0)")
	fs.StringVar(&r.traceServiceName, "trace-service-name", "", "service.name of this process's spans (default OTEL_SERVICE_NAME, else baagent-<target>, or baagent for all)")
	fs.StringVar(&r.traceEnv, "trace-environment", "", "deployment.environment of this process's spans (e.g. prod, staging)")
	fs.StringVar(&r.traceTags, "trace-tags", "", "extra resource attributes of this process's spans, as k=v,k=v")
	fs.StringVar(&r.traceLinkTemplate, "trace-link-template", "", "URL of a trace in the tracing UI, with {trace_id}, e.g. http://localhost:16686/trace/{trace_id}; the dashboard links a run's trace id with it")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: baagent [flags]")
		fmt.Fprintln(fs.Output(), "Each flag also reads BAAGENT_<NAME> (-skills-dir ↔ BAAGENT_SKILLS_DIR) and the -config YAML file;")
		fmt.Fprintln(fs.Output(), "precedence: flag > environment > file > default.")
		fs.PrintDefaults()
	}
	return fs
}

// EnvName is the environment variable of a flag: "skills-dir" → BAAGENT_SKILLS_DIR.
func EnvName(flagName string) string {
	return "BAAGENT_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// ErrHelp is returned by Load when -h or -help was given; the usage has been
// printed.
var ErrHelp = flag.ErrHelp

// Load parses args (without the program name) and the environment (getenv),
// reads the optional YAML file and validates the result. Usage and flag
// errors are printed to output.
func Load(args []string, getenv func(string) string, output io.Writer) (*Config, error) {
	var r raw
	fs := newFlagSet(&r, output)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (settings are flags, e.g. -target=all)", fs.Arg(0))
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })

	if !onCommandLine["config"] {
		if v := getenv(EnvName("config")); v != "" {
			r.configFile = v
		}
	}
	if r.configFile != "" {
		settings, err := readFile(r.configFile)
		if err != nil {
			return nil, err
		}
		for _, name := range sortedKeys(settings) {
			if name == "config" {
				return nil, fmt.Errorf("config file %s: setting %q cannot be set in a config file", r.configFile, name)
			}
			if fs.Lookup(name) == nil {
				return nil, fmt.Errorf("config file %s: unknown setting %q", r.configFile, name)
			}
			if onCommandLine[name] {
				continue
			}
			if err := fs.Set(name, settings[name]); err != nil {
				return nil, fmt.Errorf("config file %s: setting %q: %w", r.configFile, name, err)
			}
		}
	}
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if envErr != nil || onCommandLine[f.Name] || f.Name == "config" {
			return
		}
		if v, ok := lookupEnv(getenv, EnvName(f.Name)); ok {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("environment %s: %w", EnvName(f.Name), err)
			}
		}
	})
	if envErr != nil {
		return nil, envErr
	}
	return r.validate()
}

// lookupEnv treats an empty variable as unset, as most deployment tools
// cannot tell the two apart.
func lookupEnv(getenv func(string) string, name string) (string, bool) {
	v := getenv(name)
	return v, v != ""
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// readFile reads a YAML mapping of flag names to scalar values.
func readFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	if len(data) > maxConfigFileBytes {
		return nil, fmt.Errorf("config file %s: larger than %d bytes", path, maxConfigFileBytes)
	}
	return parseYAML(path, data)
}

// parseYAML decodes a flat mapping of setting names to scalars. An empty
// document is an empty configuration.
func parseYAML(path string, data []byte) (map[string]string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	out := map[string]string{}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return out, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("config file %s: line %d: want a mapping of setting names to values", path, root.Line)
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("config file %s: line %d: setting names must be plain strings", path, k.Line)
		}
		if v.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("config file %s: line %d: setting %q must be a single value", path, v.Line, k.Value)
		}
		if _, dup := out[k.Value]; dup {
			return nil, fmt.Errorf("config file %s: line %d: setting %q given twice", path, k.Line, k.Value)
		}
		out[k.Value] = v.Value
	}
	return out, nil
}

func (r *raw) validate() (*Config, error) {
	c := &Config{
		Target:               r.target,
		ConfigFile:           r.configFile,
		DataDir:              r.dataDir,
		SkillsDir:            r.skillsDir,
		SubAgentsDir:         r.subAgentsDir,
		SubAgentMaxDepth:     r.subAgentDepth,
		MaxConcurrentRuns:    r.maxConcurrentRuns,
		MaxQueuedRuns:        r.maxQueuedRuns,
		MaxRunsPerTenant:     r.maxRunsPerTenant,
		WorkspaceMaxIdle:     r.workspaceMaxIdle,
		SubAgentTimeout:      r.subAgentTimeout,
		ClarificationTimeout: r.clarifyTimeout,
		DecisionTimeout:      r.decisionTimeout,
		WorkspaceDir:         r.workspaceDir,
		ArtifactDir:          r.artifactDir,
		ScenariosDir:         r.scenariosDir,
		TokenEncodersFile:    r.tokenEncodersFile,
		ToolsFile:            r.toolsFile,
		WorkspaceSeedDir:     r.workspaceSeedDir,
		NATSURL:              r.natsURL,
		EmbeddedNATSAddr:     r.embeddedNATSAddr,
		NATSReplicas:         r.natsReplicas,
		Listen:               map[string]string{},
		Dial:                 map[string]string{},
		GatewayHTTPAddr:      r.gatewayHTTPAddr,
		GatewayRateLimit:     r.gatewayRateLimit,
		GatewayRateBurst:     r.gatewayRateBurst,
		ToolBudgets:          r.tools,
		GatewayEdge: GatewayEdge{
			TokenSecret: r.gatewayTokenSecret, TokenTTL: r.gatewayTokenTTL,
			AllowedOrigins:    splitList(r.gatewayOrigins),
			MaxStreamsPerKey:  r.gatewayMaxStreams,
			MaxInFlightPerKey: r.gatewayMaxInFlight,
			AuthFailureLimit:  r.gatewayAuthFailures, AuthFailureWindow: r.gatewayAuthWindow,
			BodyReadTimeout: r.gatewayBodyTimeout,
		},
		MetricsAddr:           r.metricsAddr,
		LogLevel:              r.logLevel,
		ShutdownTimeout:       r.shutdownTimeout,
		MaxMsgBytes:           r.maxMsgBytes,
		ModelBaseURL:          r.modelBaseURL,
		ModelFirstByteTimeout: r.modelFirstByte,
		ModelIdleTimeout:      r.modelIdle,
		ModelMaxAttempts:      r.modelAttempts,
		ModelAPIKey:           r.modelAPIKey,
		Model:                 r.model,
	}
	if c.Target != TargetAll && !IsService(c.Target) {
		return nil, fmt.Errorf("setting target: unknown target %q (want all, %s)", c.Target, strings.Join(Services, ", "))
	}
	host := ""
	if c.Target == TargetAll {
		host = "127.0.0.1"
	}
	for _, svc := range Services {
		c.Listen[svc] = *r.listen[svc]
		if c.Listen[svc] == "" {
			c.Listen[svc] = net.JoinHostPort(host, strconv.Itoa(DefaultPorts[svc]))
		}
		c.Dial[svc] = *r.dial[svc]
	}
	if c.GatewayHTTPAddr == "" {
		c.GatewayHTTPAddr = net.JoinHostPort(host, strconv.Itoa(DefaultGatewayHTTPPort))
	}
	if c.MetricsAddr == "" {
		c.MetricsAddr = net.JoinHostPort(host, strconv.Itoa(DefaultMetricsPort))
	}
	if c.DataDir == "" {
		return nil, errors.New("setting data-dir: must not be empty")
	}
	if c.WorkspaceDir == "" {
		c.WorkspaceDir = filepath.Join(c.DataDir, "workspaces")
	}
	if c.ArtifactDir == "" {
		c.ArtifactDir = filepath.Join(c.DataDir, "artifacts")
	}
	if c.Runs(TargetSkills) && c.SkillsDir == "" {
		return nil, errors.New("setting skills-dir: must not be empty")
	}

	// Addresses: every listener this process opens must be valid and
	// distinct, so a typo fails here rather than as a bind error later.
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
		return nil, err
	}
	if c.Target == TargetAll {
		if err := checkListen("embedded-nats-addr", c.EmbeddedNATSAddr); err != nil {
			return nil, err
		}
		// The embedded NATS has no authentication: anyone who reaches it
		// can read every tenant's events. It stays on loopback; a shared
		// NATS is an external one with its own auth (-nats-url).
		if host, _, _ := net.SplitHostPort(c.EmbeddedNATSAddr); !isLoopbackHost(host) {
			return nil, fmt.Errorf("setting embedded-nats-addr: the embedded NATS has no authentication, so it listens on loopback only (127.0.0.1, ::1 or localhost), got %q", c.EmbeddedNATSAddr)
		}
	}
	for _, svc := range c.RunServices() {
		if err := checkListen(svc+"-listen", c.Listen[svc]); err != nil {
			return nil, err
		}
	}
	if c.Runs(TargetGateway) {
		if err := checkListen("gateway-http-listen", c.GatewayHTTPAddr); err != nil {
			return nil, err
		}
	}
	for _, svc := range Services {
		if err := checkDialAddr(c.Dial[svc]); err != nil {
			return nil, fmt.Errorf("setting %s-addr: %w", svc, err)
		}
	}
	if c.Target != TargetAll && NeedsNATS(c.Target) {
		if err := checkNATSURL(c.NATSURL); err != nil {
			return nil, fmt.Errorf("setting nats-url: %w", err)
		}
	}

	if _, err := logging.ParseLevel(c.LogLevel); err != nil {
		return nil, fmt.Errorf("setting log-level: %w", err)
	}
	switch {
	case c.ModelFirstByteTimeout <= 0:
		return nil, fmt.Errorf("setting model-first-byte-timeout: must be positive, got %s", c.ModelFirstByteTimeout)
	case c.ModelIdleTimeout <= 0:
		return nil, fmt.Errorf("setting model-idle-timeout: must be positive, got %s", c.ModelIdleTimeout)
	case c.ModelMaxAttempts < 1 || c.ModelMaxAttempts > 10:
		return nil, fmt.Errorf("setting model-max-attempts: want 1 to 10, got %d", c.ModelMaxAttempts)
	case c.GatewayRateLimit < 0 || math.IsNaN(c.GatewayRateLimit) || math.IsInf(c.GatewayRateLimit, 0):
		return nil, fmt.Errorf("setting gateway-rate-limit: want a rate >= 0 (0 = unlimited), got %v", c.GatewayRateLimit)
	case c.MaxConcurrentRuns < 1 || c.MaxConcurrentRuns > 10000:
		return nil, fmt.Errorf("setting max-concurrent-runs: want 1 to 10000, got %d", c.MaxConcurrentRuns)
	case c.MaxQueuedRuns < 1 || c.MaxQueuedRuns > 1000000:
		return nil, fmt.Errorf("setting max-queued-runs: want 1 to 1000000, got %d", c.MaxQueuedRuns)
	case c.MaxRunsPerTenant < 1 || c.MaxRunsPerTenant > c.MaxQueuedRuns:
		return nil, fmt.Errorf("setting max-runs-per-tenant: want 1 to max-queued-runs (%d), got %d", c.MaxQueuedRuns, c.MaxRunsPerTenant)
	case c.WorkspaceMaxIdle < time.Minute:
		return nil, fmt.Errorf("setting workspace-max-idle: want at least 1m, got %s", c.WorkspaceMaxIdle)
	case c.SubAgentMaxDepth < 1 || c.SubAgentMaxDepth > 4:
		return nil, fmt.Errorf("setting subagent-max-depth: want 1 to 4 (no sub-agents: empty -subagents-dir), got %d", c.SubAgentMaxDepth)
	case c.SubAgentTimeout <= 0:
		return nil, fmt.Errorf("setting subagent-timeout: must be positive, got %s", c.SubAgentTimeout)
	case c.ClarificationTimeout <= 0:
		return nil, fmt.Errorf("setting clarification-timeout: must be positive, got %s", c.ClarificationTimeout)
	case c.DecisionTimeout <= 0:
		return nil, fmt.Errorf("setting decision-timeout: must be positive, got %s", c.DecisionTimeout)
	case c.GatewayRateBurst < 1:
		return nil, fmt.Errorf("setting gateway-rate-burst: must be at least 1, got %d", c.GatewayRateBurst)
	}
	if err := c.ToolBudgets.validate(); err != nil {
		return nil, err
	}
	if err := c.GatewayEdge.validate(); err != nil {
		return nil, err
	}
	if c.ShutdownTimeout <= 0 {
		return nil, fmt.Errorf("setting shutdown-timeout: must be positive, got %s", c.ShutdownTimeout)
	}
	if c.NATSReplicas < 1 || c.NATSReplicas > 5 {
		return nil, fmt.Errorf("setting nats-replicas: must be between 1 and 5, got %d", c.NATSReplicas)
	}
	if c.Target == TargetAll && c.NATSReplicas != 1 {
		return nil, fmt.Errorf("setting nats-replicas: the embedded NATS of -target=all is a single node, so it must be 1, got %d", c.NATSReplicas)
	}
	if c.MaxMsgBytes < MinMsgBytes || c.MaxMsgBytes > MaxMsgBytes {
		return nil, fmt.Errorf("setting max-msg-bytes: must be between %d and %d, got %d", MinMsgBytes, MaxMsgBytes, c.MaxMsgBytes)
	}
	if c.ModelBaseURL != "" {
		u, err := url.Parse(c.ModelBaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("setting model-base-url: want an http(s) URL such as https://api.openai.com/v1, got %q", c.ModelBaseURL)
		}
	}
	if c.Model == "" {
		return nil, errors.New("setting model: must not be empty")
	}

	keys, err := parseAPIKeys("api-keys", r.apiKeys)
	if err != nil {
		return nil, err
	}
	if r.apiKeysFile != "" {
		data, err := os.ReadFile(r.apiKeysFile)
		if err != nil {
			return nil, fmt.Errorf("setting api-keys-file: %w", err)
		}
		fileKeys, err := parseAPIKeys("api-keys-file "+r.apiKeysFile, strings.ReplaceAll(string(data), "\n", ","))
		if err != nil {
			return nil, err
		}
		for k, t := range fileKeys {
			if other, dup := keys[k]; dup && other != t {
				return nil, fmt.Errorf("setting api-keys-file: a key is mapped to both tenant %q and %q", other, t)
			}
			keys[k] = t
		}
	}
	c.APIKeys = keys
	if err := r.validateTracing(c); err != nil {
		return nil, err
	}
	return c, nil
}

// validateTracing checks and copies the tracing settings.
func (r *raw) validateTracing(c *Config) error {
	c.OTLPEndpoint = strings.TrimSpace(r.otlpEndpoint)
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
	switch p := strings.ToLower(strings.TrimSpace(r.otlpProtocol)); p {
	case "", "grpc", "http":
		c.OTLPProtocol = p
	case "http/protobuf":
		c.OTLPProtocol = "http"
	default:
		return fmt.Errorf("setting otlp-protocol: want grpc or http, got %q", r.otlpProtocol)
	}
	headers, err := parsePairs(r.otlpHeaders)
	if err != nil {
		return fmt.Errorf("setting otlp-headers: %w", err)
	}
	c.OTLPHeaders = headers
	c.OTLPInsecure = r.otlpInsecure
	if r.otlpExportTimeout <= 0 || r.otlpExportTimeout > 5*time.Minute {
		return fmt.Errorf("setting otlp-export-timeout: want more than 0 and at most 5m, got %s", r.otlpExportTimeout)
	}
	c.OTLPExportTimeout = r.otlpExportTimeout
	if r.otlpBatchSize < 1 || r.otlpBatchSize > 10000 {
		return fmt.Errorf("setting otlp-batch-size: want 1 to 10000, got %d", r.otlpBatchSize)
	}
	c.OTLPBatchSize = r.otlpBatchSize
	level := strings.ToLower(strings.TrimSpace(r.traceSampling))
	switch level {
	case "always", "high", "medium", "low", "never":
	default:
		return fmt.Errorf("setting trace-sampling: want always, high, medium, low or never, got %q", r.traceSampling)
	}
	c.TraceSampling = level
	for _, s := range []struct{ name, v string }{{"trace-service-name", r.traceServiceName}, {"trace-environment", r.traceEnv}} {
		if len(s.v) > 256 || strings.ContainsFunc(s.v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return fmt.Errorf("setting %s: at most 256 printable characters, got %q", s.name, s.v)
		}
	}
	c.TraceServiceName = strings.TrimSpace(r.traceServiceName)
	c.TraceEnvironment = strings.TrimSpace(r.traceEnv)
	tags, err := parsePairs(r.traceTags)
	if err != nil {
		return fmt.Errorf("setting trace-tags: %w", err)
	}
	c.TraceTags = tags
	if t := strings.TrimSpace(r.traceLinkTemplate); t != "" {
		if !strings.Contains(t, "{trace_id}") {
			return fmt.Errorf("setting trace-link-template: must contain {trace_id}, got %q", t)
		}
		u, err := url.Parse(strings.ReplaceAll(t, "{trace_id}", "0"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("setting trace-link-template: want an http(s) URL with {trace_id}, such as http://localhost:16686/trace/{trace_id}, got %q", t)
		}
		c.TraceLinkTemplate = t
	}
	return nil
}

// parsePairs reads "k=v,k=v" (blank entries skipped); keys must be
// non-empty and unique, values may be empty.
func parsePairs(s string) (map[string]string, error) {
	out := map[string]string{}
	for i, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		k, v, ok := strings.Cut(entry, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return nil, fmt.Errorf("entry %d: want key=value", i+1)
		}
		if strings.ContainsFunc(k+v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return nil, fmt.Errorf("entry %d: control characters are not allowed", i+1)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("entry %d: key %q given twice", i+1, k)
		}
		out[k] = v
	}
	return out, nil
}

// checkDialAddr accepts what checkAddr does, and
// static:///host:port,host:port (every replica of a peer, each entry
// checked by checkAddr; internal/grpcclient checks the rest).
func checkDialAddr(addr string) error {
	if list, ok := strings.CutPrefix(addr, "static:///"); ok {
		for _, a := range strings.Split(list, ",") {
			if err := checkAddr(a); err != nil {
				return err
			}
		}
		return nil
	}
	return checkAddr(addr)
}

// checkAddr accepts host:port with a numeric port 0–65535.
func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port, got %q", addr)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port of %q must be a number 0-65535", addr)
	}
	return nil
}

func checkNATSURL(urls string) error {
	if strings.TrimSpace(urls) == "" {
		return errors.New("must not be empty for this target")
	}
	for _, s := range strings.Split(urls, ",") {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || u.Host == "" {
			return fmt.Errorf("want nats://host:port, got %q", s)
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("unsupported scheme %q in %q", u.Scheme, s)
		}
	}
	return nil
}

// parseAPIKeys reads "key=tenant" pairs separated by commas; blank entries
// and lines starting with # are skipped. Tenants follow the NATS subject
// token rules used everywhere else.
func parseAPIKeys(setting, s string) (map[string]string, error) {
	keys := map[string]string{}
	for i, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" || strings.HasPrefix(entry, "#") {
			continue
		}
		key, tenant, ok := strings.Cut(entry, "=")
		key, tenant = strings.TrimSpace(key), strings.TrimSpace(tenant)
		if !ok || key == "" || tenant == "" {
			return nil, fmt.Errorf("setting %s: entry %d: want key=tenant", setting, i+1)
		}
		if len(key) < 16 {
			return nil, fmt.Errorf("setting %s: entry %d: API key shorter than 16 characters", setting, i+1)
		}
		if err := natsx.ValidateToken("tenant", tenant); err != nil {
			return nil, fmt.Errorf("setting %s: entry %d: %w", setting, i+1, err)
		}
		if other, dup := keys[key]; dup && other != tenant {
			return nil, fmt.Errorf("setting %s: entry %d: key mapped to both tenant %q and %q", setting, i+1, other, tenant)
		}
		keys[key] = tenant
	}
	return keys, nil
}

// isLoopbackHost reports whether host names or is a loopback address.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// splitList splits a comma-separated setting, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func (g GatewayEdge) validate() error {
	switch {
	case g.TokenSecret != "" && len(g.TokenSecret) < 16:
		return fmt.Errorf("setting gateway-token-secret: want at least 16 bytes, got %d", len(g.TokenSecret))
	case g.TokenTTL < time.Minute || g.TokenTTL > 24*time.Hour:
		return fmt.Errorf("setting gateway-token-ttl: want 1m to 24h, got %s", g.TokenTTL)
	case g.MaxStreamsPerKey < 0:
		return fmt.Errorf("setting gateway-max-streams-per-key: want >= 0 (0 = unlimited), got %d", g.MaxStreamsPerKey)
	case g.MaxInFlightPerKey < 0:
		return fmt.Errorf("setting gateway-max-in-flight-per-key: want >= 0 (0 = unlimited), got %d", g.MaxInFlightPerKey)
	case g.AuthFailureLimit < 0:
		return fmt.Errorf("setting gateway-auth-failure-limit: want >= 0 (0 = no throttling), got %d", g.AuthFailureLimit)
	case g.AuthFailureWindow < time.Second:
		return fmt.Errorf("setting gateway-auth-failure-window: want at least 1s, got %s", g.AuthFailureWindow)
	case g.BodyReadTimeout < 0:
		return fmt.Errorf("setting gateway-body-read-timeout: want >= 0 (0 = no limit), got %s", g.BodyReadTimeout)
	}
	for _, o := range g.AllowedOrigins {
		u, err := url.Parse(strings.TrimSuffix(o, "/"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
			return fmt.Errorf("setting gateway-allowed-origins: %q is not an origin (want http://host[:port] or https://host[:port])", o)
		}
	}
	return nil
}

func (b ToolBudgets) validate() error {
	switch {
	case b.SQLMaxValueBytes < 1<<10 || b.SQLMaxValueBytes > 1<<30:
		return fmt.Errorf("setting sql-max-value-bytes: want 1024 to 1073741824, got %d", b.SQLMaxValueBytes)
	case b.SQLHeapLimitBytes != 0 && b.SQLHeapLimitBytes < 16<<20:
		return fmt.Errorf("setting sql-heap-limit-bytes: want 0 (no limit) or at least 16 MiB, got %d", b.SQLHeapLimitBytes)
	case b.SQLMaxConcurrent < 0 || b.SQLMaxConcurrent > 1024:
		return fmt.Errorf("setting sql-max-concurrent: want 0 (one per core) to 1024, got %d", b.SQLMaxConcurrent)
	case b.SQLMaxPerTenant < 0 || (b.SQLMaxConcurrent > 0 && b.SQLMaxPerTenant > b.SQLMaxConcurrent):
		return fmt.Errorf("setting sql-max-per-tenant: want 0 (all but one) to sql-max-concurrent, got %d", b.SQLMaxPerTenant)
	case b.SearchTimeout < 100*time.Millisecond:
		return fmt.Errorf("setting search-timeout: want at least 100ms, got %s", b.SearchTimeout)
	case b.GrepMaxBytes < 1<<10:
		return fmt.Errorf("setting grep-max-bytes: want at least 1024, got %d", b.GrepMaxBytes)
	case b.GrepMaxConcurrent < 0 || b.GrepMaxConcurrent > 1024:
		return fmt.Errorf("setting grep-max-concurrent: want 0 (one per core) to 1024, got %d", b.GrepMaxConcurrent)
	case b.GrepMaxPerTenant < 0 || (b.GrepMaxConcurrent > 0 && b.GrepMaxPerTenant > b.GrepMaxConcurrent):
		return fmt.Errorf("setting grep-max-per-tenant: want 0 (all but one) to grep-max-concurrent, got %d", b.GrepMaxPerTenant)
	case b.WorkspaceQuotaBytes < 0:
		return fmt.Errorf("setting workspace-quota-bytes: want >= 0 (0 = no quota), got %d", b.WorkspaceQuotaBytes)
	case b.ArtifactQuotaBytes < 0:
		return fmt.Errorf("setting artifact-quota-bytes: want >= 0 (0 = no quota), got %d", b.ArtifactQuotaBytes)
	}
	return nil
}

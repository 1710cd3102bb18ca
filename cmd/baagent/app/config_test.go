package app

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baagent/baagent/internal/config"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func load(t *testing.T, args []string, e map[string]string) (*Config, error) {
	t.Helper()
	return LoadConfig(args, env(e), io.Discard)
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// One service per process listens on every interface (a pod), metrics too.
func TestDefaultsOneService(t *testing.T) {
	c, err := load(t, []string{"-target=tokens"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen[config.TargetTokens] != ":7705" || c.MetricsAddr != ":9090" {
		t.Errorf("listen %q metrics %q, want :7705 and :9090", c.Listen[config.TargetTokens], c.MetricsAddr)
	}
}

func TestDefaultsAllMode(t *testing.T) {
	c, err := load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Target != config.TargetAll {
		t.Errorf("Target = %q, want all", c.Target)
	}
	want := map[string]string{
		config.TargetGateway: "127.0.0.1:7700", config.TargetOrchestrator: "127.0.0.1:7701", config.TargetToolRunner: "127.0.0.1:7702",
		config.TargetSkills: "127.0.0.1:7703", config.TargetContext: "127.0.0.1:7704", config.TargetTokens: "127.0.0.1:7705",
		config.TargetMemory: "127.0.0.1:7706",
	}
	for svc, addr := range want {
		if c.Listen[svc] != addr {
			t.Errorf("Listen[%s] = %q, want %q", svc, c.Listen[svc], addr)
		}
	}
	if c.GatewayHTTPAddr != "127.0.0.1:7780" || c.MetricsAddr != "127.0.0.1:9090" || c.EmbeddedNATSAddr != "127.0.0.1:4222" {
		t.Errorf("http %q metrics %q nats %q", c.GatewayHTTPAddr, c.MetricsAddr, c.EmbeddedNATSAddr)
	}
	if c.DataDir != "./data" || c.ToolRunner.WorkspaceDir != filepath.Join("data", "workspaces") || c.ToolRunner.ArtifactDir != filepath.Join("data", "artifacts") {
		t.Errorf("dirs: data %q workspace %q artifact %q", c.DataDir, c.ToolRunner.WorkspaceDir, c.ToolRunner.ArtifactDir)
	}
	if got := c.RunServices(); len(got) != 7 {
		t.Errorf("RunServices() = %v, want all seven", got)
	}
	if c.ModelBaseURL != "" || c.ShutdownTimeout != 4*time.Second {
		t.Errorf("model-base-url %q shutdown %s", c.ModelBaseURL, c.ShutdownTimeout)
	}
}

func TestSingleTargetListensOnAllInterfaces(t *testing.T) {
	c, err := load(t, []string{"-target=tokens"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen[config.TargetTokens] != ":7705" {
		t.Errorf("Listen[tokens] = %q, want :7705", c.Listen[config.TargetTokens])
	}
	if got := c.RunServices(); len(got) != 1 || got[0] != config.TargetTokens {
		t.Errorf("RunServices() = %v", got)
	}
	if !c.Runs(config.TargetTokens) || c.Runs(config.TargetGateway) {
		t.Error("Runs() disagrees with target")
	}
}

func TestPrecedenceFlagOverEnvOverFileOverDefault(t *testing.T) {
	file := writeFile(t, "c.yaml", "skills-dir: /from/file\nlog-level: warn\nmodel: file-model\nmax-msg-bytes: 2048\n")
	c, err := load(t, []string{"-config", file, "-skills-dir=/from/flag"}, map[string]string{
		"BAAGENT_SKILLS_DIR": "/from/env",
		"BAAGENT_LOG_LEVEL":  "debug",
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Skills.Dir != "/from/flag" {
		t.Errorf("SkillsDir = %q, want the flag's value", c.Skills.Dir)
	}
	if c.LogLevel != "debug" {
		t.Errorf("LogLevel = %q, want the environment's value", c.LogLevel)
	}
	if c.Model != "file-model" || c.MaxMsgBytes != 2048 {
		t.Errorf("Model = %q MaxMsgBytes = %d, want the file's values", c.Model, c.MaxMsgBytes)
	}
	if c.ConfigFile != file {
		t.Errorf("ConfigFile = %q", c.ConfigFile)
	}
}

func TestConfigFileFromEnvironment(t *testing.T) {
	file := writeFile(t, "c.yaml", "target: skills\n")
	c, err := load(t, nil, map[string]string{"BAAGENT_CONFIG": file})
	if err != nil {
		t.Fatal(err)
	}
	if c.Target != config.TargetSkills {
		t.Errorf("Target = %q, want skills", c.Target)
	}
}

func TestEmptyConfigFileIsEmptyConfiguration(t *testing.T) {
	file := writeFile(t, "c.yaml", "# nothing yet\n")
	if _, err := load(t, []string{"-config", file}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestBadSettingsNameTheSetting(t *testing.T) {
	keysFile := writeFile(t, "keys", "# keys\nabcdefghijklmnop1=acme\n\nabcdefghijklmnop2=globex\n")
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown target", []string{"-target=db"}, nil, `setting target: unknown target "db"`},
		{"missing config file", []string{"-config=/nonexistent/baagent.yaml"}, nil, "config file: open /nonexistent/baagent.yaml"},
		{"unknown key in file", []string{"-config=" + writeFile(t, "a.yaml", "skils-dir: x\n")}, nil, `unknown setting "skils-dir"`},
		{"nested value in file", []string{"-config=" + writeFile(t, "b.yaml", "model:\n  name: x\n")}, nil, `setting "model" must be a single value`},
		{"not a mapping", []string{"-config=" + writeFile(t, "c.yaml", "- a\n- b\n")}, nil, "want a mapping"},
		{"bad yaml", []string{"-config=" + writeFile(t, "d.yaml", "a: [\n")}, nil, "config file"},
		{"duplicate key", []string{"-config=" + writeFile(t, "e.yaml", "model: a\nmodel: b\n")}, nil, "model"},
		{"bad value in file", []string{"-config=" + writeFile(t, "f.yaml", "max-msg-bytes: lots\n")}, nil, `setting "max-msg-bytes"`},
		{"bad env value", nil, map[string]string{"BAAGENT_SHUTDOWN_TIMEOUT": "soon"}, "environment BAAGENT_SHUTDOWN_TIMEOUT"},
		{"bad listen address", []string{"-tokens-listen=localhost"}, nil, "setting tokens-listen: want host:port"},
		{"port out of range", []string{"-metrics-addr=:70000"}, nil, "setting metrics-addr"},
		{"port clash", []string{"-metrics-addr=:7705"}, nil, "setting tokens-listen: port 7705 is also used by metrics-addr"},
		{"bad dial address", []string{"-skills-addr=skills"}, nil, "setting skills-addr"},
		{"bad nats url", []string{"-target=context", "-nats-url=http://x:4222"}, nil, "setting nats-url"},
		{"bad log level", []string{"-log-level=loud"}, nil, "setting log-level"},
		{"bad skills store", []string{"-skills-store=s3"}, nil, "setting skills-store"},
		{"zero shutdown", []string{"-shutdown-timeout=0s"}, nil, "setting shutdown-timeout"},
		{"zero model first byte", []string{"-model-first-byte-timeout=0s"}, nil, "setting model-first-byte-timeout"},
		{"negative model idle", []string{"-model-idle-timeout=-1s"}, nil, "setting model-idle-timeout"},
		{"no model attempt", []string{"-model-max-attempts=0"}, nil, "setting model-max-attempts"},
		{"too many model attempts", []string{"-model-max-attempts=11"}, nil, "setting model-max-attempts"},
		{"negative rate limit", []string{"-gateway-rate-limit=-1"}, nil, "setting gateway-rate-limit"},
		{"infinite rate limit", []string{"-gateway-rate-limit=+Inf"}, nil, "setting gateway-rate-limit"},
		{"zero burst", []string{"-gateway-rate-burst=0"}, nil, "setting gateway-rate-burst"},
		{"deep delegation", []string{"-subagent-max-depth=5"}, nil, "setting subagent-max-depth"},
		{"no delegation depth", []string{"-subagent-max-depth=0"}, nil, "setting subagent-max-depth"},
		{"zero subagent timeout", []string{"-subagent-timeout=0s"}, nil, "setting subagent-timeout"},
		{"zero clarification timeout", []string{"-clarification-timeout=0s"}, nil, "setting clarification-timeout"},
		{"zero decision timeout", []string{"-decision-timeout=0s"}, nil, "setting decision-timeout"},
		{"no plan step iterations", []string{"-plan-step-max-iterations=0"}, nil, "setting plan-step-max-iterations"},
		{"unknown complexity classifier", []string{"-complexity-classifier=guess"}, nil, "setting complexity-classifier"},
		{"no concurrent runs", []string{"-max-concurrent-runs=0"}, nil, "setting max-concurrent-runs"},
		{"no queued runs", []string{"-max-queued-runs=0"}, nil, "setting max-queued-runs"},
		{"tenant over queue", []string{"-max-queued-runs=10", "-max-runs-per-tenant=11"}, nil, "setting max-runs-per-tenant"},
		{"short workspace idle", []string{"-workspace-max-idle=1s"}, nil, "setting workspace-max-idle"},
		{"tiny messages", []string{"-max-msg-bytes=10"}, nil, "setting max-msg-bytes"},
		{"zero nats replicas", []string{"-target=context", "-nats-replicas=0"}, nil, "setting nats-replicas: must be between 1 and 5"},
		{"embedded nats on every interface", []string{"-embedded-nats-addr=:4222"}, nil, "setting embedded-nats-addr: the embedded NATS has no authentication"},
		{"embedded nats on a public address", []string{"-embedded-nats-addr=10.1.2.3:4222"}, nil, "loopback only"},
		{"replicated embedded nats", []string{"-nats-replicas=3"}, nil, "setting nats-replicas: the embedded NATS"},
		{"bad model url", []string{"-model-base-url=api.openai.com"}, nil, "setting model-base-url"},
		{"empty model", []string{"-model="}, nil, "setting model"},
		{"bad api key entry", nil, map[string]string{"BAAGENT_API_KEYS": "justakey"}, "setting api-keys: entry 1: want key=tenant"},
		{"short api key", []string{"-api-keys=abc=acme"}, nil, "shorter than 16"},
		{"bad tenant", []string{"-api-keys=abcdefghijklmnopq=ac.me"}, nil, "setting api-keys: entry 1: tenant"},
		{"missing keys file", []string{"-api-keys-file=/nonexistent/keys"}, nil, "setting api-keys-file"},
		{"conflicting key", []string{"-api-keys=abcdefghijklmnop1=other", "-api-keys-file=" + keysFile}, nil, "both tenant"},
		{"positional argument", []string{"all"}, nil, `unexpected argument "all"`},
		{"empty data dir", []string{"-data-dir="}, nil, "setting data-dir"},
		{"tiny sql values", []string{"-sql-max-value-bytes=10"}, nil, "setting sql-max-value-bytes"},
		{"tiny sql heap", []string{"-sql-heap-limit-bytes=1024"}, nil, "setting sql-heap-limit-bytes"},
		{"sql share over slots", []string{"-sql-max-concurrent=2", "-sql-max-per-tenant=3"}, nil, "setting sql-max-per-tenant"},
		{"negative sql slots", []string{"-sql-max-concurrent=-1"}, nil, "setting sql-max-concurrent"},
		{"short search", []string{"-search-timeout=1ms"}, nil, "setting search-timeout"},
		{"tiny grep", []string{"-grep-max-bytes=1"}, nil, "setting grep-max-bytes"},
		{"grep share over slots", []string{"-grep-max-concurrent=1", "-grep-max-per-tenant=2"}, nil, "setting grep-max-per-tenant"},
		{"negative workspace quota", []string{"-workspace-quota-bytes=-1"}, nil, "setting workspace-quota-bytes"},
		{"negative artifact quota", []string{"-artifact-quota-bytes=-5"}, nil, "setting artifact-quota-bytes"},
		{"short token secret", nil, map[string]string{"BAAGENT_GATEWAY_TOKEN_SECRET": "short"}, "setting gateway-token-secret: want at least 16 bytes"},
		{"long token ttl", []string{"-gateway-token-ttl=48h"}, nil, "setting gateway-token-ttl"},
		{"origin with a path", []string{"-gateway-allowed-origins=https://app.example/x"}, nil, "setting gateway-allowed-origins"},
		{"origin without scheme", []string{"-gateway-allowed-origins=app.example"}, nil, "setting gateway-allowed-origins"},
		{"negative streams per key", []string{"-gateway-max-streams-per-key=-1"}, nil, "setting gateway-max-streams-per-key"},
		{"negative in flight per key", []string{"-gateway-max-in-flight-per-key=-1"}, nil, "setting gateway-max-in-flight-per-key"},
		{"negative auth failures", []string{"-gateway-auth-failure-limit=-1"}, nil, "setting gateway-auth-failure-limit"},
		{"tiny auth window", []string{"-gateway-auth-failure-window=1ms"}, nil, "setting gateway-auth-failure-window"},
		{"negative body timeout", []string{"-gateway-body-read-timeout=-1s"}, nil, "setting gateway-body-read-timeout"},
		{"tiny skill uploads", []string{"-gateway-max-skill-bytes=100"}, nil, "setting gateway-max-skill-bytes"},
		{"huge skill uploads", []string{"-gateway-max-skill-bytes=2147483648"}, nil, "setting gateway-max-skill-bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.args, tc.env)
			if err == nil {
				t.Fatalf("Load succeeded, want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestAPIKeysFromFlagAndFile(t *testing.T) {
	keysFile := writeFile(t, "keys", "# keys\nabcdefghijklmnop1=acme\n\nabcdefghijklmnop2=globex\n")
	c, err := load(t, []string{"-api-keys-file=" + keysFile}, map[string]string{"BAAGENT_API_KEYS": "zzzzzzzzzzzzzzzz=initech"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"abcdefghijklmnop1": "acme", "abcdefghijklmnop2": "globex", "zzzzzzzzzzzzzzzz": "initech"}
	if len(c.Gateway.APIKeys) != len(want) {
		t.Fatalf("APIKeys = %v, want %v", c.Gateway.APIKeys, want)
	}
	for k, v := range want {
		if c.Gateway.APIKeys[k] != v {
			t.Errorf("APIKeys[%s] = %q, want %q", k, c.Gateway.APIKeys[k], v)
		}
	}
}

func TestHelpIsReported(t *testing.T) {
	var out strings.Builder
	_, err := LoadConfig([]string{"-h"}, env(nil), &out)
	if !errors.Is(err, config.ErrHelp) {
		t.Fatalf("err = %v, want ErrHelp", err)
	}
	if !strings.Contains(out.String(), "-skills-dir") {
		t.Errorf("usage does not list -skills-dir:\n%s", out.String())
	}
}

func TestGatewayEdgeSettings(t *testing.T) {
	c, err := load(t, []string{"-gateway-allowed-origins=https://app.example, http://localhost:3000/", "-gateway-max-streams-per-key=0"},
		map[string]string{"BAAGENT_GATEWAY_TOKEN_SECRET": "0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	g := c.Gateway
	if len(g.AllowedOrigins) != 2 || g.AllowedOrigins[0] != "https://app.example" || g.AllowedOrigins[1] != "http://localhost:3000/" {
		t.Errorf("allowed origins = %q", g.AllowedOrigins)
	}
	if g.TokenSecret != "0123456789abcdef" || g.MaxStreamsPerKey != 0 || g.MaxInFlightPerKey != 64 || g.AuthFailureLimit != 20 {
		t.Errorf("edge settings = %+v", g)
	}
}

func TestToolBudgetSettings(t *testing.T) {
	c, err := load(t, []string{"-workspace-quota-bytes=0", "-sql-max-concurrent=4", "-sql-max-per-tenant=2"}, map[string]string{"BAAGENT_GREP_MAX_BYTES": "1048576"})
	if err != nil {
		t.Fatal(err)
	}
	b := c.ToolRunner
	if b.WorkspaceQuotaBytes != 0 || b.ArtifactQuotaBytes != 2<<30 || b.SQLMaxConcurrent != 4 || b.SQLMaxPerTenant != 2 || b.GrepMaxBytes != 1<<20 || b.SQLMaxValueBytes != 1<<20 {
		t.Errorf("tool budgets = %+v", b)
	}
}

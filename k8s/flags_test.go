package k8s_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/baagent/baagent/cmd/baagent/app"
	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/k8s/render"
)

// pathSettings are the settings that name a file or directory, and whether
// the process writes there.
var pathSettings = map[string]bool{
	"data-dir": true, "workspace-dir": true, "artifact-dir": true, "memory-db": true,
	"skills-dir": false, "scenarios-dir": false, "workspace-seed-dir": false,
	"token-encoders-file": false, "tools-file": false, "api-keys-file": false, "config": false,
}

// runtimeEnv are variables read by the Go runtime rather than the binary.
var runtimeEnv = map[string]bool{"GOMEMLIMIT": true, "GOMAXPROCS": true, "GOGC": true, "GODEBUG": true, "TZ": true}

// containerFlags reads args written as -name=value (the only form used, so
// that every setting is unambiguous to read and to check).
func containerFlags(c corev1.Container) (map[string]string, error) {
	flags := map[string]string{}
	for _, a := range c.Args {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || strings.HasPrefix(a, "--") || !ok || name == "" {
			return nil, fmt.Errorf("arg %q: write settings as -name=value", a)
		}
		if _, dup := flags[name]; dup {
			return nil, fmt.Errorf("arg %q: setting given twice", a)
		}
		flags[name] = value
	}
	return flags, nil
}

// knownSettings lists the binary's settings, read from its own usage text
// (`baagent -h`), which is generated from the flag set app.LoadConfig parses.
var knownSettings = sync.OnceValue(func() map[string]bool {
	var usage bytes.Buffer
	_, _ = app.LoadConfig([]string{"-h"}, func(string) string { return "" }, &usage)
	known := map[string]bool{}
	for _, line := range strings.Split(usage.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "  -"); ok {
			name, _, _ := strings.Cut(rest, " ")
			known[name] = true
		}
	}
	return known
})

// flagOfEnv maps BAAGENT_SKILLS_DIR to skills-dir.
func flagOfEnv(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "BAAGENT_")
	if !ok {
		return "", false
	}
	return strings.ToLower(strings.ReplaceAll(rest, "_", "-")), true
}

// loaded is one container's configuration as the binary reads it.
type loaded struct {
	cfg   *app.Config
	flags map[string]string // container args and BAAGENT_* env, by setting
	local *render.Local
}

// loadContainer lays out the container's volumes locally, rewrites the paths
// of its settings to them, and runs the binary's own configuration loader on
// its args and environment.
func loadContainer(t *testing.T, m *render.Manifest, o overlay, pod *corev1.PodSpec, c corev1.Container) (*loaded, error) {
	t.Helper()
	local, err := m.Materialize(pod, &c, render.LocalOptions{Dir: t.TempDir(), RepoRoot: "..", ExternalSecrets: o.externalSecrets})
	if err != nil {
		return nil, err
	}
	flags, err := containerFlags(c)
	if err != nil {
		return nil, err
	}
	env, err := m.Env(&c, o.externalSecrets)
	if err != nil {
		return nil, err
	}
	all := map[string]string{}
	for k, v := range flags {
		all[k] = v
	}
	rewrite := func(setting, v string) (string, error) {
		writes, isPath := pathSettings[setting]
		if !isPath || v == "" {
			return v, nil
		}
		lp, ok := local.Path(v)
		if !ok {
			return "", fmt.Errorf("setting %s=%s: not on a mounted volume nor in the image", setting, v)
		}
		if writes && !local.IsWritable(v) {
			return "", fmt.Errorf("setting %s=%s: written by the process but not on a writable volume (the root filesystem is read-only)", setting, v)
		}
		return lp, nil
	}
	var args []string
	for _, name := range render.SortedKeys(flags) {
		v, err := rewrite(name, flags[name])
		if err != nil {
			return nil, err
		}
		args = append(args, "-"+name+"="+v)
	}
	localEnv := map[string]string{}
	var envAsFlags []string
	for _, name := range render.SortedKeys(env) {
		setting, ok := flagOfEnv(name)
		if !ok {
			if !runtimeEnv[name] {
				return nil, fmt.Errorf("env %s: not read by the binary (want BAAGENT_<SETTING>)", name)
			}
			continue
		}
		if config.EnvName(setting) != name || !knownSettings()[setting] {
			return nil, fmt.Errorf("the binary refuses the environment: %s is not the variable of a setting", name)
		}
		if _, both := flags[setting]; both {
			return nil, fmt.Errorf("env %s: also given as -%s (the flag silently wins)", name, setting)
		}
		v, err := rewrite(setting, env[name])
		if err != nil {
			return nil, err
		}
		localEnv[name] = v
		all[setting] = env[name]
		if v != "" {
			envAsFlags = append(envAsFlags, "-"+setting+"="+v)
		}
	}
	cfg, err := app.LoadConfig(args, func(k string) string { return localEnv[k] }, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("the binary refuses the settings: %w", err)
	}
	// The loader ignores environment variables it does not know; as flags,
	// an unknown name is an error.
	if _, err := app.LoadConfig(append(args, envAsFlags...), func(string) string { return "" }, io.Discard); err != nil {
		return nil, fmt.Errorf("the binary refuses the environment: %w", err)
	}
	return &loaded{cfg: cfg, flags: all, local: local}, nil
}

// checkFlags: every container arg and env var is one the binary accepts,
// and the ports it listens on are the container's ports.
func checkFlags(t *testing.T, m *render.Manifest, o overlay) []error {
	var errs []error
	for _, name := range render.SortedKeys(m.Deployments) {
		d := m.Deployments[name]
		if len(d.Spec.Template.Spec.Containers) != 1 {
			continue // reported by checkWorkloads
		}
		c := d.Spec.Template.Spec.Containers[0]
		l, err := loadContainer(t, m, o, &d.Spec.Template.Spec, c)
		if err != nil {
			errs = append(errs, fmt.Errorf("Deployment %s: %w", name, err))
			continue
		}
		if l.cfg.Target != name {
			errs = append(errs, fmt.Errorf("Deployment %s: runs -target=%s", name, l.cfg.Target))
			continue
		}
		listens := map[string]string{"grpc": l.cfg.Listen[name], "metrics": l.cfg.MetricsAddr}
		if name == config.TargetGateway {
			listens["http"] = l.cfg.GatewayHTTPAddr
		}
		for port, addr := range listens {
			_, p, _ := net.SplitHostPort(addr)
			n, _ := strconv.Atoi(p)
			if want := containerPort(c, port); want == 0 || int32(n) != want {
				errs = append(errs, fmt.Errorf("Deployment %s: listens on %s for %s, but its container port %q is %d", name, addr, port, port, want))
			}
		}
		named := map[string]bool{"grpc": true, "metrics": true, "http": name == config.TargetGateway}
		for _, p := range c.Ports {
			if !named[p.Name] {
				errs = append(errs, fmt.Errorf("Deployment %s: container port %q (%d) has no listener", name, p.Name, p.ContainerPort))
			}
		}
	}
	return errs
}

func TestKnownSettingsAreTheBinarys(t *testing.T) {
	known := knownSettings()
	for _, s := range []string{"target", "skills-dir", "api-keys-file", "tokens-addr", "gateway-http-listen", "model-api-key"} {
		if !known[s] {
			t.Errorf("setting %s not found in the usage text", s)
		}
	}
	if known["no-such-setting"] || len(known) < 30 {
		t.Fatalf("read %d settings from the usage text", len(known))
	}
}

package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/test/split/splitrun"
)

// The split-mode cluster: each service as its own `baagent -target=<svc>`
// process on a loopback port, against a NATS server with a JetStream file
// store that runs in the test process (so that it can be stopped and
// started again on the same port and store). Every process can be killed
// with SIGKILL and started again with the same flags, which is what the
// fault tests under test/reliability/faults do.

// BuildBaagent compiles cmd/baagent into dir and returns the binary's path.
func BuildBaagent(ctx context.Context, repoRoot, dir string) (string, error) {
	bin := filepath.Join(dir, "baagent")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/baagent")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/baagent: %w\n%s", err, out)
	}
	return bin, nil
}

// ClusterOptions configures StartCluster.
type ClusterOptions struct {
	// Baagent is the binary to run (BuildBaagent).
	Baagent string
	// Services to start as processes, in start order; nil starts all six.
	// A service left out must be given in External.
	Services []string
	// External are services the test serves itself, by gRPC address.
	External map[string]string
	// ScenariosDir replaces the example scenarios of the scripted model.
	ScenariosDir string
	// APIKeys are the gateway's keys (key → tenant).
	APIKeys map[string]string
	// Args are extra flags per service (appended last, so they win).
	Args map[string][]string
	// ReadyTimeout bounds each wait for a process to serve (default 60 s).
	ReadyTimeout time.Duration
}

// Cluster is a running split-mode suite.
type Cluster struct {
	t    testing.TB
	opts ClusterOptions
	// Dir holds every process's data and log (<svc>.log).
	Dir string
	// WorkspaceDir is the toolrunner's -workspace-dir.
	WorkspaceDir string
	// Addr is each service's gRPC address; HTTPAddr the gateway's HTTP.
	Addr     map[string]string
	HTTPAddr string

	natsPort  int
	natsStore string

	mu    sync.Mutex
	nats  *natsx.EmbeddedServer
	procs map[string]*Proc
}

// Proc is one incarnation of a service process.
type Proc struct {
	Name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done closes
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// StartCluster starts NATS and the services and waits until each serves.
// Everything is stopped when the test ends.
func StartCluster(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	if opts.Services == nil {
		opts.Services = append([]string(nil), config.Services...)
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 60 * time.Second
	}
	dir := t.TempDir()
	c := &Cluster{
		t: t, opts: opts, Dir: dir, WorkspaceDir: filepath.Join(dir, "workspaces"),
		Addr: map[string]string{}, natsStore: filepath.Join(dir, "nats"), procs: map[string]*Proc{},
	}
	ports, err := splitrun.FreePorts(len(config.Services) + 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, svc := range config.Services {
		c.Addr[svc] = "127.0.0.1:" + strconv.Itoa(ports[i])
	}
	for svc, addr := range opts.External {
		c.Addr[svc] = addr
	}
	c.HTTPAddr = "127.0.0.1:" + strconv.Itoa(ports[len(config.Services)])
	c.natsPort = ports[len(config.Services)+1]
	t.Cleanup(c.stopAll)

	if err := c.StartNATS(); err != nil {
		t.Fatal(err)
	}
	for _, svc := range opts.Services {
		c.Start(svc)
	}
	for _, svc := range opts.Services {
		c.WaitServing(svc)
	}
	return c
}

// NATSURL is the client URL of the cluster's NATS.
func (c *Cluster) NATSURL() string { return fmt.Sprintf("nats://127.0.0.1:%d", c.natsPort) }

// StartNATS starts the NATS server on its port and file store.
func (c *Cluster) StartNATS() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nats != nil {
		return errors.New("NATS is running")
	}
	srv, err := natsx.StartEmbedded(natsx.EmbeddedOptions{Host: "127.0.0.1", Port: c.natsPort, StoreDir: c.natsStore})
	if err != nil {
		return fmt.Errorf("start NATS: %w", err)
	}
	c.nats = srv
	return nil
}

// StopNATS shuts the NATS server down; its file store stays.
func (c *Cluster) StopNATS() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nats != nil {
		c.nats.Shutdown()
		c.nats = nil
	}
}

// args are the flags of svc's process.
func (c *Cluster) args(svc string) []string {
	root := RepoRoot(c.t)
	scenarios := c.opts.ScenariosDir
	if scenarios == "" {
		scenarios = filepath.Join(root, "examples", "scenarios")
	}
	args := []string{
		"-target=" + svc,
		"-nats-url=" + c.NATSURL(),
		"-data-dir=" + filepath.Join(c.Dir, svc),
		"-metrics-addr=127.0.0.1:0",
		"-gateway-http-listen=" + c.HTTPAddr,
		"-skills-dir=" + filepath.Join(root, "examples", "skills"),
		"-workspace-seed-dir=" + filepath.Join(root, "examples", "data"),
		"-workspace-dir=" + c.WorkspaceDir,
		"-artifact-dir=" + filepath.Join(c.Dir, "artifacts"),
		"-scenarios-dir=" + scenarios,
		"-log-level=debug",
		"-shutdown-timeout=2s",
		"-" + svc + "-listen=" + c.Addr[svc],
	}
	for _, peer := range config.Services {
		args = append(args, "-"+peer+"-addr="+c.Addr[peer])
	}
	return append(args, c.opts.Args[svc]...)
}

// env is the process environment: the parent's without BAAGENT_*, plus the
// gateway's keys.
func (c *Cluster) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BAAGENT_") {
			env = append(env, kv)
		}
	}
	if len(c.opts.APIKeys) > 0 {
		var pairs []string
		for k, tenant := range c.opts.APIKeys {
			pairs = append(pairs, k+"="+tenant)
		}
		env = append(env, "BAAGENT_API_KEYS="+strings.Join(pairs, ","))
	}
	return env
}

// Start starts svc's process (again, after Kill); its output is appended
// to <Dir>/<svc>.log.
func (c *Cluster) Start(svc string) *Proc {
	c.t.Helper()
	log, err := os.OpenFile(c.LogPath(svc), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(c.opts.Baagent, c.args(svc)...)
	cmd.Env = c.env()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		c.t.Fatalf("start %s: %v", svc, err)
	}
	p := &Proc{Name: svc, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	c.mu.Lock()
	c.procs[svc] = p
	c.mu.Unlock()
	return p
}

// LogPath is the log file of svc's processes.
func (c *Cluster) LogPath(svc string) string { return filepath.Join(c.Dir, svc+".log") }

// Log returns everything svc's processes have logged.
func (c *Cluster) Log(svc string) string {
	b, err := os.ReadFile(c.LogPath(svc))
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// Kill ends svc's process with SIGKILL and waits until it has exited.
func (c *Cluster) Kill(svc string) {
	c.t.Helper()
	c.mu.Lock()
	p := c.procs[svc]
	c.mu.Unlock()
	if p == nil {
		c.t.Fatalf("kill %s: not running", svc)
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Restart kills svc (SIGKILL), starts it again and waits until it serves.
func (c *Cluster) Restart(svc string) {
	c.t.Helper()
	c.Kill(svc)
	c.Start(svc)
	c.WaitServing(svc)
}

// WaitServing polls svc's gRPC health until it is SERVING, failing the test
// if the process exits first or ReadyTimeout passes.
func (c *Cluster) WaitServing(svc string) {
	c.t.Helper()
	c.mu.Lock()
	p := c.procs[svc]
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.ReadyTimeout)
	defer cancel()
	conn, err := grpc.NewClient(c.Addr[svc], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	var last error
	for {
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		resp, err := hc.Check(cctx, &healthpb.HealthCheckRequest{Service: ServiceNames[svc]})
		ccancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return
		}
		last = err
		if err == nil {
			last = fmt.Errorf("health %s", resp.GetStatus())
		}
		select {
		case <-p.done:
			c.t.Fatalf("%s exited before serving (%v); log:\n%s", svc, p.err, Tail(c.Log(svc), 3000))
		case <-ctx.Done():
			c.t.Fatalf("%s not serving after %s: %v; log:\n%s", svc, c.opts.ReadyTimeout, last, Tail(c.Log(svc), 3000))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stopAll ends every process with SIGTERM (SIGKILL after 10 s), then NATS.
func (c *Cluster) stopAll() {
	c.mu.Lock()
	procs := make([]*Proc, 0, len(c.procs))
	for _, p := range c.procs {
		procs = append(procs, p)
	}
	c.mu.Unlock()
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	c.StopNATS()
	if c.t.Failed() {
		for _, p := range procs {
			c.t.Logf("%s log (end):\n%s", p.Name, Tail(c.Log(p.Name), 4000))
		}
	}
}

// Tail returns the last n bytes of s.
func Tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

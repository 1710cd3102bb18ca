package harness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	"github.com/baagent/baagent/internal/topology"
	"github.com/baagent/baagent/test/split/splitrun"
)

// The split-mode cluster: each service as its own `baagent -target=<svc>`
// process on a loopback port, against a NATS server with a JetStream file
// store that runs in the test process (so that it can be stopped and
// started again on the same port and store). Every process can be killed
// with SIGKILL and started again with the same flags, which is what the
// fault tests under test/reliability/faults do.
//
// A service can run as several replicas (ClusterOptions.Replicas): each
// its own process with its own port, data dir and log, named
// "<svc>-0", "<svc>-1", …; its peers dial them all through one
// `static:///addr0,addr1` target (round-robin, a dead replica skipped).
// The workspace and artifact dirs are shared by every process, as a shared
// volume would be, so that any toolrunner replica can serve any
// conversation.

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

// BuildAppendServer compiles the MCP test server test/mcp/appendserver
// (one tool with a side effect, append_line) into dir and returns its path.
func BuildAppendServer(ctx context.Context, repoRoot, dir string) (string, error) {
	bin := filepath.Join(dir, "appendserver")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./test/mcp/appendserver")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./test/mcp/appendserver: %w\n%s", err, out)
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
	// Args are extra flags per service (appended last, so they win) or
	// per replica name ("toolrunner-1", appended after the service's).
	Args map[string][]string
	// Replicas is how many processes run a service (default 1). A service
	// with one replica is named as the service; with n > 1 its replicas
	// are "<svc>-0" … "<svc>-<n-1>" (Cluster.Replicas).
	Replicas map[string]int
	// ReadyTimeout bounds each wait for a process to serve (default 60 s).
	ReadyTimeout time.Duration
}

// Cluster is a running split-mode suite.
type Cluster struct {
	t    testing.TB
	opts ClusterOptions
	// Dir holds every process's data (<replica>/) and log (<replica>.log).
	Dir string
	// WorkspaceDir and ArtifactDir are the toolrunner's -workspace-dir
	// and -artifact-dir, shared by every replica.
	WorkspaceDir, ArtifactDir string
	// Addr is, for each service, the gRPC target its peers dial: host:port,
	// or static:///host:port,… when it has several replicas (dial that with
	// internal/grpcclient); and for each replica name, its host:port.
	// HTTPAddr is the (first) gateway's HTTP address.
	Addr     map[string]string
	HTTPAddr string

	natsPort  int
	natsStore string

	replicas  map[string][]string // service → replica names
	serviceOf map[string]string   // replica name → service
	httpAddr  map[string]string   // gateway replica → its HTTP address

	mu    sync.Mutex
	nats  *natsx.EmbeddedServer
	procs map[string]*Proc // by replica name
}

// Proc is one incarnation of a service process.
type Proc struct {
	// Name is the replica's name (the service's when it has one replica).
	Name string
	// Service is the -target it runs.
	Service string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error // set before done closes
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

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
		t: t, opts: opts, Dir: dir,
		WorkspaceDir: filepath.Join(dir, "workspaces"), ArtifactDir: filepath.Join(dir, "artifacts"),
		Addr: map[string]string{}, natsStore: filepath.Join(dir, "nats"), procs: map[string]*Proc{},
		replicas: map[string][]string{}, serviceOf: map[string]string{}, httpAddr: map[string]string{},
	}
	for svc, n := range opts.Replicas {
		if !slices.Contains(config.Services, svc) || n < 1 {
			t.Fatalf("ClusterOptions.Replicas: %s: %d replicas of an unknown service or fewer than 1", svc, n)
		}
	}
	for _, svc := range config.Services {
		n := max(opts.Replicas[svc], 1)
		if n == 1 {
			c.replicas[svc] = []string{svc}
		} else {
			for i := range n {
				c.replicas[svc] = append(c.replicas[svc], fmt.Sprintf("%s-%d", svc, i))
			}
		}
		for _, name := range c.replicas[svc] {
			c.serviceOf[name] = svc
		}
	}
	// A port per replica of every service (peers are given an address even
	// for services not started), one HTTP port per gateway replica, NATS.
	nports := len(c.replicas[config.TargetGateway]) + 1
	for _, svc := range config.Services {
		nports += len(c.replicas[svc])
	}
	ports, err := splitrun.FreePorts(nports)
	if err != nil {
		t.Fatal(err)
	}
	next := func() string {
		p := ports[0]
		ports = ports[1:]
		return "127.0.0.1:" + strconv.Itoa(p)
	}
	c.natsPort = ports[0]
	ports = ports[1:]
	for _, svc := range config.Services {
		var addrs []string
		for _, name := range c.replicas[svc] {
			c.Addr[name] = next()
			addrs = append(addrs, c.Addr[name])
		}
		if len(addrs) > 1 {
			c.Addr[svc] = "static:///" + strings.Join(addrs, ",")
		}
	}
	for _, name := range c.replicas[config.TargetGateway] {
		c.httpAddr[name] = next()
	}
	c.HTTPAddr = c.httpAddr[c.replicas[config.TargetGateway][0]]
	for svc, addr := range opts.External {
		c.Addr[svc] = addr
	}
	t.Cleanup(c.stopAll)

	if err := c.StartNATS(); err != nil {
		t.Fatal(err)
	}
	for _, svc := range opts.Services {
		for _, name := range c.replicas[svc] {
			c.Start(name)
		}
	}
	for _, svc := range opts.Services {
		c.WaitServing(svc)
	}
	return c
}

// Replicas returns the names of svc's replicas: svc itself when it runs
// as one process, else "<svc>-0", "<svc>-1", ….
func (c *Cluster) Replicas(svc string) []string {
	return append([]string(nil), c.replicas[svc]...)
}

// replica returns the service of a replica name, failing the test for an
// unknown name or for a service that has several replicas.
func (c *Cluster) replica(name string) string {
	c.t.Helper()
	svc, ok := c.serviceOf[name]
	if !ok {
		if names := c.replicas[name]; len(names) > 1 {
			c.t.Fatalf("%s runs as %d replicas: name one of %v", name, len(names), names)
		}
		c.t.Fatalf("no service or replica %q", name)
	}
	return svc
}

// names resolves a service (all its replicas) or a replica name.
func (c *Cluster) names(name string) []string {
	c.t.Helper()
	if names, ok := c.replicas[name]; ok {
		return names
	}
	c.replica(name)
	return []string{name}
}

// Proc returns the current (or last) process of a replica, nil if it was
// never started.
func (c *Cluster) Proc(name string) *Proc {
	c.t.Helper()
	c.replica(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.procs[name]
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

// args are the flags of the process of replica name of svc.
func (c *Cluster) args(svc, name string) []string {
	root := RepoRoot(c.t)
	scenarios := c.opts.ScenariosDir
	if scenarios == "" {
		scenarios = filepath.Join(root, "examples", "scenarios")
	}
	args := []string{
		"-target=" + svc,
		"-nats-url=" + c.NATSURL(),
		"-data-dir=" + filepath.Join(c.Dir, name),
		"-metrics-addr=127.0.0.1:0",
		"-gateway-http-listen=" + cmp.Or(c.httpAddr[name], c.HTTPAddr),
		"-skills-dir=" + filepath.Join(root, "examples", "skills"),
		"-workspace-seed-dir=" + filepath.Join(root, "examples", "data"),
		"-workspace-dir=" + c.WorkspaceDir,
		"-artifact-dir=" + c.ArtifactDir,
		"-scenarios-dir=" + scenarios,
		"-log-level=debug",
		"-shutdown-timeout=2s",
		"-" + svc + "-listen=" + c.Addr[name],
	}
	for _, peer := range config.Services {
		args = append(args, "-"+peer+"-addr="+c.Addr[peer])
	}
	args = append(args, c.opts.Args[svc]...)
	if name != svc {
		args = append(args, c.opts.Args[name]...)
	}
	return args
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

// Start starts the process of a replica (a service's name when it has one
// replica), again after Kill; its output is appended to <Dir>/<name>.log.
func (c *Cluster) Start(name string) *Proc {
	c.t.Helper()
	svc := c.replica(name)
	log, err := os.OpenFile(c.LogPath(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(c.opts.Baagent, c.args(svc, name)...)
	cmd.Env = c.env()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		c.t.Fatalf("start %s: %v", name, err)
	}
	p := &Proc{Name: name, Service: svc, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	c.mu.Lock()
	c.procs[name] = p
	c.mu.Unlock()
	return p
}

// LogPath is the log file of a replica's processes (a service's name when
// it has one replica).
func (c *Cluster) LogPath(name string) string {
	c.t.Helper()
	c.replica(name)
	return filepath.Join(c.Dir, name+".log")
}

// Log returns everything a replica's processes have logged; given a
// service with several replicas, all of theirs, one after the other.
func (c *Cluster) Log(name string) string {
	c.t.Helper()
	var out strings.Builder
	for _, n := range c.names(name) {
		b, err := os.ReadFile(c.LogPath(n))
		if err != nil {
			out.WriteString(err.Error() + "\n")
			continue
		}
		out.Write(b)
	}
	return out.String()
}

// Kill ends a replica's process (a service's when it has one replica)
// with SIGKILL and waits until it has exited.
func (c *Cluster) Kill(name string) {
	c.t.Helper()
	c.replica(name)
	c.mu.Lock()
	p := c.procs[name]
	c.mu.Unlock()
	if p == nil {
		c.t.Fatalf("kill %s: not running", name)
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Restart kills a replica (SIGKILL), starts it again and waits until it
// serves.
func (c *Cluster) Restart(name string) {
	c.t.Helper()
	c.Kill(name)
	c.Start(name)
	c.WaitServing(name)
}

// WaitServing polls the gRPC health of a replica (or of every replica of
// a service) until it is SERVING, failing the test if the process exits
// first or ReadyTimeout passes.
func (c *Cluster) WaitServing(name string) {
	c.t.Helper()
	for _, n := range c.names(name) {
		c.waitServing(n)
	}
}

func (c *Cluster) waitServing(name string) {
	c.t.Helper()
	svc := c.serviceOf[name]
	c.mu.Lock()
	p := c.procs[name]
	c.mu.Unlock()
	if p == nil {
		c.t.Fatalf("%s was never started", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.ReadyTimeout)
	defer cancel()
	conn, err := grpc.NewClient(c.Addr[name], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	var last error
	for {
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		resp, err := hc.Check(cctx, &healthpb.HealthCheckRequest{Service: topology.GRPCServices[svc]})
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
			c.t.Fatalf("%s exited before serving (%v); log:\n%s", name, p.err, Tail(c.Log(name), 3000))
		case <-ctx.Done():
			c.t.Fatalf("%s not serving after %s: %v; log:\n%s", name, c.opts.ReadyTimeout, last, Tail(c.Log(name), 3000))
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

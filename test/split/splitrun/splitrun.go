// Package splitrun runs the suite in microservices mode on loopback: NATS
// and each service as its own `baagent -target=<service>` process, with the
// flags, environment and files of the k8s/overlays/dev manifests (rendered
// with kustomize), addresses rewritten to loopback ports (those of `make run`
// when free, or free ones) and volumes laid out in a local directory.
// `make run-split` and the split-mode integration test both use it, so what
// they run is what Kubernetes runs.
package splitrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/k8s/render"
)

// Options configures Start.
type Options struct {
	// RepoRoot is the repository (k8s/overlays/dev, examples/).
	RepoRoot string
	// Baagent and NATSServer are the binaries to run.
	Baagent, NATSServer string
	// Dir receives each process's files and its log (<name>.log).
	Dir string
	// ReadyTimeout bounds the wait for every process to be healthy
	// (default 60 s).
	ReadyTimeout time.Duration
	// Logs, if set, also receives every process's output.
	Logs io.Writer
	// DefaultPorts asks for the ports of `make run` (see DefaultPorts): a
	// listener whose port is taken moves alone to a free one, reported in
	// Suite.Moved. False gives every listener a free port, as tests want.
	DefaultPorts bool
}

// Suite is a running split-mode suite.
type Suite struct {
	// Addr is each service's gRPC address; HTTPAddr the gateway's HTTP.
	Addr     map[string]string
	HTTPAddr string
	// NATSURL is the NATS server's client URL.
	NATSURL string
	// Ports is each listener's port (keys: GRPCListener, MetricsListener,
	// ListenerHTTP, ListenerNATS, ListenerNATSMonitor).
	Ports map[string]int
	// Moved lists the listeners that did not get their default port
	// (Options.DefaultPorts only).
	Moved []Move
	// Args are the arguments each process was started with, by name.
	Args map[string][]string

	procs []*process // NATS first
}

type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done closes
	log  *os.File
}

// Start renders the dev overlay, starts NATS and the seven services, and waits
// until NATS answers and every service reports SERVING on gRPC health. On
// error everything started is stopped.
func Start(ctx context.Context, opts Options) (_ *Suite, err error) {
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 60 * time.Second
	}
	// Each process runs in its own directory: every path must be absolute.
	for _, p := range []*string{&opts.RepoRoot, &opts.Baagent, &opts.NATSServer, &opts.Dir} {
		if *p, err = filepath.Abs(*p); err != nil {
			return nil, err
		}
	}
	m, err := render.Dir(filepath.Join(opts.RepoRoot, "k8s", "overlays", "dev"))
	if err != nil {
		return nil, err
	}
	s := &Suite{Addr: map[string]string{}, Args: map[string][]string{}}
	defer func() {
		if err != nil {
			_ = s.Stop(5 * time.Second)
		}
	}()
	s.Ports, s.Moved, err = PlanPorts(DefaultPorts(), !opts.DefaultPorts)
	if err != nil {
		return nil, err
	}
	addr := func(listener string) string { return "127.0.0.1:" + strconv.Itoa(s.Ports[listener]) }
	metrics := map[string]string{}
	for _, svc := range config.Services {
		s.Addr[svc] = addr(GRPCListener(svc))
		metrics[svc] = addr(MetricsListener(svc))
	}
	s.HTTPAddr = addr(ListenerHTTP)
	natsAddr, natsMonitor := addr(ListenerNATS), addr(ListenerNATSMonitor)
	s.NATSURL = "nats://" + natsAddr

	if err := s.startNATS(ctx, m, opts, natsAddr, natsMonitor); err != nil {
		return nil, err
	}
	for _, svc := range config.Services {
		if err := s.startService(ctx, m, opts, svc, metrics[svc]); err != nil {
			return nil, fmt.Errorf("%s: %w", svc, err)
		}
	}
	readyCtx, cancel := context.WithTimeout(ctx, opts.ReadyTimeout)
	defer cancel()
	for _, svc := range config.Services {
		if err := s.waitHealthy(readyCtx, svc); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// startNATS runs nats-server with the dev overlay's nats.conf, its volume
// paths rewritten to local directories and its listeners moved to loopback.
func (s *Suite) startNATS(ctx context.Context, m *render.Manifest, opts Options, addr, monitor string) error {
	ss, ok := m.StatefulSets["nats"]
	if !ok || len(ss.Spec.Template.Spec.Containers) != 1 {
		return errors.New("dev overlay: no NATS StatefulSet with one container")
	}
	pod := ss.Spec.Template.Spec.DeepCopy()
	for _, vct := range ss.Spec.VolumeClaimTemplates {
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: vct.Name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	c := ss.Spec.Template.Spec.Containers[0]
	dir := filepath.Join(opts.Dir, "nats")
	local, err := m.Materialize(pod, &c, render.LocalOptions{Dir: dir, RepoRoot: opts.RepoRoot})
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	if len(c.Args) != 2 || c.Args[0] != "--config" {
		return errors.New("nats: want args --config <file>")
	}
	confPath, ok := local.Path(c.Args[1])
	if !ok {
		return fmt.Errorf("nats: config %s is not on a volume", c.Args[1])
	}
	conf, err := os.ReadFile(confPath)
	if err != nil {
		return err
	}
	text := string(conf)
	for mount, localDir := range local.Mounts {
		text = strings.ReplaceAll(text, " "+mount+"/", " "+localDir+"/")
		text = strings.ReplaceAll(text, " "+mount+" ", " "+localDir+" ")
		text = strings.ReplaceAll(text, " "+mount+"\n", " "+localDir+"\n")
	}
	// Later keys win in a NATS configuration: listen on loopback only.
	text += fmt.Sprintf("\n# splitrun: loopback listeners\nlisten: %s\nhttp: %s\n", addr, monitor)
	localConf := filepath.Join(dir, "nats-local.conf")
	if err := os.WriteFile(localConf, []byte(text), 0o640); err != nil {
		return err
	}
	args := []string{"--config", localConf}
	s.Args["nats"] = args
	p, err := s.start(ctx, opts, "nats", opts.NATSServer, args, []string{"POD_NAME=nats-0"}, dir)
	if err != nil {
		return err
	}
	readyCtx, cancel := context.WithTimeout(ctx, opts.ReadyTimeout)
	defer cancel()
	return poll(readyCtx, p, "nats", func() error {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
		}
		return err
	})
}

// startService runs one Deployment's container as a local process.
func (s *Suite) startService(ctx context.Context, m *render.Manifest, opts Options, svc, metricsAddr string) error {
	d, ok := m.Deployments[svc]
	if !ok || len(d.Spec.Template.Spec.Containers) != 1 {
		return fmt.Errorf("dev overlay: no Deployment %s with one container", svc)
	}
	c := d.Spec.Template.Spec.Containers[0]
	dir := filepath.Join(opts.Dir, svc)
	local, err := m.Materialize(&d.Spec.Template.Spec, &c, render.LocalOptions{Dir: dir, RepoRoot: opts.RepoRoot})
	if err != nil {
		return err
	}
	env, err := m.Env(&c, nil)
	if err != nil {
		return err
	}
	var args []string
	for _, a := range c.Args {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if !ok {
			return fmt.Errorf("arg %q: want -name=value", a)
		}
		v, err := s.rewrite(name, value, svc, metricsAddr, local)
		if err != nil {
			return err
		}
		args = append(args, "-"+name+"="+v)
	}
	// The parent's BAAGENT_* variables must not leak into the services.
	var procEnv []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BAAGENT_") {
			procEnv = append(procEnv, kv)
		}
	}
	for _, name := range render.SortedKeys(env) {
		setting := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, "BAAGENT_"), "_", "-"))
		v, err := s.rewrite(setting, env[name], svc, metricsAddr, local)
		if err != nil {
			return err
		}
		procEnv = append(procEnv, name+"="+v)
	}
	s.Args[svc] = args
	_, err = s.start(ctx, opts, svc, opts.Baagent, args, procEnv, dir)
	return err
}

// rewrite maps one setting of the manifests to its loopback equivalent.
func (s *Suite) rewrite(setting, value, svc, metricsAddr string, local *render.Local) (string, error) {
	switch {
	case setting == "metrics-addr":
		return metricsAddr, nil
	case setting == "gateway-http-listen":
		return s.HTTPAddr, nil
	case setting == "nats-url":
		return s.NATSURL, nil
	case strings.HasSuffix(setting, "-listen") || strings.HasSuffix(setting, "-addr"):
		peer := strings.TrimSuffix(strings.TrimSuffix(setting, "-listen"), "-addr")
		addr, ok := s.Addr[peer]
		if !ok {
			return "", fmt.Errorf("setting %s: unknown service %s", setting, peer)
		}
		return addr, nil
	case strings.HasPrefix(value, "/"):
		p, ok := local.Path(value)
		if !ok {
			return "", fmt.Errorf("setting %s=%s: not on a volume nor in the image", setting, value)
		}
		return p, nil
	}
	if u, err := url.Parse(value); err == nil && u.Scheme != "" && u.Host != "" && !strings.HasPrefix(u.Host, "127.0.0.1") && setting != "model-base-url" {
		return "", fmt.Errorf("setting %s=%s: an address splitrun does not know how to rewrite", setting, value)
	}
	return value, nil
}

// start runs one process; its output goes to <Dir>/<name>.log (and Logs).
func (s *Suite) start(ctx context.Context, opts Options, name, bin string, args, env []string, dir string) (*process, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(opts.Dir, name+".log"))
	if err != nil {
		return nil, err
	}
	var out io.Writer = log
	if opts.Logs != nil {
		out = io.MultiWriter(log, prefixed(opts.Logs, name))
	}
	// Not exec.CommandContext: Stop ends the processes with SIGTERM and
	// checks how they exit, which a context kill would pre-empt.
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	// Own process group: Ctrl-C in a terminal reaches the launcher, which
	// then stops the suite in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{}), log: log}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	s.procs = append(s.procs, p)
	return p, nil
}

// waitHealthy polls a service's gRPC health until it is SERVING.
func (s *Suite) waitHealthy(ctx context.Context, svc string) error {
	var p *process
	for _, q := range s.procs {
		if q.name == svc {
			p = q
		}
	}
	conn, err := grpc.NewClient(s.Addr[svc], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	return poll(ctx, p, svc, func() error {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		resp, err := hc.Check(cctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("health %s", resp.GetStatus())
		}
		return nil
	})
}

// poll retries check until it succeeds, the process exits or ctx ends.
func poll(ctx context.Context, p *process, name string, check func() error) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before it was ready (%v); its log ends:\n%s", name, p.err, tail(p.log.Name(), 2048))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last: %v); see %s", name, ctx.Err(), err, p.log.Name())
		case <-t.C:
		}
	}
}

// tail returns the last n bytes of a file, for error messages.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		_, _ = f.Seek(fi.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// Stop sends SIGTERM to every process, services before NATS (the gateway
// first), waits up to timeout for each, and returns an error naming every
// process that did not exit with status 0.
func (s *Suite) Stop(timeout time.Duration) error {
	var errs []error
	for i := len(s.procs) - 1; i >= 0; i-- {
		p := s.procs[i]
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			errs = append(errs, fmt.Errorf("%s: SIGTERM: %w", p.name, err))
		}
		select {
		case <-p.done:
			if p.err != nil {
				errs = append(errs, fmt.Errorf("%s exited: %v (see %s)", p.name, p.err, p.log.Name()))
			}
		case <-time.After(timeout):
			_ = p.cmd.Process.Kill()
			<-p.done
			errs = append(errs, fmt.Errorf("%s did not stop within %s of SIGTERM; killed (see %s)", p.name, timeout, p.log.Name()))
		}
		p.log.Close()
	}
	s.procs = nil
	return errors.Join(errs...)
}

// Exited returns a channel closed when any process exits on its own.
func (s *Suite) Exited() <-chan string {
	ch := make(chan string, len(s.procs))
	for _, p := range s.procs {
		go func() {
			<-p.done
			ch <- p.name
		}()
	}
	return ch
}

// FreePorts reserves n distinct free loopback ports. They are released
// before use, so another process could take one in between; a clash shows
// as a clear bind error naming the setting. The ports are picked below the
// kernel's ephemeral range, because processes of the suite bind other
// listeners to port 0 (metrics) and open connections whose source ports
// come from that range: a port reserved there was seen handed out again
// before its service bound it.
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	low := ephemeralLow()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		addr := "127.0.0.1:0"
		if low > 2048 && tries < 100*n {
			addr = "127.0.0.1:" + strconv.Itoa(1024+rand.IntN(low-1024))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if addr == "127.0.0.1:0" {
				return nil, err
			}
			continue // taken: try another
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux),
// or 0 when it is unknown.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return low
}

// prefixed writes each chunk of a process's output to w (line-buffered
// output from the child keeps lines whole in practice).
func prefixed(w io.Writer, name string) io.Writer {
	return &prefixWriter{w: w, prefix: []byte(name + " | ")}
}

type prefixWriter struct {
	w      io.Writer
	prefix []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line == "" {
			continue
		}
		if _, err := p.w.Write(append(append([]byte{}, p.prefix...), line...)); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

// Package pgtest runs a real PostgreSQL server for tests: initdb into a
// temporary directory, a free loopback port, the unix socket beside the
// data, fsync off. One server is shared by every test of a process and each
// test gets a database of its own, so a suite stays fast.
//
// When PostgreSQL is not installed the tests that ask for it are skipped,
// unless BAAGENT_REQUIRE_POSTGRES=1 (CI), which turns the skip into a
// failure. initdb and postgres refuse to run as root: when the test process
// is root they run as the `postgres` system user.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// RequireEnv names the variable that makes a missing PostgreSQL a failure.
const RequireEnv = "BAAGENT_REQUIRE_POSTGRES"

// BinDirEnv names the variable that overrides where the PostgreSQL binaries
// are looked for.
const BinDirEnv = "BAAGENT_POSTGRES_BIN"

// superuser is the role initdb creates; tests connect as it.
const superuser = "postgres"

// startTimeout bounds how long the server may take to accept connections.
const startTimeout = 60 * time.Second

// Server is a running PostgreSQL.
type Server struct {
	dir  string // the temporary directory: data, socket, log
	port int
	cmd  *exec.Cmd
	done chan struct{} // closed when the postgres process exited
	err  error         // its exit status, valid after done
}

var (
	sharedMu  sync.Mutex
	shared    *Server
	sharedErr error
)

// binDirs are the places the binaries are looked for, in order.
func binDirs() []string {
	if d := os.Getenv(BinDirEnv); d != "" {
		return []string{d}
	}
	return []string{"/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin"}
}

// BinDir returns the directory holding initdb and postgres, or "" when
// PostgreSQL is not installed.
func BinDir() string {
	for _, d := range binDirs() {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d
		}
	}
	return ""
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// Shared returns the process's server, starting it on first use. A test
// that cannot have one is skipped (or fails, under RequireEnv).
func Shared(tb testing.TB) *Server {
	tb.Helper()
	bin := BinDir()
	if bin == "" {
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("PostgreSQL is required (%s=1) but initdb/postgres were not found in %v", RequireEnv, binDirs())
		}
		tb.Skipf("PostgreSQL is not installed (looked in %v); set %s to a bin directory", binDirs(), BinDirEnv)
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		shared, sharedErr = Start(bin)
	}
	if sharedErr != nil {
		tb.Fatalf("start PostgreSQL: %v", sharedErr)
	}
	return shared
}

// Stop stops the process's shared server if one was started; TestMain
// calls it after m.Run (see Main). Without it the server still dies with
// the test process (parent-death signal), leaving its directory behind.
func Stop() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		_ = shared.Close()
		shared = nil
	}
}

// Main is TestMain for packages using the shared server: it runs the tests
// and stops the server before the process exits.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// NewDatabase creates a database with a unique name on the shared server
// and returns its connection string; the database is dropped when the test
// ends.
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	s := Shared(tb)
	name, err := s.CreateDatabase(context.Background())
	if err != nil {
		tb.Fatalf("create database: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.DropDatabase(ctx, name); err != nil {
			tb.Logf("drop database %s: %v", name, err)
		}
	})
	return s.DSN(name)
}

// DSN is the connection string of database db.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", superuser, s.port, db)
}

// Port is the server's TCP port on 127.0.0.1.
func (s *Server) Port() int { return s.port }

// SocketDir is the directory of the server's unix socket.
func (s *Server) SocketDir() string { return filepath.Join(s.dir, "sock") }

// CreateDatabase creates a database with a unique name and returns it.
func (s *Server) CreateDatabase(ctx context.Context) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	name := "t_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", err
	}
	return name, nil
}

// DropDatabase drops database name, ending its connections.
func (s *Server) DropDatabase(ctx context.Context, name string) error {
	select {
	case <-s.done:
		return nil // the server is gone, and its data with it
	default:
	}
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

// runAs is the credential the server runs under: the postgres system user
// when this process is root, else nil (the current user).
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs the postgres system user: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// tempParent is where the server's directory goes: the usual temporary
// directory, unless the server runs as another user who could not reach
// it (a private TMPDIR of root's), then /tmp.
func tempParent(cred *syscall.Credential) string {
	tmp := os.TempDir()
	if cred == nil {
		return tmp
	}
	for d := tmp; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil || st.Mode().Perm()&0o001 == 0 {
			return "/tmp"
		}
		if d == filepath.Dir(d) {
			return tmp
		}
	}
}

// staleAfter is how old a server directory must be before sweepStale may
// remove it (a younger one may be another process's initdb under way).
const staleAfter = 10 * time.Minute

// sweepStale removes the directories of servers whose test process was
// killed before it could stop them (a fuzzing worker, an interrupted run):
// older than before, and no live postmaster in them.
func sweepStale(parent string, before time.Time) {
	dirs, _ := filepath.Glob(filepath.Join(parent, "baagent-pg-*"))
	for _, d := range dirs {
		st, err := os.Stat(d)
		if err != nil || !st.IsDir() || st.ModTime().After(before) {
			continue
		}
		if pid, ok := postmasterPID(filepath.Join(d, "data", "postmaster.pid")); ok && alive(pid) {
			continue
		}
		_ = os.RemoveAll(d)
	}
}

// postmasterPID reads the pid on the first line of a postmaster.pid file.
func postmasterPID(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	return pid, err == nil && pid > 0
}

// alive tells whether a process exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Start runs initdb and starts a server with the binaries in bin. Close
// stops it and removes its directory.
func Start(bin string) (*Server, error) {
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	sweepStale(tempParent(cred), time.Now().Add(-staleAfter))
	dir, err := os.MkdirTemp(tempParent(cred), "baagent-pg-")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(dir)
		}
	}()
	for _, sub := range []string{"data", "sock"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, err
		}
	}
	if cred != nil {
		for _, p := range []string{dir, filepath.Join(dir, "data"), filepath.Join(dir, "sock")} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, err
			}
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", superuser,
		"--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w: %s", err, strings.TrimSpace(string(out)))
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		s, err := launch(bin, dir, cred)
		if err == nil {
			ok = true
			return s, nil
		}
		lastErr = err // most likely the free port was taken meanwhile
	}
	return nil, lastErr
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	return port, l.Close()
}

func launch(bin, dir string, cred *syscall.Credential) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "postgres.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	defer func() { _ = logf.Close() }()
	cmd := exec.Command(filepath.Join(bin, "postgres"),
		"-D", filepath.Join(dir, "data"),
		"-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories="+filepath.Join(dir, "sock"),
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=300",
		"-c", "shared_buffers=128MB",
		"-c", "log_min_messages=warning",
	)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Dir = dir
	// The server dies with the test process even when nothing stops it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Server{dir: dir, port: port, cmd: cmd, done: make(chan struct{})}
	go func() {
		s.err = cmd.Wait()
		close(s.done)
	}()
	if err := s.waitReady(startTimeout); err != nil {
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		<-s.done
		log, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("%w; server log: %s", err, strings.TrimSpace(string(log)))
	}
	return s, nil
}

// waitReady connects until the server answers, it exits, or within passes.
func (s *Server) waitReady(within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	wait := 5 * time.Millisecond
	for {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, s.DSN("postgres"))
		ccancel()
		if err == nil {
			return conn.Close(context.Background())
		}
		t := time.NewTimer(wait)
		select {
		case <-s.done:
			t.Stop()
			return fmt.Errorf("postgres exited before accepting connections: %v", s.err)
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("postgres did not accept connections within %s: %w", within, err)
		case <-t.C:
		}
		if wait < 100*time.Millisecond {
			wait *= 2
		}
	}
}

// Close stops the server (fast shutdown, then immediate if it lingers) and
// removes its directory.
func (s *Server) Close() error {
	select {
	case <-s.done:
	default:
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		t := time.NewTimer(30 * time.Second)
		select {
		case <-s.done:
		case <-t.C:
			_ = s.cmd.Process.Signal(syscall.SIGQUIT)
			<-s.done
		}
		t.Stop()
	}
	if err := os.RemoveAll(s.dir); err != nil {
		return err
	}
	var ee *exec.ExitError
	if s.err != nil && !errors.As(s.err, &ee) {
		return s.err
	}
	return nil
}

package pgtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

func TestDatabasesAreSeparate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := NewDatabase(t), NewDatabase(t)
	if a == b {
		t.Fatalf("two tests share database %s", a)
	}
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ca.Close(ctx) }()
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cb.Close(ctx) }()
	if _, err := ca.Exec(ctx, "CREATE TABLE only_in_a (x int)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := cb.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("table of database a visible in database b")
	}
	var fsync string
	if err := ca.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err != nil {
		t.Fatal(err)
	}
	if fsync != "off" {
		t.Fatalf("fsync = %q, want off", fsync)
	}
	var ver int
	if err := ca.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&ver); err != nil {
		t.Fatal(err)
	}
	if ver < 150000 {
		t.Fatalf("server version %d, want 15 or later", ver)
	}
}

func TestSharedServerIsReused(t *testing.T) {
	s1, s2 := Shared(t), Shared(t)
	if s1 != s2 {
		t.Fatal("Shared started a second server")
	}
	if _, err := os.Stat(s1.SocketDir()); err != nil {
		t.Fatalf("socket directory: %v", err)
	}
}

func TestDropOnCleanup(t *testing.T) {
	s := Shared(t)
	var dsn string
	t.Run("inner", func(t *testing.T) { dsn = NewDatabase(t) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := pgx.Connect(ctx, dsn)
	if err == nil {
		t.Fatalf("database of a finished test still accepts connections")
	}
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		t.Fatalf("the server is gone after a test's cleanup: %v", err)
	}
	if err := conn.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestStartFailsCleanlyOnBadBinDir(t *testing.T) {
	if _, err := Start(t.TempDir()); err == nil {
		t.Fatal("Start with no binaries succeeded")
	}
}

// TestMissingPostgres runs a test needing PostgreSQL in a child process
// whose binaries directory is empty: skipped, or failed when required.
func TestMissingPostgres(t *testing.T) {
	if os.Getenv("PGTEST_CHILD") == "1" {
		Shared(t)
		t.Fatal("Shared returned without PostgreSQL")
	}
	run := func(require string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestMissingPostgres$", "-test.v")
		cmd.Env = append(os.Environ(), "PGTEST_CHILD=1", BinDirEnv+"="+t.TempDir(), RequireEnv+"="+require)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("")
	if err != nil || !strings.Contains(out, "--- SKIP: TestMissingPostgres") {
		t.Fatalf("without PostgreSQL: %v\n%s", err, out)
	}
	out, err = run("1")
	if err == nil || !strings.Contains(out, "PostgreSQL is required") {
		t.Fatalf("without PostgreSQL, required: %v\n%s", err, out)
	}
}

// TestSweepStale removes an old server directory without a live server and
// keeps a young one and one whose server runs.
func TestSweepStale(t *testing.T) {
	parent := t.TempDir()
	mk := func(name, pid string, age time.Duration) string {
		d := filepath.Join(parent, name)
		if err := os.MkdirAll(filepath.Join(d, "data"), 0o700); err != nil {
			t.Fatal(err)
		}
		if pid != "" {
			if err := os.WriteFile(filepath.Join(d, "data", "postmaster.pid"), []byte(pid+"\n/data\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		old := time.Now().Add(-age)
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
		return d
	}
	dead := mk("baagent-pg-dead", "999999999", time.Hour)
	noPid := mk("baagent-pg-nopid", "", time.Hour)
	young := mk("baagent-pg-young", "", time.Second)
	live := mk("baagent-pg-live", strconv.Itoa(os.Getpid()), time.Hour)
	other := mk("unrelated", "", time.Hour)
	sweepStale(parent, time.Now().Add(-staleAfter))
	for d, want := range map[string]bool{dead: false, noPid: false, young: true, live: true, other: true} {
		_, err := os.Stat(d)
		if (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(d), err == nil, want)
		}
	}
}

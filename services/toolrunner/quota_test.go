package toolrunner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/toolrunner/quota"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// diskCharge is the charge of everything under dir/tenant, measured
// independently of the accounting: files in 4 KiB blocks, directories one
// block, the tenant directory itself free.
func diskCharge(t *testing.T, dir, tenant string) int64 {
	t.Helper()
	var n int64
	base := filepath.Join(dir, tenant)
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if p == base {
			return nil
		}
		if d.IsDir() {
			n += 4096
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		n += max(1, (fi.Size()+4095)/4096) * 4096
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func writeReq(tenant, conv, path string, size int) *baagentv1.ToolInvocationRequest {
	r := req("file_write", map[string]any{"path": path, "content": strings.Repeat("x", size)})
	r.Tenant, r.ConversationId = tenant, conv
	return r
}

// TestWorkspaceQuotaRefusesWrites: a tenant writing past its workspace
// quota gets QUOTA_EXCEEDED, not retried and with nothing written; the
// other tenants still write; shrinking a file is always allowed and makes
// room again.
func TestWorkspaceQuotaRefusesWrites(t *testing.T) {
	t.Parallel()

	const limit = 64 << 10
	s, env := newTestServer(t, func(o *Options) { o.WorkspaceQuotaBytes = limit })

	// 4 KiB for the workspace directory, then 20 KiB per file: 3 files fit.
	for i := range 3 {
		r := writeReq("acme", "c1", fmt.Sprintf("f%d.txt", i), 20<<10-6)
		r.Parameters.Fields["content"] = structValue("START\n" + strings.Repeat("x", 20<<10-6))
		if res := mustInvoke(t, s, r); !res.Success {
			t.Fatalf("write %d within the quota refused: %v", i, res)
		}
	}
	res := mustInvoke(t, s, writeReq("acme", "c1", "f3.txt", 20<<10))
	if res.Success || res.ErrorCode != quota.Code || res.ErrorType != baagentv1.ToolErrorType_TOOL_ERROR_TYPE_EXECUTION_ERROR {
		t.Fatalf("write past the quota: %v", res)
	}
	if tool.Retryable(res.ErrorType) || res.RetryCount != 0 {
		t.Fatalf("a quota refusal must not be retried: type %v, retries %d", res.ErrorType, res.RetryCount)
	}
	for _, want := range []string{`tenant "acme"`, "64.0 KiB", "used 64.0 KiB", "20.0 KiB more", "ask the operator", "overwriting"} {
		if !strings.Contains(res.ErrorMessage, want) {
			t.Errorf("message lacks %q: %s", want, res.ErrorMessage)
		}
	}
	if _, err := os.Stat(filepath.Join(env.opts.WorkspaceDir, "acme", "c1", "f3.txt")); !os.IsNotExist(err) {
		t.Fatalf("the refused file exists: %v", err)
	}
	// The quota is the tenant's, not the conversation's.
	if res := mustInvoke(t, s, writeReq("acme", "c2", "a.txt", 1)); res.ErrorCode != quota.Code {
		t.Fatalf("another conversation of the tenant passed the quota: %v", res)
	}
	// file_edit growing a file is refused too.
	edit := req("file_edit", map[string]any{"path": "f0.txt", "old_string": "START", "new_string": strings.Repeat("y", 8<<10)})
	edit.Tenant, edit.ConversationId = "acme", "c1"
	if res := mustInvoke(t, s, edit); res.ErrorCode != quota.Code {
		t.Fatalf("file_edit past the quota: %v", res)
	}
	// Other tenants are unaffected.
	for _, tenant := range []string{"globex", "initech"} {
		if res := mustInvoke(t, s, writeReq(tenant, "c1", "big.txt", 40<<10)); !res.Success {
			t.Fatalf("tenant %s refused because of acme: %v", tenant, res)
		}
	}
	// Shrinking a file frees room for a new one.
	if res := mustInvoke(t, s, writeReq("acme", "c1", "f0.txt", 10)); !res.Success {
		t.Fatalf("shrinking refused: %v", res)
	}
	if res := mustInvoke(t, s, writeReq("acme", "c1", "f3.txt", 12<<10)); !res.Success {
		t.Fatalf("write after shrinking refused: %v", res)
	}
	if got := testutil.ToFloat64(s.metrics.quotaExceeded.WithLabelValues(quota.Workspace)); got != 3 {
		t.Errorf("quota_exceeded_total{kind=workspace} = %v, want 3", got)
	}
	if got, want := s.workspaces.quota.usage(), diskCharge(t, env.opts.WorkspaceDir, "acme")+
		diskCharge(t, env.opts.WorkspaceDir, "globex")+diskCharge(t, env.opts.WorkspaceDir, "initech"); got != want {
		t.Errorf("accounted %d bytes, the disk holds %d", got, want)
	}
}

// TestWorkspaceQuotaCountsSeedCopies: every new workspace is a copy of the
// seed, charged to its tenant once however many calls race to create it;
// a new conversation that does not fit is refused, and releasing a
// conversation makes room again.
func TestWorkspaceQuotaCountsSeedCopies(t *testing.T) {
	t.Parallel()

	seed := t.TempDir()
	if err := os.WriteFile(filepath.Join(seed, "orders.csv"), []byte(strings.Repeat("1,2\n", 5000)), 0o600); err != nil { // 20000 bytes: 20 KiB charged
		t.Fatal(err)
	}
	// A seeded workspace is 24 KiB (its directory and the file): 2 fit.
	s, env := newTestServer(t, func(o *Options) { o.WorkspaceSeedDir = seed; o.WorkspaceQuotaBytes = 50 << 10 })
	read := func(conv string) *baagentv1.ToolExecutionResult {
		r := req("file_read", map[string]any{"path": "orders.csv", "limit": 1.0})
		r.ConversationId = conv
		return mustInvoke(t, s, r)
	}
	// Concurrent first calls of a conversation make one copy and are
	// charged one.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res := read("c1"); !res.Success {
				t.Errorf("concurrent first call: %v", res)
			}
		}()
	}
	wg.Wait()
	if res := read("c2"); !res.Success {
		t.Fatalf("c2: %v", res)
	}
	res := read("c3")
	if res.ErrorCode != quota.Code || !strings.Contains(res.ErrorMessage, "new workspace") {
		t.Fatalf("a third seeded workspace past the quota: %v", res)
	}
	if _, err := os.Stat(filepath.Join(env.opts.WorkspaceDir, "acme", "c3")); !os.IsNotExist(err) {
		t.Fatalf("the refused workspace exists: %v", err)
	}
	if _, err := s.ReleaseConversation(t.Context(), &baagentv1.ReleaseConversationRequest{Tenant: "acme", ConversationId: "c1"}); err != nil {
		t.Fatal(err)
	}
	if res := read("c3"); !res.Success {
		t.Fatalf("after a release: %v", res)
	}
	if got, want := s.workspaces.quota.usage(), diskCharge(t, env.opts.WorkspaceDir, "acme"); got != want {
		t.Errorf("accounted %d bytes, the disk holds %d", got, want)
	}
}

// writeVia writes name through the lease's quota.
func writeVia(l *wsLease, name string, data []byte) error {
	write := func() error {
		if err := l.root.MkdirAll(path.Dir(name), 0o750); err != nil {
			return err
		}
		return l.root.WriteFile(name, data, 0o600)
	}
	if l.write == nil {
		return write()
	}
	return l.write(name, int64(len(data)), write)
}

// TestWorkspaceQuotaSurvivesRestart: a process that starts on existing
// workspaces counts them on the tenant's first use, enforces the quota on
// them, and keeps the count right through the idle cleanup and releases.
func TestWorkspaceQuotaSurvivesRestart(t *testing.T) {
	t.Parallel()

	dir := t.TempDir()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	open := func(limit int64) *workspaces {
		t.Helper()
		w, err := openWorkspaces(workspaceOptions{Dir: dir, Now: clock, Quota: limit})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := open(200 << 10)
	for i, conv := range []string{"old", "c1", "c2"} {
		l, err := w.acquire("acme", conv)
		if err != nil {
			t.Fatal(err)
		}
		if err := writeVia(l, "sub/dir/f.txt", make([]byte, 20<<10+1+i)); err != nil {
			t.Fatal(err)
		}
		l.release()
	}
	before, _ := w.quota.tenantUsed("acme")
	w.close()
	if want := diskCharge(t, dir, "acme"); before != want || want != 3*(4+8+24)<<10 {
		t.Fatalf("accounted %d bytes before the restart, the disk holds %d", before, want)
	}

	w = open(100 << 10) // lowered over the restart
	defer w.close()
	if _, known := w.quota.tenantUsed("acme"); known {
		t.Fatal("usage counted before the tenant's first use")
	}
	l, err := w.acquire("acme", "c1")
	if err != nil {
		t.Fatal(err)
	}
	if used, _ := w.quota.tenantUsed("acme"); used != before {
		t.Fatalf("after the restart %d bytes accounted, want %d", used, before)
	}
	// 108 KiB used of 100: already over; any growth is refused, shrinking
	// is not.
	var qe *quota.Error
	if err := writeVia(l, "new.txt", []byte("x")); !errors.As(err, &qe) {
		t.Fatalf("write over the quota after a restart: %v", err)
	}
	if err := writeVia(l, "sub/dir/f.txt", nil); err != nil {
		t.Fatalf("shrinking refused: %v", err)
	}
	l.release()

	// The idle cleanup and a release give their bytes back.
	old := now.Add(-30 * 24 * time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "acme", "old"), old, old); err != nil {
		t.Fatal(err)
	}
	if removed, _ := w.removeIdle(7 * 24 * time.Hour); removed != 1 {
		t.Fatalf("removed %d idle workspaces, want 1", removed)
	}
	if _, err := w.remove("acme", "c2"); err != nil {
		t.Fatal(err)
	}
	if used, _ := w.quota.tenantUsed("acme"); used != diskCharge(t, dir, "acme") || used != (4+8+4)<<10 {
		t.Fatalf("after the cleanup %d bytes accounted, the disk holds %d", used, diskCharge(t, dir, "acme"))
	}
	// The last workspace gone, the tenant's entry goes too.
	if _, err := w.remove("acme", "c1"); err != nil {
		t.Fatal(err)
	}
	if _, known := w.quota.tenantUsed("acme"); known {
		t.Fatal("the account of a tenant with nothing on disk is kept")
	}
}

// TestWorkspaceQuotaConcurrentWriters: writers racing in several
// conversations of one tenant, new files and rewrites of the same files,
// never take it past its quota, and the count matches the disk after.
func TestWorkspaceQuotaConcurrentWriters(t *testing.T) {
	t.Parallel()

	dir := t.TempDir()
	const limit = 256 << 10
	const size = 10 << 10 // 12 KiB charged
	w, err := openWorkspaces(workspaceOptions{Dir: dir, Quota: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	for c := range 4 { // the workspaces first: the race is between writes
		l, err := w.acquire("acme", fmt.Sprintf("c%d", c))
		if err != nil {
			t.Fatal(err)
		}
		l.release()
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	refused := 0
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 12 {
				l, err := w.acquire("acme", fmt.Sprintf("c%d", g%4))
				if err != nil {
					t.Error(err)
					return
				}
				// Half the writes go to names the other writers use too.
				name := fmt.Sprintf("g%d/f%d.txt", g, i)
				if i%2 == 1 {
					name = fmt.Sprintf("shared%d.txt", i%3)
				}
				err = writeVia(l, name, make([]byte, size+g))
				l.release()
				var qe *quota.Error
				switch {
				case errors.As(err, &qe):
					mu.Lock()
					refused++
					mu.Unlock()
				case err != nil:
					t.Error(err)
				}
			}
		}()
	}
	// The disk never holds more than the quota; a walk is no snapshot, so
	// it is allowed one write per workspace (4 of them) on top.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for polling := true; polling; {
		select {
		case <-done:
			polling = false
		default:
			if got := diskCharge(t, dir, "acme"); got > limit+4*blocks(size+16) {
				t.Errorf("the disk holds %d bytes, the quota is %d", got, limit)
				<-done
				polling = false
			}
		}
	}
	if refused == 0 {
		t.Fatal("no write was refused: the test did not reach the quota")
	}
	used, _ := w.quota.tenantUsed("acme")
	if disk := diskCharge(t, dir, "acme"); used != disk || disk > limit {
		t.Fatalf("accounted %d bytes, the disk holds %d, the quota is %d", used, disk, limit)
	}
}

// TestArtifactQuotaResultNotStored: a result too large for the tenant's
// artifact quota is returned truncated, saying that the complete result
// could not be stored, instead of silently losing the rest.
func TestArtifactQuotaResultNotStored(t *testing.T) {
	t.Parallel()

	s, env := newTestServer(t, func(o *Options) { o.ArtifactQuotaBytes = 40 << 10; o.LargeDataBytes = 10 << 10 })
	var b strings.Builder
	for i := 0; b.Len() < 60<<10; i++ {
		fmt.Fprintf(&b, "row %d\n", i)
	}
	env.source.set(&funcTool{spec: echoSpec("huge"), fn: ok(b.String())}, &funcTool{spec: echoSpec("mid"), fn: ok(b.String()[:20<<10])})

	res := mustInvoke(t, s, req("huge", nil))
	if !res.Success || res.ArtifactId != "" || !res.Truncated || len(res.Observation) > 50<<10 {
		t.Fatalf("success %v, artifact %q, truncated %v, %d bytes", res.Success, res.ArtifactId, res.Truncated, len(res.Observation))
	}
	for _, want := range []string{"could not be stored as an artifact", "artifact quota of tenant \"acme\" is 40.0 KiB", "more than the whole quota"} {
		if !strings.Contains(res.Observation, want) {
			t.Errorf("observation lacks %q: ...%s", want, res.Observation[max(0, len(res.Observation)-600):])
		}
	}
	// At FULL level the observation is the data itself, cut at 50 KiB.
	full := req("huge", nil)
	full.OutputLevel = baagentv1.OutputLevel_OUTPUT_LEVEL_FULL
	res = mustInvoke(t, s, full)
	if !res.Success || res.ArtifactId != "" || !res.Truncated || len(res.Observation) > 50<<10 ||
		!strings.Contains(res.Observation, "(Output truncated at 51200 bytes.)") || !strings.Contains(res.Observation, "could not be stored as an artifact") {
		t.Fatalf("FULL: artifact %q, truncated %v, %d bytes: ...%s", res.ArtifactId, res.Truncated, len(res.Observation), res.Observation[max(0, len(res.Observation)-600):])
	}
	if got := testutil.ToFloat64(s.metrics.quotaExceeded.WithLabelValues(quota.Artifact)); got != 2 {
		t.Errorf("quota_exceeded_total{kind=artifact} = %v, want 2", got)
	}
	// A result that fits is stored as before.
	if res := mustInvoke(t, s, req("mid", nil)); res.ArtifactId == "" {
		t.Fatalf("a result within the quota was not stored: %v", res)
	}
}

// BenchmarkFileWrite is file_write through the pipeline, with and without
// a workspace quota.
func BenchmarkFileWrite(b *testing.B) {
	for _, bc := range []struct {
		name  string
		quota int64
	}{{"quota", 0}, {"no-quota", -1}} {
		b.Run(bc.name, func(b *testing.B) {
			s, _ := newTestServer(b, func(o *Options) { o.WorkspaceQuotaBytes = bc.quota })
			r := writeReq("acme", "c1", "out/f.txt", 1024)
			b.ReportAllocs()
			for b.Loop() {
				if res := mustInvoke(b, s, r); !res.Success {
					b.Fatal(res)
				}
			}
		})
	}
}

// TestWorkspaceQuotaConcurrentCreation: calls racing to create one
// workspace are charged, and checked against the quota, for the one copy
// of the seed they make, not one each.
func TestWorkspaceQuotaConcurrentCreation(t *testing.T) {
	t.Parallel()

	seed := t.TempDir()
	for i := range 20 {
		if err := os.WriteFile(filepath.Join(seed, fmt.Sprintf("f%d.csv", i)), make([]byte, 8<<10), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	const copyCharge = (1 + 20*2) * 4096 // the directory and 20 files of 8 KiB
	w, err := openWorkspaces(workspaceOptions{Dir: dir, Seed: seed, Quota: copyCharge + copyCharge/2})
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			l, err := w.acquire("acme", "c1")
			if err != nil {
				t.Errorf("concurrent first call refused: %v", err)
				return
			}
			l.release()
		}()
	}
	close(start)
	wg.Wait()
	if used, _ := w.quota.tenantUsed("acme"); used != copyCharge || diskCharge(t, dir, "acme") != copyCharge {
		t.Fatalf("accounted %d bytes, the disk holds %d, one copy is %d", used, diskCharge(t, dir, "acme"), copyCharge)
	}
}

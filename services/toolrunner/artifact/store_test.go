package artifact

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newStore(t *testing.T, dir string, clk *fakeClock, maxBytes int64) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir, Now: clk.Now, MaxBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var (
	alice = Owner{Tenant: "acme", ConversationID: "c1"}
	bob   = Owner{Tenant: "acme", ConversationID: "c2"}
)

func TestPutReadOwnership(t *testing.T) {
	t.Parallel()

	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	s := newStore(t, t.TempDir(), clk, 0)
	data := []byte("line one\nline two\nerror: three\n")
	m, err := s.Put(alice, "", "call_1", "3 lines", data)
	if err != nil {
		t.Fatal(err)
	}
	if !ValidID(m.ID) || m.Size != int64(len(data)) || len(m.Hash) != 16 {
		t.Fatalf("meta = %+v", m)
	}
	again, _ := s.Put(alice, "", "call_2", "", data)
	if again.ID != m.ID {
		t.Errorf("same data, same owner: %s != %s", again.ID, m.ID)
	}
	if n, _ := s.Stats(); n != 1 {
		t.Errorf("dedup failed: %d artifacts", n)
	}
	p, err := s.Read(ReadRequest{Owner: alice, ID: m.ID})
	if err != nil {
		t.Fatal(err)
	}
	if p.TotalLines != 3 || p.NextOffset != -1 || len(p.Lines) != 3 || p.Lines[2].Text != "error: three" || p.Lines[2].Number != 3 {
		t.Fatalf("page = %+v", p)
	}
	if _, err := s.Read(ReadRequest{Owner: bob, ID: m.ID}); !errors.Is(err, ErrNotFound) {
		t.Errorf("another conversation read the artifact: %v", err)
	}
	if _, err := s.Read(ReadRequest{Owner: Owner{Tenant: "other", ConversationID: "c1"}, ID: m.ID}); !errors.Is(err, ErrNotFound) {
		t.Errorf("another tenant read the artifact: %v", err)
	}
	if other, _ := s.Put(bob, "", "call_3", "", data); other.ID == m.ID {
		t.Error("two conversations share one artifact id")
	}
}

func TestReadPagingAndPattern(t *testing.T) {
	t.Parallel()

	s := newStore(t, t.TempDir(), &fakeClock{now: time.Now()}, 0)
	var b strings.Builder
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&b, "row %d\n", i)
	}
	m, _ := s.Put(alice, "", "", "", []byte(b.String()))
	p, _ := s.Read(ReadRequest{Owner: alice, ID: m.ID, Offset: 2, Limit: 3})
	if len(p.Lines) != 3 || p.Lines[0].Text != "row 3" || p.NextOffset != 5 || p.TotalLines != 10 {
		t.Fatalf("page = %+v", p)
	}
	p, _ = s.Read(ReadRequest{Owner: alice, ID: m.ID, Offset: 7, Limit: 3})
	if len(p.Lines) != 3 || p.NextOffset != -1 {
		t.Fatalf("last page = %+v", p)
	}
	p, _ = s.Read(ReadRequest{Owner: alice, ID: m.ID, Pattern: regexp.MustCompile(`row 1\d?$`), Limit: 1})
	if len(p.Lines) != 1 || p.Lines[0].Number != 1 || p.NextOffset != 1 {
		t.Fatalf("pattern page = %+v", p)
	}
	p, _ = s.Read(ReadRequest{Owner: alice, ID: m.ID, Pattern: regexp.MustCompile(`row 1\d?$`), Offset: 1})
	if len(p.Lines) != 1 || p.Lines[0].Text != "row 10" || p.NextOffset != -1 {
		t.Fatalf("pattern second page = %+v", p)
	}
}

func TestReadHugeLineConstantMemory(t *testing.T) {
	t.Parallel()

	s := newStore(t, t.TempDir(), &fakeClock{now: time.Now()}, 0)
	data := strings.Repeat("x", 1<<20) + "\nshort\n"
	m, _ := s.Put(alice, "", "", "", []byte(data))
	p, err := s.Read(ReadRequest{Owner: alice, ID: m.ID})
	if err != nil {
		t.Fatal(err)
	}
	if p.TotalLines != 2 || len(p.Lines[0].Text) != 2003 || p.Lines[1].Text != "short" {
		t.Fatalf("lines %d, first %d bytes", p.TotalLines, len(p.Lines[0].Text))
	}
}

func TestIDsRefused(t *testing.T) {
	t.Parallel()

	s := newStore(t, t.TempDir(), &fakeClock{now: time.Now()}, 0)
	for _, id := range []string{"", "artifact_", "artifact_../../etc/passwd", "artifact_ab/cd", `artifact_ab\cd`, "../artifact_ab", "artifact_ABCD", "artifact_ab.meta", "/etc/passwd"} {
		if _, err := s.Read(ReadRequest{Owner: alice, ID: id}); !errors.Is(err, ErrNotFound) {
			t.Errorf("id %q: %v", id, err)
		}
	}
}

func TestCleanupByAgeAndSize(t *testing.T) {
	t.Parallel()

	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	s := newStore(t, t.TempDir(), clk, 1000)
	old, _ := s.Put(alice, "", "", "", []byte(strings.Repeat("a", 100)))
	clk.Add(23 * time.Hour)
	young, _ := s.Put(alice, "", "", "", []byte(strings.Repeat("b", 100)))
	clk.Add(2 * time.Hour)
	if n, freed := s.Cleanup(); n != 1 || freed != 100 {
		t.Fatalf("age cleanup removed %d (%d bytes), want the one older than 24h", n, freed)
	}
	if _, err := s.Stat(alice, old.ID); !errors.Is(err, ErrNotFound) {
		t.Error("expired artifact still readable")
	}
	if _, err := s.Stat(alice, young.ID); err != nil {
		t.Errorf("young artifact removed: %v", err)
	}

	// LRU: fill to 1000 bytes; reading the first keeps it; the next Put goes
	// over the limit and frees down to 800 bytes from the least recently used.
	s2 := newStore(t, t.TempDir(), clk, 1000)
	ids := make([]string, 5)
	for i := range ids {
		clk.Add(time.Second)
		m, _ := s2.Put(alice, "", "", "", []byte(strings.Repeat(string(rune('a'+i)), 200)))
		ids[i] = m.ID
	}
	clk.Add(time.Second)
	if _, err := s2.Stat(alice, ids[0]); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Second)
	if _, err := s2.Put(alice, "", "", "", []byte(strings.Repeat("z", 200))); err != nil {
		t.Fatal(err)
	}
	n, total := s2.Stats()
	if total > 800 || n != 4 {
		t.Fatalf("after size cleanup: %d artifacts, %d bytes; want 4 and ≤ 800", n, total)
	}
	for _, gone := range ids[1:3] {
		if _, err := s2.Stat(alice, gone); !errors.Is(err, ErrNotFound) {
			t.Errorf("least recently used %s survived", gone)
		}
	}
	if _, err := s2.Stat(alice, ids[0]); err != nil {
		t.Error("recently read artifact was evicted")
	}
	if _, err := s2.Put(alice, "", "", "", make([]byte, 1001)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized put: %v", err)
	}
}

func TestDeleteConversation(t *testing.T) {
	t.Parallel()

	s := newStore(t, t.TempDir(), &fakeClock{now: time.Now()}, 0)
	a1, _ := s.Put(alice, "", "", "", []byte("1"))
	a2, _ := s.Put(alice, "reports/q3", "", "", []byte("22"))
	b1, _ := s.Put(bob, "", "", "", []byte("1"))
	n, freed := s.DeleteConversation(alice)
	if n != 2 || freed != 3 {
		t.Fatalf("deleted %d (%d bytes)", n, freed)
	}
	for _, id := range []string{a1.ID, a2.ID} {
		if _, err := s.Stat(alice, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s survived", id)
		}
	}
	if _, err := s.Stat(bob, b1.ID); err != nil {
		t.Errorf("other conversation's artifact deleted: %v", err)
	}
}

func TestMetadataSurvivesRestart(t *testing.T) {
	t.Parallel()

	dir := t.TempDir()
	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	s, err := Open(Options{Dir: dir, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := s.Put(alice, "ns", "call_9", "summary", []byte("persisted\n"))
	s.Close()
	// A crash between data and sidecar leaves an orphan, and a temp file.
	orphan := filepath.Join(dir, "acme", "ns", "artifact_00ff")
	if err := os.WriteFile(orphan, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "acme", "ns", "artifact_01.tmp"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}

	s2 := newStore(t, dir, clk, 0)
	got, err := s2.Stat(alice, m.ID)
	if err != nil {
		t.Fatalf("artifact lost on restart: %v", err)
	}
	if got.ToolCallID != "call_9" || got.Summary != "summary" || !got.Created.Equal(m.Created) || got.Size != m.Size {
		t.Errorf("metadata after restart = %+v", got)
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Error("orphan data file kept")
	}
	p, err := s2.Read(ReadRequest{Owner: alice, ID: m.ID})
	if err != nil || p.Lines[0].Text != "persisted" {
		t.Fatalf("read after restart: %+v %v", p, err)
	}
}

// FuzzReadRequest checks artifact ids and paging parameters: any id reads
// only a real artifact of the owner, any offset/limit pages sanely.
func FuzzReadRequest(f *testing.F) {
	dir := f.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	var b strings.Builder
	for i := range 50 {
		fmt.Fprintf(&b, "line %d é\n", i)
	}
	m, _ := s.Put(alice, "", "", "", []byte(b.String()))
	f.Add(m.ID, int64(0), 0, "")
	f.Add("artifact_../x", int64(-1), -1, "(")
	f.Add(m.ID, int64(45), 100, "line [0-9]+")
	f.Add(m.ID[:len(m.ID)-1], int64(1<<62), 1<<30, "é")
	f.Fuzz(func(t *testing.T, id string, offset int64, limit int, pattern string) {
		var re *regexp.Regexp
		if pattern != "" {
			var err error
			if re, err = regexp.Compile(pattern); err != nil {
				return
			}
		}
		p, err := s.Read(ReadRequest{Owner: alice, ID: id, Offset: offset, Limit: limit, Pattern: re})
		if id != m.ID {
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("id %q: %v", id, err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if p.TotalLines != 50 || len(p.Lines) > 2000 {
			t.Fatalf("page %+v", p)
		}
		if p.NextOffset != -1 && (p.NextOffset <= max(offset, 0) || p.NextOffset >= 50) {
			t.Fatalf("next offset %d from %d", p.NextOffset, offset)
		}
	})
}

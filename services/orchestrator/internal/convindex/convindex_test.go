package convindex

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/baagent/baagent/internal/testkit/natstest"
)

func openStore(tb testing.TB) *Store {
	tb.Helper()
	js, _ := natstest.Connect(tb, natstest.StartNATS(tb).ClientURL(), "convindex-test")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, js)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func TestTitle(t *testing.T) {
	long := strings.Repeat("é", TitleRunes+5)
	for _, c := range []struct{ in, want string }{
		{"  Which region\n\tgrew   fastest? ", "Which region grew fastest?"},
		{"", ""},
		{"a\x00b", "ab"},
		{long, strings.Repeat("é", TitleRunes) + "…"},
		{strings.Repeat("a ", TitleRunes), strings.TrimSpace(strings.Repeat("a ", TitleRunes/2)) + "…"},
	} {
		if got := Title(c.in); got != c.want {
			t.Errorf("Title(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func FuzzTitle(f *testing.F) {
	for _, s := range []string{"", "hello world", strings.Repeat("x", 300), "a\xffb", "\n\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got := Title(in)
		if !utf8.ValidString(got) {
			t.Fatalf("Title(%q) = %q: invalid UTF-8", in, got)
		}
		if n := utf8.RuneCountInString(got); n > TitleRunes+1 {
			t.Fatalf("Title(%q) has %d characters", in, n)
		}
		if strings.ContainsAny(got, "\n\t\r") {
			t.Fatalf("Title(%q) = %q keeps line breaks", in, got)
		}
	})
}

func TestPageTokenRoundTrip(t *testing.T) {
	e := &Entry{ConversationID: "conv_1", LastActivityAt: time.Unix(1700000000, 123)}
	c, err := DecodePageToken(EncodePageToken(e))
	if err != nil || c.ID != e.ConversationID || !c.Activity.Equal(e.LastActivityAt) {
		t.Fatalf("round trip: %+v, %v", c, err)
	}
	for _, bad := range []string{"x", "!!", EncodePageToken(e)[1:], "Y29udjE6LTE6YQ", "Y29udjE6MTIz"} {
		if _, err := DecodePageToken(bad); !errors.Is(err, ErrBadPageToken) {
			t.Errorf("DecodePageToken(%q) = %v, want ErrBadPageToken", bad, err)
		}
	}
}

func FuzzDecodePageToken(f *testing.F) {
	f.Add(EncodePageToken(&Entry{ConversationID: "c", LastActivityAt: time.Unix(5, 0)}))
	f.Add("")
	f.Add("Y29udjE6MTIzOmE")
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := DecodePageToken(tok)
		if err != nil {
			return
		}
		// A token that decodes encodes back to itself.
		if again := EncodePageToken(&Entry{ConversationID: c.ID, LastActivityAt: c.Activity}); again != tok {
			t.Fatalf("token %q decodes to %+v, which encodes to %q", tok, c, again)
		}
	})
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"conversation_id":"c","state":"active","starting":[{"run_id":"r"}]}`))
	f.Add([]byte(`{"state":"gone"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Decode(b)
		if err != nil {
			return
		}
		if e.State != StateActive && e.State != StateEnded && e.State != StateDeleting || len(e.Starting) > maxStarting {
			t.Fatalf("Decode accepted %+v", e)
		}
	})
}

// Concurrent updates of one entry all land (compare-and-set), and the
// listing pages newest activity first without a gap or a repeat.
func TestUpdateAndList(t *testing.T) {
	s := openStore(t)
	ctx := t.Context()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			_, err := s.Update(ctx, "acme", "conv-a", func(cur *Entry) (*Entry, error) {
				if cur == nil {
					cur = &Entry{ConversationID: "conv-a", State: StateActive}
				}
				cur.RunCount++
				cur.LastRunID = fmt.Sprint("run-", i)
				return cur, nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	e, _, err := s.Get(ctx, "acme", "conv-a")
	if err != nil || e.RunCount != 20 {
		t.Fatalf("after 20 concurrent updates: %+v, %v", e, err)
	}
	if err := s.Remove(ctx, "acme", "conv-a"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, "acme", "conv-a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after Remove: %v", err)
	}

	base := time.Unix(1700000000, 0)
	for i := range 25 {
		id := fmt.Sprintf("c%02d", i)
		// Pairs share an activity time: the id breaks the tie.
		at := base.Add(time.Duration(i/2) * time.Second)
		if _, err := s.Update(ctx, "acme", id, func(*Entry) (*Entry, error) {
			return &Entry{ConversationID: id, State: StateActive, LastActivityAt: at}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Update(ctx, "other", "c99", func(*Entry) (*Entry, error) {
		return &Entry{ConversationID: "c99", State: StateActive, LastActivityAt: base.Add(time.Hour)}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkBackfilled(ctx, "acme", time.Now()); err != nil {
		t.Fatal(err)
	}
	var got []string
	var after *Cursor
	for pages := 0; ; pages++ {
		page, more, err := s.List(ctx, "acme", after, 7)
		if err != nil || pages > 5 {
			t.Fatalf("List: %v (page %d)", err, pages)
		}
		for _, e := range page {
			got = append(got, e.ConversationID)
		}
		if !more {
			break
		}
		c, err := DecodePageToken(EncodePageToken(page[len(page)-1]))
		if err != nil {
			t.Fatal(err)
		}
		after = &c
	}
	var want []string
	for i := 24; i >= 0; i-- {
		want = append(want, fmt.Sprintf("c%02d", i))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("listing order\n got %v\nwant %v", got, want)
	}
	if ok, err := s.Backfilled(ctx, "acme"); !ok || err != nil {
		t.Fatalf("Backfilled = %v, %v", ok, err)
	}
	if ok, err := s.Backfilled(ctx, "other"); ok || err != nil {
		t.Fatalf("Backfilled(other) = %v, %v", ok, err)
	}
}

func TestPruneStarting(t *testing.T) {
	now := time.Now()
	e := &Entry{}
	for i := range maxStarting + 10 {
		e.Starting = append(e.Starting, Start{RunID: fmt.Sprint(i), At: now})
	}
	e.Starting = append([]Start{{RunID: "old", At: now.Add(-2 * StartGrace)}}, e.Starting...)
	e.PruneStarting(now)
	if len(e.Starting) != maxStarting || e.Starting[0].RunID != "10" {
		t.Fatalf("pruned to %d, first %q", len(e.Starting), e.Starting[0].RunID)
	}
}

// BenchmarkList lists the first page of 50 of a tenant's 1,000
// conversations.
func BenchmarkList(b *testing.B) {
	s := openStore(b)
	ctx := context.Background()
	base := time.Now()
	for i := range 1000 {
		id := fmt.Sprintf("conv_%04d", i)
		if _, err := s.Update(ctx, "acme", id, func(*Entry) (*Entry, error) {
			return &Entry{ConversationID: id, Title: strings.Repeat("q", 80), State: StateActive, RunCount: 3, CreatedAt: base, LastActivityAt: base.Add(time.Duration(i) * time.Millisecond), LastRunID: "run_" + id}, nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		page, more, err := s.List(ctx, "acme", nil, 50)
		if err != nil || len(page) != 50 || !more || page[0].ConversationID != "conv_0999" {
			b.Fatalf("page of %d, more %v, err %v", len(page), more, err)
		}
	}
}

package memory

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/baagent/baagent/services/memory/extract"
	"github.com/baagent/baagent/services/memory/store"
)

func scored(ids ...string) []store.Scored {
	out := make([]store.Scored, len(ids))
	for i, id := range ids {
		out[i] = store.Scored{ID: id, Score: float64(len(ids) - i)}
	}
	return out
}

// TestFuseHandComputed checks the fused scores against the formula worked
// by hand with the default weights and k = 60:
//
//	a: vector rank 1, keyword rank 2      0.4/61 + 0.3/62           = 0.0113961...
//	b: vector rank 2, graph rank 1        0.4/62 + 0.3/61           = 0.0113697...
//	c: keyword rank 1                     0.3/61                    = 0.0049180...
//	d: vector 3, keyword 3, graph 2       0.4/63 + 0.3/63 + 0.3/62  = 0.0159498...
func TestFuseHandComputed(t *testing.T) {
	t.Parallel()
	got := fuse([]rankList{
		{Channel: channelVector, Weight: 0.4, Hits: scored("a", "b", "d")},
		{Channel: channelKeyword, Weight: 0.3, Hits: scored("c", "a", "d")},
		{Channel: channelGraph, Weight: 0.3, Hits: scored("b", "d")},
	}, 60)
	want := []struct {
		id    string
		score float64
		chans int
	}{
		{"d", 0.4/63 + 0.3/63 + 0.3/62, 3},
		{"a", 0.4/61 + 0.3/62, 2},
		{"b", 0.4/62 + 0.3/61, 2},
		{"c", 0.3 / 61, 1},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d hits, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.ID != w.id || math.Abs(g.Score-w.score) > 1e-12 || len(g.Channels) != w.chans {
			t.Errorf("hit %d: got %s %.10f (%d channels), want %s %.10f (%d)", i, g.ID, g.Score, len(g.Channels), w.id, w.score, w.chans)
		}
	}
	// Hand-computed values, not the formula again.
	if math.Abs(got[0].Score-0.0159498) > 1e-6 || math.Abs(got[3].Score-0.0049180) > 1e-6 {
		t.Errorf("scores %.7f and %.7f, want 0.0159498 and 0.0049180", got[0].Score, got[3].Score)
	}
	// d's channel ranks, in list order.
	wantRanks := []channelRank{{channelVector, 3, 1}, {channelKeyword, 3, 1}, {channelGraph, 2, 1}}
	for i, r := range wantRanks {
		if got[0].Channels[i] != r {
			t.Errorf("d channel %d: got %+v, want %+v", i, got[0].Channels[i], r)
		}
	}
}

// TestFuseRanksCountOwnHits checks that a list's ranks count only its own
// hits (a repeated id keeps its first rank and does not push the others
// down), that a zero weight adds nothing and reports nothing, and that k
// changes the spread.
func TestFuseRanksCountOwnHits(t *testing.T) {
	t.Parallel()
	got := fuse([]rankList{
		{Channel: channelKeyword, Weight: 1, Hits: scored("x", "x", "y")},
		{Channel: channelVector, Weight: 0, Hits: scored("z", "y")},
	}, 1)
	if len(got) != 2 {
		t.Fatalf("got %+v, want x and y only", got)
	}
	if got[0].ID != "x" || got[0].Score != 0.5 { // 1/(1+1)
		t.Errorf("x: got %+v, want score 0.5", got[0])
	}
	if got[1].ID != "y" || math.Abs(got[1].Score-1.0/3) > 1e-12 || len(got[1].Channels) != 1 || got[1].Channels[0].Rank != 2 {
		t.Errorf("y: got %+v, want keyword rank 2, score 1/3", got[1])
	}
}

// TestFuseTiesByID checks equal scores come out in id order.
func TestFuseTiesByID(t *testing.T) {
	t.Parallel()
	got := fuse([]rankList{
		{Channel: channelVector, Weight: 0.5, Hits: scored("m")},
		{Channel: channelKeyword, Weight: 0.5, Hits: scored("b")},
	}, 60)
	if len(got) != 2 || got[0].ID != "b" || got[1].ID != "m" || got[0].Score != got[1].Score {
		t.Errorf("got %+v, want b then m with equal scores", got)
	}
	if fuse(nil, 60) != nil {
		t.Error("fusing nothing gave hits")
	}
}

func TestIDs(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_700_000_000_000)
	a, b := newID(episodePrefix, now), newID(episodePrefix, now.Add(time.Millisecond))
	if !validID(episodePrefix, a) || !validID(episodePrefix, b) {
		t.Fatalf("newID gave invalid ids %q %q", a, b)
	}
	if len(a) != 3+26 || a >= b {
		t.Errorf("ids %q %q: want 29 characters, sorting by time", a, b)
	}
	if !validID(episodePrefix, "ep_"+strings.ToUpper(a[3:])) || validID(episodePrefix, "EP_"+a[3:]) {
		t.Error("the body's case matters, or the prefix's does not")
	}
	if a == newID(episodePrefix, now) {
		t.Error("two ids of one millisecond are equal")
	}
	for _, bad := range []string{"", "ep_", a[:len(a)-1], a + "0", "en_" + a[3:], "ep_" + a[3:28] + "i",
		"ep_8" + a[4:], "ep_" + a[3:28] + "U", "ep_" + a[3:28] + "!"} {
		if validID(episodePrefix, bad) {
			t.Errorf("validID(%q) = true", bad)
		}
	}
}

func TestNamesCompatible(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"Acme Labs", "Acme Labs Inc", true},
		{"Globex Corp", "Globex Corporation", true},
		{"IBM", "International Business Machines", true},
		{"Northwind Traders Ltd.", "northwind traders", true},
		{"Pine Energy", "Pine Studios", false},
		{"Acme Labs", "Blue Retail", false},
		{"Edge Router R1", "Edge Router R2 Pro", false},
		{"", "Acme", false},
		{"IBX", "International Business Machines", false},
	} {
		if got := namesCompatible(tc.a, tc.b); got != tc.want {
			t.Errorf("namesCompatible(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := namesCompatible(tc.b, tc.a); got != tc.want {
			t.Errorf("namesCompatible(%q, %q) = %v, want %v", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestCutWeak(t *testing.T) {
	t.Parallel()
	hits := []store.Scored{{ID: "a", Score: 2}, {ID: "b", Score: 1.5}, {ID: "c", Score: 1.49}, {ID: "d", Score: 1}}
	if got := cutWeak(hits, 0.75); len(got) != 2 {
		t.Errorf("cut at 0.75 of 2 kept %v, want a and b", got)
	}
	if got := cutWeak(hits, -1); len(got) != 4 {
		t.Errorf("a negative cutoff cut %v", got)
	}
	if got := cutWeak([]store.Scored{{ID: "a", Score: 0}, {ID: "b", Score: -1}}, 0.5); len(got) != 2 {
		t.Errorf("hits without a positive best were cut: %v", got)
	}
	if got := cutWeak(nil, 0.5); got != nil {
		t.Errorf("cutting nothing gave %v", got)
	}
}

func TestRetryable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&extract.Error{Kind: extract.Retryable, Msg: "rate limited"}, true},
		{fmt.Errorf("extraction: %w", &extract.Error{Kind: extract.Permanent, Msg: "bad answer"}), false},
		{retryableErr(true), true},
		{errPermanent, false},
		{&permanentError{"3 vectors for 2 texts"}, false},
		{context.DeadlineExceeded, true},
		{errors.New("connection reset"), true},
	} {
		if got := retryable(tc.err); got != tc.want {
			t.Errorf("retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

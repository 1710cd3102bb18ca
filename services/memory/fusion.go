package memory

import (
	"cmp"
	"slices"

	"github.com/baagent/baagent/services/memory/store"
)

// Search channel names, as ChannelRank.channel reports them.
const (
	channelVector  = "vector"
	channelKeyword = "keyword"
	channelGraph   = "graph"
)

// rankList is one channel's hits, best first, with the channel's weight
// in the fusion.
type rankList struct {
	Channel string
	Weight  float64
	Hits    []store.Scored
}

// channelRank is where one channel ranked a fused hit (1-based).
type channelRank struct {
	Channel string
	Rank    int
	Score   float64
}

// fusedHit is an entity with its fused score and the channels that found
// it, in the order of the lists given to fuse.
type fusedHit struct {
	ID       string
	Score    float64
	Channels []channelRank
}

// fuse combines rank lists by weighted reciprocal rank fusion:
//
//	score(e) = Σ_c weight_c / (k + rank_c(e))
//
// over the channels c whose list holds e, rank_c being e's 1-based
// position in c's list. A list's ranks count only that list's own hits (an
// id repeated in one list keeps its first rank), a list with weight 0 adds
// nothing and is not reported, and the result is best first, ties broken
// by id so that equal inputs give equal outputs.
func fuse(lists []rankList, k int) []fusedHit {
	byID := make(map[string]int)
	var out []fusedHit
	for _, l := range lists {
		if !(l.Weight > 0) {
			continue
		}
		seen := make(map[string]bool, len(l.Hits))
		rank := 0
		for _, h := range l.Hits {
			if seen[h.ID] {
				continue
			}
			seen[h.ID] = true
			rank++
			i, ok := byID[h.ID]
			if !ok {
				i = len(out)
				byID[h.ID] = i
				out = append(out, fusedHit{ID: h.ID})
			}
			out[i].Score += l.Weight / float64(k+rank)
			out[i].Channels = append(out[i].Channels, channelRank{Channel: l.Channel, Rank: rank, Score: h.Score})
		}
	}
	slices.SortFunc(out, func(a, b fusedHit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out
}

package bpe

import "sync/atomic"

// compatible reports whether E(a+b) = [a, b]: whether a and b can be
// adjacent in a byte-pair encoding. Cached by the pair; a miss walks the
// two tokens' merge trees (pairCrosses) or, where that does not apply,
// merges a+b.
func (v *Vocabulary) compatible(s *Scratch, a, b uint32) bool {
	if s.compat == nil {
		s.compat = make([]uint64, 1<<compatBits)
	}
	k := uint64(a)<<32 | uint64(b)
	slot := &s.compat[((k+1)*0x9E3779B97F4A7C15)>>(64-compatBits)]
	if *slot&^compatFlags == k && *slot&compatValid != 0 {
		return *slot&compatYes != 0
	}
	crosses, ok := v.pairCrosses(s, a, b)
	if !ok {
		crosses = !v.mergesToPair(s, a, b)
	}
	*slot = k | compatValid
	if !crosses {
		*slot |= compatYes
	}
	return !crosses
}

// compatBits sizes the cache of compatible pairs (128 KiB); the flags sit
// above the two ranks (each below 2^30).
const (
	compatBits  = 14
	compatValid = 1 << 63
	compatYes   = 1 << 62
	compatFlags = compatValid | compatYes
)

// mergesToPair reports whether E(a+b) = [a, b] by merging a+b.
func (v *Vocabulary) mergesToPair(s *Scratch, a, b uint32) bool {
	s.pairBuf = append(append(s.pairBuf[:0], v.Token(a)...), v.Token(b)...)
	s.compatOut = v.mergeDirect(string(s.pairBuf), s, s.compatOut[:0])
	return len(s.compatOut) == 2 && s.compatOut[0] == a && s.compatOut[1] == b
}

// pairCrosses reports whether merging a+b merges across the boundary
// between a and b, without merging. ok is false when the walk does not
// apply (a merge tree whose ranks do not grow towards the root).
//
// While no merge crosses the boundary, a's merges run as in E(a) and b's as
// in E(b), and, ranks growing towards each tree's root, in rank order (the
// leftmost first among equal ranks). The part ending a runs through a's
// right spine (its last byte, ..., right(right(a)), right(a), a), each
// replaced when the merge making the next one, of that one's rank, runs; the
// part starting b through b's left spine likewise. Two current parts x and y
// merge across when x+y is a token of rank c that comes before both
// replacements: c < rank of x's successor (that merge is to the left, so it
// wins a tie) and c <= rank of y's successor (to the right, it loses a tie).
// The walk visits the pairs of current parts in the order the replacements
// run.
func (v *Vocabulary) pairCrosses(s *Scratch, a, b uint32) (crosses, ok bool) {
	var xs, ys [maxSpine]uint32
	nx, ok1 := v.spine(a, &xs, true)
	ny, ok2 := v.spine(b, &ys, false)
	if !ok1 || !ok2 {
		return false, false
	}
	// xs[0] = a, xs[nx-1] = a's last byte; part i is replaced by part i-1,
	// at rank xs[i-1]. Likewise ys.
	i, j := nx-1, ny-1
	for {
		nextX, nextY := uint32(NoRank), uint32(NoRank)
		if i > 0 {
			nextX = xs[i-1]
		}
		if j > 0 {
			nextY = ys[j-1]
		}
		if c := v.joinedRank(s, xs[i], ys[j]); c != NoRank && c < nextX && c <= nextY {
			return true, true
		}
		switch {
		case i == 0 && j == 0:
			return false, true
		case nextX <= nextY: // equal ranks: a's merge is to the left, first
			i--
		default:
			j--
		}
	}
}

// maxSpine bounds a spine: each step shortens the part by a byte at least.
const maxSpine = 256

// spine writes to out the right spine of t (right: the parts ending t,
// longest first) or its left spine, and returns its length; false when some
// merge on it does not outrank its parts.
func (v *Vocabulary) spine(t uint32, out *[maxSpine]uint32, right bool) (int, bool) {
	n := 0
	for {
		out[n] = t
		n++
		if v.length[t] == 1 {
			return n, true
		}
		l, r, ok := v.split(t)
		if !ok {
			return 0, false
		}
		if right {
			t = r
		} else {
			t = l
		}
	}
}

// joinedRank returns the rank of tokens a and b concatenated, or NoRank.
func (v *Vocabulary) joinedRank(s *Scratch, a, b uint32) uint32 {
	if int(v.length[a])+int(v.length[b]) > v.maxLen {
		return NoRank
	}
	slot, k := s.pairSlot(a, b)
	if slot.key == k {
		return slot.rank
	}
	s.pairBuf = append(append(s.pairBuf[:0], v.Token(a)...), v.Token(b)...)
	r, _ := v.rankBytes(s.pairBuf)
	slot.key, slot.rank = k, r
	return r
}

// rankBytes is RankHashed for a byte slice.
func (v *Vocabulary) rankBytes(b []byte) (uint32, bool) {
	return v.RankHashed(bytesView(b), hashString(v.seed, bytesView(b)))
}

// split returns the two tokens whose merge makes t last in E(t), computed
// on first use and kept; ok is false when one of them does not rank below t
// (no such token is known in OpenAI's vocabularies; the caller then merges).
func (v *Vocabulary) split(t uint32) (l, r uint32, ok bool) {
	e := v.splits[t].Load()
	if e == 0 {
		var merged bool
		l, r, merged = v.lastMerge(v.Token(t))
		e = splitKnown | uint64(l)<<32 | uint64(r)
		if !merged || l >= t || r >= t {
			e = splitKnown | splitBad
		}
		v.splits[t].Store(e)
	}
	if e&splitBad != 0 {
		return 0, 0, false
	}
	return uint32(e>>32) & 0x3FFFFFFF, uint32(e), true
}

const (
	splitKnown = 1 << 63
	splitBad   = 1 << 62
)

// splitTable is the lazily filled table of splits, one entry per rank.
type splitTable = []atomic.Uint64

// lastMerge merges tok, a token of two bytes or more, by byte pairs until
// two parts are left and returns them (their merge, tok, is the last one),
// or false if it stops before. Cold path: once per token per process.
func (v *Vocabulary) lastMerge(tok string) (uint32, uint32, bool) {
	var (
		start [256]uint8
		part  [256]uint32
	)
	n := len(tok)
	for i := range n {
		start[i] = uint8(i)
		part[i] = v.byteRank[tok[i]]
	}
	start[n] = uint8(n)
	for parts := n; parts > 2; parts-- {
		best, at := uint32(NoRank), -1
		for i := 0; i+1 < parts; i++ {
			if r := v.Rank(tok[start[i]:start[i+2]]); r < best {
				best, at = r, i
			}
		}
		if at < 0 {
			return 0, 0, false // not reached for OpenAI's tokens: E(tok) = [tok]
		}
		part[at] = best
		copy(start[at+1:parts], start[at+2:parts+1])
		copy(part[at+1:parts-1], part[at+2:parts])
	}
	return part[0], part[1], n >= 2
}

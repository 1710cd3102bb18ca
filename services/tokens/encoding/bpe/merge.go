package bpe

// smallPiece is the longest piece merged by scanning its parts for the best
// pair (quadratic in the piece but bounded, and fastest on the short pieces
// of ordinary text); longer pieces use a heap, O(n log n).
const smallPiece = 48

// segmentedPiece is the shortest piece merged by segments (segment.go).
const segmentedPiece = 16

// pairBits sizes Scratch's cache of pair ranks (2^pairBits slots).
const pairBits = 14

// Scratch holds the buffers of the heap merge, reused across calls so that
// merging does not allocate once they have grown, and caches of one
// vocabulary (used with another, it starts afresh). Not safe for concurrent
// use: one per goroutine.
type Scratch struct {
	owner *Vocabulary // whose tokens the caches hold

	next, prev []int32
	rank, tok  []uint32
	heap       []uint64
	// pairs caches the rank of two adjacent tokens merged (NoRank for
	// none): a part is always a token, so the pair of tokens names the byte
	// string, and text repeats its pairs (CJK above all) far more often than
	// a hash lookup of the bytes is cheap.
	pairs []pairSlot

	// The caches and buffers of the merge by segments.
	chars             []charSlot
	segs              []segSlot
	compat            []uint64
	segOut, compatOut []uint32
	pairBuf           []byte
}

type pairSlot struct {
	key  uint64 // a<<32 | b, plus one so that the zero slot is empty
	rank uint32
}

// pairSlot returns the cache slot of tokens a and b and the key it holds
// when it caches their rank.
func (s *Scratch) pairSlot(a, b uint32) (*pairSlot, uint64) {
	if s.pairs == nil {
		s.pairs = make([]pairSlot, 1<<pairBits)
	}
	k := uint64(a)<<32 | uint64(b) + 1
	return &s.pairs[(k*0x9E3779B97F4A7C15)>>(64-pairBits)], k
}

// mergedRank returns the rank of tokens a and b merged, whose bytes are span.
func (v *Vocabulary) mergedRank(s *Scratch, a, b uint32, span string) uint32 {
	if len(span) > v.maxLen {
		return NoRank
	}
	slot, k := s.pairSlot(a, b)
	if slot.key == k {
		return slot.rank
	}
	r := v.Rank(span)
	slot.key, slot.rank = k, r
	return r
}

// Merge appends to ids the tokens of piece merged by byte-pair encoding, as
// tiktoken's _byte_pair_merge does: repeatedly the adjacent pair of parts
// whose concatenation has the lowest rank, the leftmost among equal ranks,
// until no adjacent pair is a token. It does not first look up the whole
// piece (tiktoken's encoder does; so does the caller).
func (v *Vocabulary) Merge(piece string, s *Scratch, ids []uint32) []uint32 {
	if s.owner != v {
		// The caches hold one vocabulary's tokens.
		*s = Scratch{owner: v}
	}
	if len(piece) >= segmentedPiece {
		return v.mergeSegments(piece, s, ids)
	}
	return v.mergeDirect(piece, s, ids)
}

// mergeDirect is [Vocabulary.Merge] without segments.
func (v *Vocabulary) mergeDirect(piece string, s *Scratch, ids []uint32) []uint32 {
	switch n := len(piece); {
	case n == 0:
		return ids
	case n == 1:
		return append(ids, v.byteRank[piece[0]])
	case n == 2:
		if r := v.pairRank[uint16(piece[0])<<8|uint16(piece[1])]; r != NoRank {
			return append(ids, r)
		}
		return append(ids, v.byteRank[piece[0]], v.byteRank[piece[1]])
	case n <= smallPiece:
		return v.mergeSmall(piece, s, ids)
	}
	return v.mergeHeap(piece, s, ids)
}

// mergeSmall keeps the parts in arrays on the stack and scans them for the
// best pair after each merge.
func (v *Vocabulary) mergeSmall(piece string, s *Scratch, ids []uint32) []uint32 {
	var (
		start [smallPiece + 1]uint8 // start[i]: where part i starts; start[parts] = len(piece)
		rank  [smallPiece]uint32    // rank[i]: of parts i and i+1 merged
		tok   [smallPiece]uint32    // tok[i]: part i's token
	)
	n := len(piece)
	for i := range n {
		start[i] = uint8(i)
		tok[i] = v.byteRank[piece[i]]
	}
	start[n] = uint8(n)
	for i := 0; i+1 < n; i++ {
		rank[i] = v.pairRank[uint16(piece[i])<<8|uint16(piece[i+1])]
	}
	rank[n-1] = NoRank
	parts := n
	for {
		best, at := uint32(NoRank), -1
		for i, r := range rank[:parts-1] {
			if r < best {
				best, at = r, i
			}
		}
		if at < 0 {
			break
		}
		tok[at] = best
		copy(start[at+1:parts], start[at+2:parts+1])
		copy(rank[at+1:parts-1], rank[at+2:parts])
		copy(tok[at+1:parts-1], tok[at+2:parts])
		parts--
		rank[at] = NoRank
		if at+1 < parts {
			rank[at] = v.mergedRank(s, best, tok[at+1], piece[start[at]:start[at+2]])
		}
		if at > 0 {
			rank[at-1] = v.mergedRank(s, tok[at-1], best, piece[start[at-1]:start[at+1]])
		}
	}
	return append(ids, tok[:parts]...)
}

// mergeHeap keeps the parts in a linked list over byte offsets and the
// candidate merges in a min-heap keyed rank<<32 | offset, so that the lowest
// rank, then the leftmost, comes out first, as in the scan. A merge leaves
// stale entries for its neighbours; they are skipped when popped: a part's
// pair only grows, and a rank names one byte string, so an entry is current
// exactly when its rank is the part's current one.
func (v *Vocabulary) mergeHeap(piece string, s *Scratch, ids []uint32) []uint32 {
	n := int32(len(piece))
	s.grow(int(n))
	next, prev, rank, tok := s.next[:n], s.prev[:n], s.rank[:n], s.tok[:n]
	h := s.heap[:0]
	for i := range n {
		next[i], prev[i] = i+1, i-1
		tok[i] = v.byteRank[piece[i]]
		rank[i] = NoRank
		if i+1 < n {
			if r := v.pairRank[uint16(piece[i])<<8|uint16(piece[i+1])]; r != NoRank {
				rank[i] = r
				h = append(h, uint64(r)<<32|uint64(i))
			}
		}
	}
	heapify(h)
	for len(h) > 0 {
		top := h[0]
		h = popMin(h)
		r, i := uint32(top>>32), int32(uint32(top))
		if rank[i] != r {
			continue // stale
		}
		j := next[i]
		k := next[j]
		tok[i] = r
		rank[j] = NoRank // j is merged away
		next[i] = k
		if k < n {
			prev[k] = i
			rank[i] = v.mergedRank(s, r, tok[k], piece[i:next[k]])
			if rank[i] != NoRank {
				h = push(h, uint64(rank[i])<<32|uint64(i))
			}
		} else {
			rank[i] = NoRank
		}
		if p := prev[i]; p >= 0 {
			rank[p] = v.mergedRank(s, tok[p], r, piece[p:k])
			if rank[p] != NoRank {
				h = push(h, uint64(rank[p])<<32|uint64(p))
			}
		}
	}
	s.heap = h[:0]
	for i := int32(0); i < n; i = next[i] {
		ids = append(ids, tok[i])
	}
	return ids
}

func (s *Scratch) grow(n int) {
	if cap(s.next) < n {
		s.next = make([]int32, n)
		s.prev = make([]int32, n)
		s.rank = make([]uint32, n)
		s.tok = make([]uint32, n)
		s.heap = make([]uint64, 0, n)
	}
}

// heapify, push and popMin keep h a 4-ary min-heap of uint64 keys: half
// the depth of a binary heap, and a node's children share a cache line,
// which matters on the million-entry heaps of the worst cases.
func heapify(h []uint64) {
	if len(h) < 2 {
		return
	}
	for i := (len(h) - 2) / 4; i >= 0; i-- {
		down(h, i)
	}
}

func push(h []uint64, x uint64) []uint64 {
	h = append(h, x)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 4
		if h[p] <= x {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = x
	return h
}

func popMin(h []uint64) []uint64 {
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	if last > 0 {
		down(h, 0)
	}
	return h
}

func down(h []uint64, i int) {
	x := h[i]
	n := len(h)
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		if end := min(c+4, n); end-c == 4 {
			a, b := c, c+2
			if h[c+1] < h[c] {
				a = c + 1
			}
			if h[c+3] < h[c+2] {
				b = c + 3
			}
			if h[b] < h[a] {
				a = b
			}
			m = a
		} else {
			for k := c + 1; k < end; k++ {
				if h[k] < h[m] {
					m = k
				}
			}
		}
		if x <= h[m] {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = x
}

// Shrink drops buffers grown past n entries, so that a pooled Scratch does
// not keep the memory of one huge piece.
func (s *Scratch) Shrink(n int) {
	if cap(s.next) > n {
		*s = Scratch{owner: s.owner, pairs: s.pairs, chars: s.chars, segs: s.segs, compat: s.compat}
	}
}

package oracle

import "math"

// noRank marks a pair of parts that is not in the vocabulary.
const noRank = math.MaxUint32

// heapThreshold is the piece length, in bytes, from which [bpe] switches from
// the quadratic scan (fastest on the short pieces of ordinary text) to the
// O(n log n) heap (needed for long runs such as 1 MiB without a space, where
// the scan would take minutes).
const heapThreshold = 128

// bpe appends to ids the tokens of piece, one pre-tokenizer match, merged by
// byte-pair encoding with ranks. It merges exactly as tiktoken's
// _byte_pair_merge does: repeatedly the adjacent pair whose concatenation has
// the lowest rank, the leftmost one among equal ranks, until no adjacent pair
// is in the vocabulary. Every single byte is in these vocabularies, so every
// part left at the end has a rank.
func bpe(ranks map[string]uint, piece string, ids []uint32) []uint32 {
	if r, ok := ranks[piece]; ok {
		return append(ids, uint32(r))
	}
	if len(piece) < heapThreshold {
		return bpeScan(ranks, piece, ids)
	}
	return bpeHeap(ranks, piece, ids)
}

// part is a boundary in bpeScan: the part starting at start, and the rank of
// merging it with the next part.
type part struct {
	start int
	rank  uint32
}

func rankOf(ranks map[string]uint, s string) uint32 {
	if r, ok := ranks[s]; ok {
		return uint32(r)
	}
	return noRank
}

func bpeScan(ranks map[string]uint, piece string, ids []uint32) []uint32 {
	var buf [heapThreshold + 1]part // no allocation for a short piece
	parts := buf[:0]
	if len(piece)+1 > len(buf) {
		parts = make([]part, 0, len(piece)+1) // only when tests compare with bpeHeap
	}
	parts = parts[:len(piece)+1]
	for i := range parts {
		parts[i] = part{start: i, rank: noRank}
	}
	// pairRank is the rank of parts i and i+1 merged, skipping boundary i+1
	// when skip is set (computed just before that boundary is removed).
	pairRank := func(i, skip int) uint32 {
		if i+2+skip < len(parts) {
			return rankOf(ranks, piece[parts[i].start:parts[i+2+skip].start])
		}
		return noRank
	}
	for i := 0; i+2 < len(parts); i++ {
		parts[i].rank = pairRank(i, 0)
	}
	for len(parts) > 2 {
		best, at := uint32(noRank), -1
		for i := 0; i+1 < len(parts); i++ {
			if parts[i].rank < best {
				best, at = parts[i].rank, i
			}
		}
		if at < 0 {
			break
		}
		if at > 0 {
			parts[at-1].rank = pairRank(at-1, 1)
		}
		parts[at].rank = pairRank(at, 1)
		parts = append(parts[:at+1], parts[at+2:]...)
	}
	for i := 0; i+1 < len(parts); i++ {
		ids = append(ids, uint32(ranks[piece[parts[i].start:parts[i+1].start]]))
	}
	return ids
}

// node is a part in bpeHeap's linked list; rank is that of merging it with
// the next part, noRank once it cannot merge or has been merged away.
type node struct {
	prev, next int32
	rank       uint32
}

// candidate is a possible merge in bpeHeap's min-heap.
type candidate struct {
	rank uint32
	at   int32 // byte offset of the left part: the tie-break, leftmost first
}

// bpeHeap merges like bpeScan, keeping candidate merges in a min-heap ordered
// by (rank, offset) so that the leftmost lowest-rank pair comes out first, as
// in the scan. Entries made stale by a neighbouring merge are skipped when
// popped: a part's pair only grows, and a rank names one byte string, so an
// entry is current exactly when it equals the part's current rank.
func bpeHeap(ranks map[string]uint, piece string, ids []uint32) []uint32 {
	n := int32(len(piece))
	nodes := make([]node, n+1)
	for i := range nodes {
		nodes[i] = node{prev: int32(i) - 1, next: int32(i) + 1, rank: noRank}
	}
	nodes[n].next = -1
	pairRank := func(i int32) uint32 {
		j := nodes[i].next
		if j < 0 {
			return noRank
		}
		k := nodes[j].next
		if k < 0 {
			return noRank
		}
		return rankOf(ranks, piece[i:k])
	}
	h := make(minHeap, 0, n)
	for i := int32(0); i+2 <= n; i++ {
		if r := pairRank(i); r != noRank {
			nodes[i].rank = r
			h = append(h, candidate{r, i})
		}
	}
	h.init()
	for len(h) > 0 {
		c := h.pop()
		i := c.at
		if nodes[i].rank != c.rank {
			continue // stale
		}
		j := nodes[i].next
		k := nodes[j].next
		nodes[j].rank = noRank
		nodes[i].next = k
		if k >= 0 {
			nodes[k].prev = i
		}
		for _, b := range [2]int32{i, nodes[i].prev} {
			if b < 0 {
				continue
			}
			nodes[b].rank = pairRank(b)
			if nodes[b].rank != noRank {
				h.push(candidate{nodes[b].rank, b})
			}
		}
	}
	for i := int32(0); nodes[i].next >= 0; i = nodes[i].next {
		ids = append(ids, uint32(ranks[piece[i:nodes[i].next]]))
	}
	return ids
}

// minHeap is a binary heap of candidates; typed rather than container/heap
// so that pushes do not allocate an interface each.
type minHeap []candidate

func (h minHeap) less(a, b int) bool {
	if h[a].rank != h[b].rank {
		return h[a].rank < h[b].rank
	}
	return h[a].at < h[b].at
}

func (h minHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *minHeap) push(c candidate) {
	*h = append(*h, c)
	for i := len(*h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		(*h)[i], (*h)[p] = (*h)[p], (*h)[i]
		i = p
	}
}

func (h *minHeap) pop() candidate {
	old := *h
	top := old[0]
	last := len(old) - 1
	old[0] = old[last]
	*h = old[:last]
	h.down(0)
	return top
}

func (h minHeap) down(i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if r := c + 1; r < len(h) && h.less(r, c) {
			c = r
		}
		if !h.less(c, i) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

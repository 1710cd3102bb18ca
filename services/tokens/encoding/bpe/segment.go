package bpe

// Long pieces are merged by segments. The byte-pair encoding E(s) of a
// string is the only way to write s as tokens in which every two adjacent
// tokens a, b are compatible: E(a+b) = [a, b]. (If a merge of E(s) crossed a
// boundary between two such tokens, the same merge, coming first among the
// merges inside the pair, would cross it in E(a+b); and E(s) itself has the
// property.) So a piece can be cut into segments anywhere, each segment
// merged on its own (cached: text repeats its characters and words), and the
// results joined; where two joined tokens are not compatible the cut was not
// a token boundary of E(s), and the last tokens are re-merged together with
// the segment until they are. Every seam is checked, so the result is E(s)
// exactly, wherever the cuts fall; the cuts only decide the speed. It is
// linear in the piece: a repair that grows past maxRepair bytes, or repairs
// re-merging more than repairBudget times the piece, give up for the heap
// merge of the whole piece.

const (
	// asciiSegment is the length of a segment of ASCII bytes (a multiple of
	// the tokens of a long run of one character, so that such runs join
	// without repair).
	asciiSegment = 32
	// maxRepair bounds the bytes re-merged at one seam.
	maxRepair = 192
	// repairBudget bounds the bytes re-merged in a piece, as a multiple of
	// its length (plus one repair).
	repairBudget = 8
)

// mergeSegments appends E(piece) to ids, as [Vocabulary.Merge].
func (v *Vocabulary) mergeSegments(piece string, s *Scratch, ids []uint32) []uint32 {
	// The budget bounds the bytes re-merged by all repairs together, so
	// that text built to need a long repair at every seam costs no more than
	// a constant times the heap merge.
	return v.mergeSegmentsUpTo(piece, s, ids, maxRepair, repairBudget*(len(piece)+maxRepair))
}

// mergeSegmentsUpTo is mergeSegments with each repair bounded by limit
// bytes and all of them by budget.
func (v *Vocabulary) mergeSegmentsUpTo(piece string, s *Scratch, ids []uint32, limit, budget int) []uint32 {
	base := len(ids)
	for pos := 0; pos < len(piece); {
		end := segmentEnd(piece, pos)
		from := pos // start of the text whose tokens are appended
		var toks []uint32
		if end-pos <= 4 {
			toks = v.charMerge(s, piece[pos:end])
		} else {
			toks = v.cachedMerge(s, piece[pos:end])
		}
		for len(ids) > base && !v.compatible(s, ids[len(ids)-1], toks[0]) {
			// The cut at from is not a token boundary: give the last token
			// back and merge it with the segment.
			last := ids[len(ids)-1]
			ids = ids[:len(ids)-1]
			from -= int(v.length[last])
			budget -= end - from
			if end-from > limit || budget < 0 {
				return v.mergeHeap(piece, s, ids[:base])
			}
			toks = v.cachedMerge(s, piece[from:end])
		}
		ids = append(ids, toks...)
		pos = end
	}
	return ids
}

// segmentEnd returns the end of the segment starting at piece[pos]: a
// character, or a run of up to asciiSegment ASCII bytes.
func segmentEnd(piece string, pos int) int {
	c := piece[pos]
	if c < 0x80 {
		end := pos + 1
		limit := min(pos+asciiSegment, len(piece))
		for end < limit && piece[end] < 0x80 {
			end++
		}
		return end
	}
	n := 1
	switch {
	case c >= 0xF0:
		n = 4
	case c >= 0xE0:
		n = 3
	case c >= 0xC0:
		n = 2
	}
	end := min(pos+n, len(piece))
	// Stop early at a byte that cannot continue the character (invalid
	// UTF-8 is merged too); any cut is correct, this one is only cheaper.
	for k := pos + 1; k < end; k++ {
		if piece[k]&0xC0 != 0x80 {
			return k
		}
	}
	return end
}

// cachedMerge returns E(text), from Scratch's segment cache when it holds
// text. The slice is valid until the next call.
func (v *Vocabulary) cachedMerge(s *Scratch, text string) []uint32 {
	if len(text) > segKeyMax {
		s.segOut = v.mergeDirect(text, s, s.segOut[:0])
		return s.segOut
	}
	if s.segs == nil {
		s.segs = make([]segSlot, 1<<segBits)
	}
	h := v.Hash(text)
	slot := &s.segs[h>>(64-segBits)]
	if slot.hash == h && int(slot.keyLen) == len(text) && string(slot.key[:slot.keyLen]) == text {
		return slot.ids[:slot.idsLen]
	}
	s.segOut = v.mergeDirect(text, s, s.segOut[:0])
	if len(s.segOut) <= segIDsMax {
		slot.hash = h
		slot.keyLen = uint8(copy(slot.key[:], text))
		slot.idsLen = uint8(copy(slot.ids[:], s.segOut))
	}
	return s.segOut
}

// charMerge is cachedMerge for a text of one to four bytes (a character),
// cached by its bytes without hashing them.
func (v *Vocabulary) charMerge(s *Scratch, text string) []uint32 {
	var key uint64
	for i := 0; i < len(text); i++ {
		key = key<<8 | uint64(text[i])
	}
	key = key<<3 | uint64(len(text)) // texts of different lengths differ
	if s.chars == nil {
		s.chars = make([]charSlot, 1<<charBits)
	}
	slot := &s.chars[(key*0x9E3779B97F4A7C15)>>(64-charBits)]
	if slot.key != key || slot.n == 0 {
		out := v.mergeDirect(text, s, slot.ids[:0])
		slot.key, slot.n = key, uint32(len(out))
	}
	return slot.ids[:slot.n]
}

// charBits sizes the character cache (2^charBits slots of 32 bytes).
const charBits = 12

type charSlot struct {
	key uint64 // the bytes, then the length in the low 3 bits
	n   uint32
	ids [4]uint32
}

// Segment cache: segBits selects 2^segBits direct-mapped slots of texts up
// to segKeyMax bytes merging to at most segIDsMax tokens (160 KiB).
const (
	segBits   = 11
	segKeyMax = 32
	segIDsMax = 8
)

type segSlot struct {
	hash   uint64
	keyLen uint8
	idsLen uint8
	key    [segKeyMax]byte
	ids    [segIDsMax]uint32
}

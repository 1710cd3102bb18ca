// Package bpe holds tiktoken's byte-pair vocabularies, compiled into the
// binary, and the byte-pair merge over them.
//
// The rank files (ranks/*.ranks) are OpenAI's .tiktoken files in a compact
// form: every token's bytes in rank order, each preceded by its length as a
// uvarint (0 marks a rank with no token). The tests re-serialise each to the
// .tiktoken format and check OpenAI's published SHA-256.
package bpe

import (
	_ "embed"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// NoRank marks a byte string that is not a token.
const NoRank = math.MaxUint32

//go:embed ranks/o200k_base.ranks
var o200kRanks string

//go:embed ranks/cl100k_base.ranks
var cl100kRanks string

//go:embed ranks/p50k_base.ranks
var p50kRanks string

//go:embed ranks/r50k_base.ranks
var r50kRanks string

// RankFile returns the embedded rank file of encoding name, or false.
func RankFile(name string) (string, bool) {
	switch name {
	case "o200k_base":
		return o200kRanks, true
	case "cl100k_base":
		return cl100kRanks, true
	case "p50k_base":
		return p50kRanks, true
	case "r50k_base":
		return r50kRanks, true
	}
	return "", false
}

// Vocabulary maps token bytes to ranks (the token ids) and back. Its tables
// point into the embedded rank file, so only the hash index and offsets take
// heap memory. Immutable and safe for concurrent use.
type Vocabulary struct {
	data   string   // the rank file
	off    []uint32 // off[r]: where token r's bytes start in data
	length []uint8  // length[r]: its length, 0 for a rank with no token
	maxLen int      // the longest token: no longer string needs a lookup

	seed  uint64
	slots []uint64 // open addressing: slotKey (hash's top 24 bits, length) in the high half, rank+1 in the low; 0 is empty
	mask  uint64

	byteRank [256]uint32 // the rank of each single byte
	pairRank []uint32    // the rank of each two-byte string, indexed by b0<<8|b1

	splits splitTable // per rank, its merge tree's root split, filled on first use
}

// Load builds the vocabulary of encoding name from its embedded rank file.
func Load(name string) (*Vocabulary, error) {
	data, ok := RankFile(name)
	if !ok {
		return nil, fmt.Errorf("bpe: no rank file for encoding %q", name)
	}
	v, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("bpe: %s: %w", name, err)
	}
	return v, nil
}

func parse(data string) (*Vocabulary, error) {
	v := &Vocabulary{data: data, seed: rand.Uint64()}
	for i := 0; i < len(data); {
		n, k := uvarint(data, i)
		if k <= 0 || n > 255 || uint64(i+k)+n > uint64(len(data)) {
			return nil, fmt.Errorf("rank file corrupt at byte %d", i)
		}
		v.off = append(v.off, uint32(i+k))
		v.length = append(v.length, uint8(n))
		v.maxLen = max(v.maxLen, int(n))
		i += k + int(n)
	}
	if len(v.off) == 0 || len(v.off) >= math.MaxUint32-1 {
		return nil, errors.New("rank file empty or too large")
	}
	size := uint64(1)
	for size < uint64(len(v.off))*2 {
		size <<= 1
	}
	v.slots = make([]uint64, size)
	v.mask = size - 1
	for r := range v.off {
		if v.length[r] == 0 {
			continue
		}
		tok := v.Token(uint32(r))
		h := v.Hash(tok)
		if _, dup := v.RankHashed(tok, h); dup {
			return nil, fmt.Errorf("token of rank %d repeated", r)
		}
		i := h & v.mask
		for v.slots[i] != 0 {
			i = (i + 1) & v.mask
		}
		v.slots[i] = slotKey(h, len(tok)) | uint64(r+1)
	}
	v.splits = make(splitTable, len(v.off))
	v.pairRank = make([]uint32, 1<<16)
	for i := range v.pairRank {
		v.pairRank[i] = v.Rank(string([]byte{byte(i >> 8), byte(i)}))
	}
	for b := range v.byteRank {
		if v.byteRank[b] = v.Rank(string([]byte{byte(b)})); v.byteRank[b] == NoRank {
			return nil, fmt.Errorf("byte %#x is not a token", b)
		}
	}
	return v, nil
}

// Len returns the number of ranks, holes included: every id below it that
// [Vocabulary.Valid] accepts is a token.
func (v *Vocabulary) Len() int { return len(v.off) }

// Valid reports whether id is the rank of a token.
func (v *Vocabulary) Valid(id uint32) bool { return int64(id) < int64(len(v.off)) && v.length[id] > 0 }

// Token returns the bytes of token id, which must be [Vocabulary.Valid].
func (v *Vocabulary) Token(id uint32) string {
	o := v.off[id]
	return v.data[o : o+uint32(v.length[id])]
}

// Hash returns the hash [Vocabulary.RankHashed] takes.
func (v *Vocabulary) Hash(s string) uint64 { return hashString(v.seed, s) }

// Rank returns the rank of token s, or NoRank.
func (v *Vocabulary) Rank(s string) uint32 {
	if len(s) > v.maxLen || len(s) == 0 {
		return NoRank
	}
	r, _ := v.RankHashed(s, v.Hash(s))
	return r
}

// RankHashed returns the rank of token s whose [Vocabulary.Hash] is h.
func (v *Vocabulary) RankHashed(s string, h uint64) (uint32, bool) {
	if len(s) > v.maxLen {
		return NoRank, false
	}
	key := slotKey(h, len(s))
	for i := h & v.mask; ; i = (i + 1) & v.mask {
		e := v.slots[i]
		if e == 0 {
			return NoRank, false
		}
		if e&^0xFFFFFFFF == key {
			r := uint32(e) - 1
			if o := v.off[r]; v.data[o:o+uint32(len(s))] == s {
				return r, true
			}
		}
	}
}

// slotKey is the high half of an index slot: the top 24 bits of the hash
// and the token's length, so that a probe touches the token's bytes only
// when both match.
func slotKey(h uint64, n int) uint64 { return h>>40<<40 | uint64(n)<<32 }

// MaxTokenLen returns the length of the longest token.
func (v *Vocabulary) MaxTokenLen() int { return v.maxLen }

// uvarint decodes the uvarint at data[i] (at most two bytes: lengths are
// below 256), returning it and its size, or size 0 when malformed.
func uvarint(data string, i int) (uint64, int) {
	if data[i] < 0x80 {
		return uint64(data[i]), 1
	}
	if i+1 < len(data) && data[i+1] < 0x80 {
		return uint64(data[i]&0x7F) | uint64(data[i+1])<<7, 2
	}
	return 0, 0
}

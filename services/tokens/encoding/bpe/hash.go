package bpe

import (
	"math/bits"
	"unsafe"
)

// hashString is the hash of the vocabulary index and of the caches keyed by
// text: a multiply-mix over 8-byte words, inlinable and several times
// cheaper than hash/maphash on the short strings of text (pieces, tokens).
// seed is random per vocabulary, so that which texts collide in a
// direct-mapped cache cannot be known in advance.
func hashString(seed uint64, s string) uint64 {
	h := seed ^ uint64(len(s))*hashK1
	for len(s) > 16 {
		h = mix(le64(s)^hashK2^h, le64(s[8:])^hashK3)
		s = s[16:]
	}
	var a, b uint64
	switch n := len(s); {
	case n >= 8: // the first and last 8 bytes cover all of them
		a, b = le64(s), le64(s[n-8:])
	case n >= 4:
		a, b = uint64(le32(s)), uint64(le32(s[n-4:]))
	case n > 0:
		a = uint64(s[0])<<16 | uint64(s[n>>1])<<8 | uint64(s[n-1])
	}
	return mix(mix(a^hashK2, b^h^hashK3), hashK1)
}

const (
	hashK1 = 0xa0761d6478bd642f
	hashK2 = 0xe7037ed1a0b428db
	hashK3 = 0x8ebc6af09c88c6e3
)

// mix folds the 128-bit product of a and b.
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func le32(s string) uint32 {
	_ = s[3]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// bytesView returns b as a string without copying, for lookups that do not
// keep it.
func bytesView(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

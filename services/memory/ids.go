package memory

import (
	"crypto/rand"
	"encoding/binary"
	"time"
)

// Id prefixes of the memory service's nodes and edges.
const (
	episodePrefix   = "ep_"
	entityPrefix    = "en_"
	relationPrefix  = "re_"
	communityPrefix = "co_"
)

// idBodyLen is the length of an id after its prefix: a ULID (48 bits of
// Unix milliseconds and 80 random bits in Crockford base32).
const idBodyLen = 26

// crockford is Crockford's base32 alphabet (no i, l, o, u), lower case as
// the stores write it.
const crockford = "0123456789abcdefghjkmnpqrstvwxyz"

// newID returns prefix and a ULID for now: ids of one prefix sort by
// creation time to the millisecond and never collide in practice (80
// random bits per millisecond).
func newID(prefix string, now time.Time) string {
	var raw [16]byte
	ms := uint64(now.UnixMilli())
	binary.BigEndian.PutUint16(raw[0:2], uint16(ms>>32))
	binary.BigEndian.PutUint32(raw[2:6], uint32(ms))
	_, _ = rand.Read(raw[6:]) // crypto/rand.Read never fails
	// 128 bits as 26 base32 digits: the first digit holds the top 3 bits.
	hi := binary.BigEndian.Uint64(raw[0:8])
	lo := binary.BigEndian.Uint64(raw[8:16])
	out := make([]byte, len(prefix)+idBodyLen)
	copy(out, prefix)
	body := out[len(prefix):]
	for i := idBodyLen - 1; i >= 0; i-- {
		body[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out)
}

// validID reports whether id is prefix followed by 26 characters of the
// Crockford alphabet (either case), the first at most '7' (a ULID is 128
// bits).
func validID(prefix, id string) bool {
	if len(id) != len(prefix)+idBodyLen || id[:len(prefix)] != prefix {
		return false
	}
	body := id[len(prefix):]
	if body[0] > '7' {
		return false
	}
	for i := 0; i < len(body); i++ {
		if !isCrockford(body[i]) {
			return false
		}
	}
	return true
}

func isCrockford(c byte) bool {
	switch {
	case c >= '0' && c <= '9':
		return true
	case c >= 'A' && c <= 'Z':
		return c != 'I' && c != 'L' && c != 'O' && c != 'U'
	case c >= 'a' && c <= 'z':
		return c != 'i' && c != 'l' && c != 'o' && c != 'u'
	}
	return false
}

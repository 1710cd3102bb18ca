package encoding

// Piece cache bounds: pieces up to cacheKeyMax bytes of at most cacheIDsMax
// tokens are cached, in cacheSlots direct-mapped slots of 64 bytes, a cache
// line each (256 KiB per state).
const (
	cacheKeyMax = 30
	cacheIDsMax = 6
	cacheSlots  = 4096
)

// pieceCache remembers the tokens of recent pieces (words, repeated through
// a text) so that they are looked up or merged once. It
// is direct-mapped by the piece's hash: a new piece evicts the one in its
// slot. Owned by one state, so unsynchronised.
type pieceCache struct {
	slots []cacheSlot
}

type cacheSlot struct {
	hash   uint64
	keyLen uint8
	idsLen uint8
	key    [cacheKeyMax]byte
	ids    [cacheIDsMax]uint32
}

func newPieceCache() pieceCache { return pieceCache{slots: make([]cacheSlot, cacheSlots)} }

// get returns the cached tokens of piece, whose hash is h. The slice is
// valid until the next put.
func (c *pieceCache) get(piece string, h uint64) ([]uint32, bool) {
	s := &c.slots[h%cacheSlots]
	if s.hash != h || int(s.keyLen) != len(piece) || s.idsLen == 0 || string(s.key[:s.keyLen]) != piece {
		return nil, false
	}
	return s.ids[:s.idsLen], true
}

// put caches the tokens of piece when both fit a slot.
func (c *pieceCache) put(piece string, h uint64, ids []uint32) {
	if len(piece) > cacheKeyMax || len(ids) > cacheIDsMax || len(ids) == 0 {
		return
	}
	s := &c.slots[h%cacheSlots]
	s.hash = h
	s.keyLen = uint8(copy(s.key[:], piece))
	s.idsLen = uint8(copy(s.ids[:], ids))
}

package skills

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"io"
	"os"
)

// Bounds of what a revision hash reads. A file over maxHashFileBytes (which
// ReadSkillResource refuses anyway by default) or past maxHashSkillBytes for
// the skill is hashed by path, size and modification time instead of
// content, so that a huge folder does not make every reload read it.
const (
	maxHashFileBytes  = 1 << 20
	maxHashSkillBytes = 16 << 20
	// revisionHexChars is the length of a file skill's revision: 64 bits of
	// SHA-256, enough to tell a skill's revisions apart.
	revisionHexChars = 16
	// hashBufBytes is the read buffer of a revision hash, one per loading
	// goroutine.
	hashBufBytes = 32 << 10
)

// contentRevision is a file skill's revision: a hash of its SKILL.md and of
// each resource's path and content. It depends on the contents only, so
// every replica serving the same files reports the same revision.
// buf is a scratch buffer for reading (nil allocates one when needed).
func contentRevision(sr *os.Root, skillMD []byte, resources []resourceInfo, buf []byte) string {
	h := sha256.New()
	writeField(h, skillMD)
	budget := int64(maxHashSkillBytes)
	var fh hash.Hash
	if len(resources) > 0 {
		fh = sha256.New()
		if len(buf) == 0 {
			buf = make([]byte, hashBufBytes)
		}
	}
	for _, r := range resources {
		writeField(h, []byte(r.path))
		budget -= hashResource(h, fh, sr, r, budget, buf)
	}
	return hex.EncodeToString(h.Sum(nil))[:revisionHexChars]
}

// hashResource writes one resource's content hash (computed with fh; or,
// over the bounds, its size and modification time) into h and returns the
// bytes read.
func hashResource(h, fh hash.Hash, sr *os.Root, r resourceInfo, budget int64, buf []byte) int64 {
	f, fi, err := openRegular(sr, r.path)
	if err != nil {
		writeField(h, []byte("unreadable"))
		return 0
	}
	defer f.Close()
	if fi.Size() > maxHashFileBytes || fi.Size() > budget {
		var b [17]byte
		b[0] = 's'
		binary.BigEndian.PutUint64(b[1:9], uint64(fi.Size()))
		binary.BigEndian.PutUint64(b[9:], uint64(fi.ModTime().UnixNano()))
		writeField(h, b[:])
		return 0
	}
	fh.Reset()
	n, err := io.CopyBuffer(fh, io.LimitReader(f, maxHashFileBytes), buf)
	if err != nil {
		writeField(h, []byte("unreadable"))
		return n
	}
	writeField(h, fh.Sum(nil))
	return n
}

// writeField writes b length-prefixed, so that fields cannot run into each
// other.
func writeField(h hash.Hash, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}

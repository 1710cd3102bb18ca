package contextsvc

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
)

// A GetHistory page token is the stream sequence of the last message of the
// previous page, so pages stay correct while the conversation grows:
// base64url("h1" + uvarint(sequence)).
const pageTokenPrefix = "h1"

var errBadPageToken = errors.New("not a page token returned by GetHistory")

func encodePageToken(afterSeq uint64) string {
	b := binary.AppendUvarint([]byte(pageTokenPrefix), afterSeq)
	return base64.RawURLEncoding.EncodeToString(b)
}

// parsePageToken returns the sequence after which the page starts; the empty
// token starts at the beginning.
func parsePageToken(tok string) (uint64, error) {
	if tok == "" {
		return 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) < len(pageTokenPrefix)+1 || string(b[:len(pageTokenPrefix)]) != pageTokenPrefix {
		return 0, errBadPageToken
	}
	seq, n := binary.Uvarint(b[len(pageTokenPrefix):])
	if n <= 0 || len(pageTokenPrefix)+n != len(b) || seq == 0 || encodePageToken(seq) != tok {
		return 0, errBadPageToken // only the canonical form, so a token names one position
	}
	return seq, nil
}

package orchestrator

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/baagent/baagent/internal/natsx"
)

// newRunID returns "run_<12 hex digits of Unix ms>_<16 random hex digits>".
// Ids sort by creation time (to the millisecond), which ListRuns relies on
// for newest-first paging, and are valid subject tokens and KV keys.
func newRunID(now time.Time) string {
	var r [8]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read never fails
	return fmt.Sprintf("run_%012x_%s", now.UnixMilli(), hex.EncodeToString(r[:]))
}

// newConversationID returns an id for a run that starts a conversation.
func newConversationID() string {
	var r [12]byte
	_, _ = rand.Read(r[:])
	return "conv_" + hex.EncodeToString(r[:])
}

// Page tokens are opaque to clients: base64url("v1:" + the last run id of
// the previous page).
const pageTokenPrefix = "v1:"

func encodePageToken(lastRunID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(pageTokenPrefix + lastRunID))
}

var errBadPageToken = errors.New("not a page token from a previous ListRuns response")

// decodePageToken returns the run id a page token continues after.
func decodePageToken(tok string) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return "", errBadPageToken
	}
	id, ok := strings.CutPrefix(string(raw), pageTokenPrefix)
	if !ok || natsx.ValidateToken("run_id", id) != nil {
		return "", errBadPageToken
	}
	return id, nil
}

package hub

import "strconv"

// Cursors. A cursor is the decimal per-run seq of the last event a client
// has seen, exactly the Event.cursor the orchestrator publishes: "7" resumes
// with seq 8, and "0" replays from seq 1. The keyword "earliest" replays
// everything still retained; an empty cursor streams live events only. Any
// other string is answered with a stream_reset (reason "cursor invalid")
// followed by everything retained, never silently.

// Earliest is the cursor keyword that replays every retained event.
const Earliest = "earliest"

// maxCursorDigits bounds a numeric cursor (a uint64 has at most 20 digits).
const maxCursorDigits = 20

// Reasons carried by stream_reset events.
const (
	ReasonExpired = "cursor expired"
	ReasonInvalid = "cursor invalid"
	// ReasonEventsExpired is used when the run ended and none of its events
	// are retained any more.
	ReasonEventsExpired = "events expired"
)

// cursorKind is how a subscription starts.
type cursorKind int

const (
	cursorLive     cursorKind = iota // no cursor: events after subscribing
	cursorEarliest                   // "earliest": all retained events
	cursorAfter                      // a seq: events after it
	cursorInvalid                    // unparseable: reset, then all retained
)

// cursor is a parsed resume position.
type cursor struct {
	kind  cursorKind
	after uint64
	raw   string
}

// parseCursor parses a client's resume position; it never fails, an
// unparseable cursor is kept as cursorInvalid so the stream can say so.
func parseCursor(s string) cursor {
	switch s {
	case "":
		return cursor{kind: cursorLive}
	case Earliest:
		return cursor{kind: cursorEarliest, raw: s}
	}
	if len(s) > maxCursorDigits {
		return cursor{kind: cursorInvalid, raw: s}
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return cursor{kind: cursorInvalid, raw: s}
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return cursor{kind: cursorInvalid, raw: s}
	}
	return cursor{kind: cursorAfter, after: n, raw: s}
}

// FormatCursor is the cursor of the event with seq: resuming after it
// continues with seq+1.
func FormatCursor(seq uint64) string { return strconv.FormatUint(seq, 10) }

// ValidCursor reports whether s is a cursor the hub understands without a
// reset: empty, "earliest" or a decimal seq.
func ValidCursor(s string) bool { return parseCursor(s).kind != cursorInvalid }

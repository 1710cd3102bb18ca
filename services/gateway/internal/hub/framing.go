package hub

// A Framing renders an entry as the bytes one transport writes for it (an
// SSE frame, say), appended to dst. The hub knows no wire format: the
// transports that write an entry's bytes as they are give theirs in
// Options.Framings, and the hub renders every entry once per framing when
// it is decoded, so a run's viewers share one rendering and the run's
// fan-out can write it to them directly (see EnableDirect). A framing
// must not keep e or modify it.
type Framing func(dst []byte, e *Entry) []byte

// MaxFramings bounds Options.Framings: an entry holds its renderings
// inline, so that rendering costs one allocation however many transports
// there are.
const MaxFramings = 2

// framingHeadroom is what a framing is expected to add to the JSON besides
// the cursor and type (an SSE frame's field names, a WebSocket header), to
// size the buffer.
const framingHeadroom = 32

// Frame is e rendered by Options.Framings[i].
func (e *Entry) Frame(i int) []byte { return e.frames[i] }

// render renders e by every framing into one buffer and returns the bytes
// that took.
func (e *Entry) render(framings []Framing) int {
	if len(framings) == 0 {
		return 0
	}
	var ends [MaxFramings]int
	buf := make([]byte, 0, len(framings)*(len(e.JSON)+len(e.Cursor)+len(e.Type)+framingHeadroom))
	for i, f := range framings {
		buf = f(buf, e)
		ends[i] = len(buf)
	}
	start := 0
	for i := range framings {
		e.frames[i] = buf[start:ends[i]:ends[i]]
		start = ends[i]
	}
	return len(buf)
}

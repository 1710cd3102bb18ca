package hub

// A Framing renders an entry as the bytes one transport writes for it (an
// SSE frame, say), appended to dst. The hub knows no wire format: the
// transports that write an entry's bytes as they are give theirs in
// Options.Framings, and the hub renders every entry once per framing when
// it is decoded, so a run's viewers share one rendering and the run's
// fan-out can write it to them directly (see EnableDirect). A framing
// must not keep e or modify it.
type Framing func(dst []byte, e *Entry) []byte

// Frame is e rendered by Options.Framings[i].
func (e *Entry) Frame(i int) []byte { return e.frames[i] }

// render renders e by every framing and returns the bytes that took.
func (e *Entry) render(framings []Framing) int {
	if len(framings) == 0 {
		return 0
	}
	e.frames = make([][]byte, len(framings))
	n := 0
	for i, f := range framings {
		e.frames[i] = f(nil, e)
		n += len(e.frames[i])
	}
	return n
}

package export

import (
	"errors"
	"fmt"
	"io"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/gateway/internal/hub"
)

// Writer writes one export document to an io.Writer: give it the events of
// a run, or of a conversation's runs one run after the other, each run's in
// seq order, then Close it. It writes as it goes, in pieces of about one
// message (an event for JSON Lines); the caller buffers. A Writer is not
// safe for concurrent use. After an error from the io.Writer every call
// returns that error.
type Writer struct {
	format baagentv1.ExportFormat
	w      io.Writer
	tr     *transcript // claude and openai
	buf    []byte
	err    error
	closed bool
}

// NewWriter returns a Writer of format f to w.
func NewWriter(w io.Writer, f baagentv1.ExportFormat) (*Writer, error) {
	x := &Writer{format: f, w: w}
	switch f {
	case baagentv1.ExportFormat_EXPORT_FORMAT_CLAUDE:
		x.tr = newTranscript(&claudeSink{x: x})
	case baagentv1.ExportFormat_EXPORT_FORMAT_OPENAI:
		x.tr = newTranscript(&openaiSink{x: x})
	case baagentv1.ExportFormat_EXPORT_FORMAT_EVENTS:
	default:
		return nil, fmt.Errorf("export: unknown format %v", f)
	}
	return x, nil
}

// errClosed is returned by Add after Close.
var errClosed = errors.New("export: writer closed")

// Add takes the next event. js is the event as the event streams send it
// (the hub's Entry.JSON), used by the events format; nil renders ev here
// with the same mapping (hub.JSONOptions). An event that mapping cannot
// render (which the hub never delivers) is refused with an error that
// leaves the Writer usable; an error of the io.Writer ends it.
func (x *Writer) Add(ev *baagentv1.Event, js []byte) error {
	if x.err != nil {
		return x.err
	}
	if x.closed {
		return errClosed
	}
	if x.tr != nil {
		x.err = x.tr.add(ev)
		return x.err
	}
	if js == nil {
		var err error
		if js, err = hub.JSONOptions.Marshal(ev); err != nil {
			return fmt.Errorf("export: render event %d: %w", ev.GetSeq(), err)
		}
	}
	x.buf = append(append(x.buf[:0], js...), '\n')
	return x.write()
}

// Close ends the document: calls still without a result get one saying
// why, and the JSON array is closed. It does not close the io.Writer.
func (x *Writer) Close() error {
	if x.err != nil {
		return x.err
	}
	if x.closed {
		return nil
	}
	x.closed = true
	if x.tr != nil {
		x.err = x.tr.finish()
	}
	return x.err
}

// write writes x.buf.
func (x *Writer) write() error {
	if x.err != nil {
		return x.err
	}
	if _, err := x.w.Write(x.buf); err != nil {
		x.err = err
	}
	return x.err
}

// array writes JSON array elements, one per line: "[\n", elements
// separated by ",\n", "\n]\n" (or "[]\n" when empty).
type array struct {
	n int
}

func (a *array) begin(b []byte) []byte {
	if a.n == 0 {
		b = append(b, "[\n"...)
	} else {
		b = append(b, ",\n"...)
	}
	a.n++
	return b
}

func (a *array) end(b []byte) []byte {
	if a.n == 0 {
		return append(b, "[]\n"...)
	}
	return append(b, "\n]\n"...)
}

// claudeSink writes Claude messages: {"role":…,"content":[blocks]}.
// Consecutive messages of one role are merged into one (a run's results
// and the next run's request are one user message), so it holds the last
// message until one of the other role comes.
type claudeSink struct {
	x    *Writer
	arr  array
	role string // of the held message; "" when none
	held []byte // its blocks, comma separated
}

func (s *claudeSink) block(role string) {
	if s.role != role {
		s.flush()
		s.role = role
	}
	if len(s.held) > 0 {
		s.held = append(s.held, ',')
	}
}

func (s *claudeSink) flush() {
	if s.role == "" {
		return
	}
	b := s.arr.begin(s.x.buf[:0])
	b = append(b, `{"role":`...)
	b = appendString(b, s.role)
	b = append(b, `,"content":[`...)
	b = append(b, s.held...)
	b = append(b, "]}"...)
	s.x.buf = b
	s.role, s.held = "", s.held[:0]
	_ = s.x.write()
}

func (s *claudeSink) text(role, text string) {
	s.block(role)
	s.held = append(s.held, `{"type":"text","text":`...)
	s.held = appendString(s.held, text)
	s.held = append(s.held, '}')
}

func (s *claudeSink) user(text string) error {
	s.text("user", text)
	return s.x.err
}

func (s *claudeSink) assistant(thinking, text string, calls []*call) error {
	if thinking != "" {
		s.block("assistant")
		s.held = append(s.held, `{"type":"thinking","thinking":`...)
		s.held = appendString(s.held, thinking)
		s.held = append(s.held, '}')
	}
	if text != "" {
		s.text("assistant", text)
	}
	for _, c := range calls {
		s.block("assistant")
		s.held = append(s.held, `{"type":"tool_use","id":`...)
		s.held = appendString(s.held, c.id)
		s.held = append(s.held, `,"name":`...)
		s.held = appendString(s.held, c.name)
		s.held = append(s.held, `,"input":`...)
		if c.input == nil && c.raw != "" {
			// Not a JSON object: kept verbatim, as a string.
			s.held = append(s.held, `{"raw_arguments":`...)
			s.held = appendString(s.held, c.raw)
			s.held = append(s.held, '}')
		} else {
			s.held = appendStruct(s.held, c.input)
		}
		s.held = append(s.held, '}')
	}
	return s.x.err
}

func (s *claudeSink) results(calls []*call) error {
	for _, c := range calls {
		s.block("user")
		s.held = append(s.held, `{"type":"tool_result","tool_use_id":`...)
		s.held = appendString(s.held, c.id)
		s.held = append(s.held, `,"content":`...)
		s.held = appendString(s.held, c.result)
		s.held = append(s.held, `,"is_error":`...)
		if c.isError {
			s.held = append(s.held, "true}"...)
		} else {
			s.held = append(s.held, "false}"...)
		}
	}
	return s.x.err
}

func (s *claudeSink) end() error {
	s.flush()
	if s.x.err != nil {
		return s.x.err
	}
	s.x.buf = s.arr.end(s.x.buf[:0])
	return s.x.write()
}

// openaiSink writes Chat Completions messages.
type openaiSink struct {
	x   *Writer
	arr array
}

func (s *openaiSink) user(text string) error {
	b := s.arr.begin(s.x.buf[:0])
	b = append(b, `{"role":"user","content":`...)
	b = appendString(b, text)
	b = append(b, '}')
	s.x.buf = b
	return s.x.write()
}

// assistant writes the message's text and tool calls; the reasoning has
// no place in a Chat Completions message, and a message that would be
// only reasoning is left out.
func (s *openaiSink) assistant(_ string, text string, calls []*call) error {
	if text == "" && len(calls) == 0 {
		return nil
	}
	b := s.arr.begin(s.x.buf[:0])
	b = append(b, `{"role":"assistant","content":`...)
	if text == "" {
		b = append(b, "null"...)
	} else {
		b = appendString(b, text)
	}
	if len(calls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		var args []byte
		for i, c := range calls {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = appendString(b, c.id)
			b = append(b, `,"type":"function","function":{"name":`...)
			b = appendString(b, c.name)
			b = append(b, `,"arguments":`...)
			args = c.arguments(args[:0])
			b = appendString(b, string(args))
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	b = append(b, '}')
	s.x.buf = b
	return s.x.write()
}

func (s *openaiSink) results(calls []*call) error {
	for _, c := range calls {
		b := s.arr.begin(s.x.buf[:0])
		b = append(b, `{"role":"tool","tool_call_id":`...)
		b = appendString(b, c.id)
		b = append(b, `,"content":`...)
		b = appendString(b, c.result)
		b = append(b, '}')
		s.x.buf = b
		if err := s.x.write(); err != nil {
			return err
		}
	}
	return nil
}

func (s *openaiSink) end() error {
	s.x.buf = s.arr.end(s.x.buf[:0])
	return s.x.write()
}

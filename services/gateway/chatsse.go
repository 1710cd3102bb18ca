package gateway

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// chatSSE writes the data-only Server-Sent Events of the chat interfaces
// (OpenAI chunks, AI SDK UI message chunks): each write within the
// gateway's write timeout, flushed at once. These streams are per request
// (one client, one turn), so they go through the ResponseWriter rather
// than the shared fan-out of the event streams.
type chatSSE struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	started bool
	buf     []byte // the frame being written, reused
}

func newChatSSE(w http.ResponseWriter, timeout time.Duration) *chatSSE {
	return &chatSSE{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

// start sends the 200 response head with extra headers.
func (o *chatSSE) start() {
	if o.started {
		return
	}
	o.started = true
	h := o.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	o.w.WriteHeader(http.StatusOK)
}

// data sends one `data:` event; payload is one line of JSON (or [DONE]).
func (o *chatSSE) data(payload []byte) error {
	o.buf = append(append(append(o.buf[:0], "data: "...), payload...), '\n', '\n')
	err := o.raw(o.buf)
	if cap(o.buf) > 64<<10 {
		o.buf = nil // do not keep a large event's buffer for the whole turn
	}
	return err
}

// comment sends a keep-alive comment.
func (o *chatSSE) comment() error { return o.raw([]byte(": heartbeat\n\n")) }

func (o *chatSSE) raw(b []byte) error {
	o.start()
	_ = o.rc.SetWriteDeadline(time.Now().Add(o.timeout))
	if _, err := o.w.Write(b); err != nil {
		return err
	}
	return o.rc.Flush()
}

// statusInfo is what an HTTP error response needs from a gRPC status:
// the HTTP status, the first field named, and the retry delay in whole
// seconds (0: none).
func statusInfo(err error) (st *status.Status, code int, field string, retryAfter int) {
	st = status.Convert(err)
	code = httpStatus(st.Code())
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if c, ok := reasonStatus[d.GetReason()]; ok {
				code = c
			}
		case *errdetails.BadRequest:
			if v := d.GetFieldViolations(); len(v) > 0 && field == "" {
				field = v[0].GetField()
			}
		case *errdetails.RetryInfo:
			if d.GetRetryDelay() != nil {
				retryAfter = max(1, int(math.Ceil(d.GetRetryDelay().AsDuration().Seconds())))
			}
		}
	}
	return st, code, field, retryAfter
}

// setErrorHeaders sets the headers an error response carries.
func setErrorHeaders(w http.ResponseWriter, st *status.Status, retryAfter int) {
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	if st.Code() == codes.Unauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="baagent"`)
	}
}

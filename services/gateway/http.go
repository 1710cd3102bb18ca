package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/tracing"
	"github.com/baagent/baagent/internal/validate"
	"github.com/baagent/baagent/services/gateway/internal/hub"
)

// The HTTP/JSON API mirrors the gRPC API; bodies are the protobuf JSON
// mapping with the .proto field names. Errors are
// {"error":{"code":"NOT_FOUND","message":"…","fields":[{"field":"run_id","description":"required"}]}}
// with the HTTP status of the gRPC code.

var unmarshalJSON = protojson.UnmarshalOptions{}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	// The API routes are traced (one server span per request, named by
	// its route; an SSE or WebSocket span lasts as long as the stream),
	// the health check and the dashboard's static files are not.
	api := func(pattern string, h http.HandlerFunc) {
		if !tracing.Enabled(s.opts.TracerProvider) {
			mux.Handle(pattern, h)
			return
		}
		mux.Handle(pattern, otelhttp.NewHandler(h, pattern,
			otelhttp.WithTracerProvider(s.opts.TracerProvider),
			otelhttp.WithPropagators(tracing.Propagator()),
			otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
			otelhttp.WithSpanNameFormatter(func(op string, _ *http.Request) string { return op })))
	}
	api("POST /v1/runs", s.httpStartRun)
	api("GET /v1/runs", s.httpListRuns)
	api("GET /v1/runs/{run_id}", s.httpGetRun)
	api("POST /v1/runs/{run_id}/cancel", s.httpCancelRun)
	api("POST /v1/runs/{run_id}/input", s.httpSubmitInput)
	api("GET /v1/runs/{run_id}/events", s.httpSSE)
	api("GET /v1/runs/{run_id}/ws", s.httpWebSocket)
	api("GET /v1/skills", s.httpListSkills)
	api("GET /v1/skills/{name}", s.httpGetSkill)
	api("PUT /v1/skills/{name}", s.httpPutSkill)
	api("DELETE /v1/skills/{name}", s.httpDeleteSkill)
	api("PUT /v1/skills/{name}/state", s.httpSetSystemSkillState)
	api("GET /v1/tools", s.httpListTools)
	api("POST /v1/tokens/count", s.httpCountTokens)
	api("POST /v1/auth/stream-token", s.httpStreamToken)
	api("GET /v1/whoami", s.httpWhoAmI)
	api("GET /v1/runs/{run_id}/export", s.httpExportRun)
	api("GET /v1/conversations/{conversation_id}/export", s.httpExportConversation)
	api("GET /v1/usage", s.httpGetUsage)
	api("GET /v1/admin/tenants/{tenant}/budget", s.httpGetBudget)
	api("PUT /v1/admin/tenants/{tenant}/budget", s.httpPutBudget)
	api("DELETE /v1/admin/tenants/{tenant}/budget", s.httpDeleteBudget)
	s.chatRoutes(api)
	s.conversationRoutes(api)
	s.mcpAuthRoutes(api)
	s.memoryRoutes(api)
	s.patternRoutes(api)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.Handle("GET /", dashboardHandler())
	mux.Handle("GET /console", consoleHandler(s.consoleM))
	mux.Handle("GET /console/", consoleHandler(s.consoleM))
	return securityHeaders(s.bodyDeadline(s.browserGuard(mux)))
}

// securityHeaders applies the headers every response carries.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// readBody decodes a JSON body into m; an empty body leaves m empty.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, m proto.Message) error {
	data, err := s.readLimited(w, r, s.opts.MaxBodyBytes)
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil
	}
	if err := unmarshalJSON.Unmarshal(data, m); err != nil {
		return fieldError("body", "invalid JSON for "+string(m.ProtoReflect().Descriptor().Name())+": "+err.Error())
	}
	return nil
}

// readLimited reads the whole body, at most limit bytes: a larger one is
// 413, one that does not arrive within the body read timeout 408.
func (s *Server) readLimited(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	data, err := readAllSized(http.MaxBytesReader(w, r.Body, limit), r.ContentLength, limit)
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return nil, bodyTooLarge(mbe.Limit)
		case isTimeout(err):
			return nil, s.bodyTimeout()
		}
		return nil, status.Errorf(codes.InvalidArgument, "read body: %v", err)
	}
	// The body is in: lift bodyDeadline's read deadline, so that it
	// cannot end the connection (and the request's context) during a
	// slow call. net/http clears it too when it starts watching for the
	// client going away, but that is its internal detail.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	return data, nil
}

// readAllSized reads r to the end into a buffer sized by the request's
// Content-Length when it declares one within limit, instead of growing
// one by doubling (which costs about three times the body for a large
// upload). The declared length is only a hint: r still stops at limit.
func readAllSized(r io.Reader, contentLength, limit int64) ([]byte, error) {
	if contentLength <= 0 || contentLength > limit {
		return io.ReadAll(r)
	}
	buf := bytes.NewBuffer(make([]byte, 0, contentLength+bytes.MinRead))
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

// reasonTooLarge marks a ResourceExhausted status that HTTP answers 413.
const reasonTooLarge = "REQUEST_TOO_LARGE"

// bodyTooLarge refuses a body over the limit: ResourceExhausted naming the
// field, answered over HTTP as 413 Content Too Large.
func bodyTooLarge(limit int64) error {
	st := status.New(codes.ResourceExhausted, "request body too large: it must be at most "+strconv.FormatInt(limit, 10)+" bytes")
	br := &errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{
		Field: "body", Description: "must be at most " + strconv.FormatInt(limit, 10) + " bytes",
	}}}
	if d, err := st.WithDetails(br, &errdetails.ErrorInfo{Reason: reasonTooLarge, Domain: "baagent.dev"}); err == nil {
		st = d
	}
	return st.Err()
}

func fieldError(field, desc string) error {
	var e validate.Errors
	e.Add(field, desc)
	return e.Err()
}

// writeProto writes m as JSON with the proto field names.
func writeProto(w http.ResponseWriter, code int, m proto.Message) {
	data, err := hub.JSONOptions.Marshal(m)
	if err != nil {
		writeError(w, status.Errorf(codes.Internal, "render response: %v", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(data, '\n'))
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string       `json:"code"`
	Message string       `json:"message"`
	Fields  []fieldIssue `json:"fields,omitempty"`
}

type fieldIssue struct {
	Field       string `json:"field"`
	Description string `json:"description"`
}

// reasonStatus maps the ErrorInfo reasons whose HTTP status is more
// precise than their gRPC code's.
var reasonStatus = map[string]int{
	reasonTooLarge:         http.StatusRequestEntityTooLarge,
	reasonBodyTimeout:      http.StatusRequestTimeout,
	reasonMediaType:        http.StatusUnsupportedMediaType,
	reasonPeerMessageLarge: http.StatusBadGateway,
	reasonPrecondition:     http.StatusPreconditionFailed,
}

// writeError writes a gRPC status as an HTTP error.
func writeError(w http.ResponseWriter, err error) {
	st := status.Convert(err)
	body := errorBody{Error: errorDetail{Code: st.Code().String(), Message: st.Message()}}
	body.Error.Code = codeName(st.Code())
	code := httpStatus(st.Code())
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			if c, ok := reasonStatus[ei.GetReason()]; ok {
				code = c
			}
		}
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				body.Error.Fields = append(body.Error.Fields, fieldIssue{v.GetField(), v.GetDescription()})
			}
		}
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			// Whole seconds, rounded up: never earlier than the hint.
			secs := math.Ceil(ri.GetRetryDelay().AsDuration().Seconds())
			w.Header().Set("Retry-After", strconv.Itoa(max(1, int(secs))))
		}
	}
	if st.Code() == codes.Unauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="baagent"`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// codeName is the upper snake case name of a code (NOT_FOUND), as in the
// gRPC spec and google.rpc.Code.
func codeName(c codes.Code) string {
	switch c {
	case codes.OK:
		return "OK"
	case codes.Canceled:
		return "CANCELLED"
	}
	var b strings.Builder
	for i, r := range c.String() {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

// httpStatus maps a gRPC code to an HTTP status (as grpc-gateway does).
func httpStatus(c codes.Code) int {
	switch c {
	case codes.OK:
		return http.StatusOK
	case codes.Canceled:
		return 499
	case codes.InvalidArgument, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists, codes.Aborted:
		return http.StatusConflict
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.FailedPrecondition:
		return http.StatusBadRequest
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// runState parses a state filter: the enum name (RUN_STATE_RUNNING) or its
// short lowercase form (running).
func runState(v string) (baagentv1.RunState, bool) {
	if n, ok := baagentv1.RunState_value[v]; ok {
		return baagentv1.RunState(n), true
	}
	if n, ok := baagentv1.RunState_value["RUN_STATE_"+strings.ToUpper(v)]; ok && v == strings.ToLower(v) {
		return baagentv1.RunState(n), true
	}
	return 0, false
}

// admitHTTP authenticates (and rate-limits) the caller of a unary HTTP
// call and takes one of its key's in-flight slots, which the caller frees
// with done. When either is refused it writes the error and returns false.
func (s *Server) admitHTTP(w http.ResponseWriter, r *http.Request) (c caller, done func(), ok bool) {
	return s.admit(w, r, s.inFlight, writeError)
}

// admit is admitHTTP with the key's slots to take and the error writer
// (the chat interfaces take a stream slot and answer in their own error
// shape).
func (s *Server) admit(w http.ResponseWriter, r *http.Request, slots *keySlots, writeErr func(http.ResponseWriter, error)) (c caller, done func(), ok bool) {
	c, err := s.httpCaller(r, false)
	if err != nil {
		writeErr(w, err)
		return caller{}, nil, false
	}
	done, err = s.hold(c, slots, apiHTTP)
	if err != nil {
		writeErr(w, err)
		return caller{}, nil, false
	}
	return c, done, true
}

// serveJSON authenticates (and rate-limits) the caller and takes one of
// its key's in-flight slots, then reads the JSON body into body (nil: the
// call takes none), reports what validate finds (the edge validation of
// the gRPC method), and otherwise writes what call returns: a proto
// message in the proto JSON mapping, anything else with encoding/json. An
// unauthenticated request is refused before its body is read.
func (s *Server) serveJSON(w http.ResponseWriter, r *http.Request, body proto.Message, validate func() error, call func(c caller) (any, error)) {
	c, done, ok := s.admitHTTP(w, r)
	if !ok {
		return
	}
	defer done()
	if body != nil {
		if err := s.readBody(w, r, body); err != nil {
			writeError(w, err)
			return
		}
	}
	if validate != nil {
		if err := validate(); err != nil {
			writeError(w, err)
			return
		}
	}
	if err := s.ready(); err != nil {
		writeError(w, err)
		return
	}
	out, err := call(c)
	if err != nil {
		writeError(w, err)
		return
	}
	if m, ok := out.(proto.Message); ok {
		writeProto(w, http.StatusOK, m)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(out)
}

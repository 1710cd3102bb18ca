package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/metrics"
	"github.com/baagent/baagent/internal/validate"
	"github.com/baagent/baagent/services/gateway/internal/export"
	"github.com/baagent/baagent/services/gateway/internal/hub"
)

// Exports of a run or a conversation (docs/concepts/export.md): gRPC
// ExportRun / ExportConversation (server streams of chunks), and
// GET /v1/runs/{run_id}/export and GET /v1/conversations/{conversation_id}/export
// (a download). The run's events are read from JetStream as stored when
// the export starts (hub.ReadStored) and converted as they are read
// (internal/export); the document is sent in chunks of ExportChunkBytes,
// never held whole.

const (
	// ExportChunkBytes bounds one chunk of an export (a gRPC message's
	// data; the HTTP response is written in pieces of this size).
	ExportChunkBytes = 64 << 10
	// MaxExportRuns is the default of Options.MaxExportRuns: the most runs
	// one conversation export holds.
	MaxExportRuns = 10000
)

// Export kinds, the kind label of the export metrics.
const (
	exportKindRun          = "run"
	exportKindConversation = "conversation"
)

// exportMetrics count exports; every label is a fixed set.
type exportMetrics struct {
	exports *prometheus.CounterVec // by kind, format, api, code
	bytes   *prometheus.CounterVec // by format
	events  prometheus.Counter
}

func newExportMetrics(reg prometheus.Registerer) (*exportMetrics, error) {
	const ns, sub = "baagent", "gateway"
	m := &exportMetrics{
		exports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "exports_total",
			Help: "Run and conversation exports by kind (run, conversation), format (claude, openai, events), api (grpc, http) and outcome code (OK, NOT_FOUND, …).",
		}, []string{"kind", "format", "api", "code"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "export_bytes_total",
			Help: "Bytes of export documents sent, by format (claude, openai, events).",
		}, []string{"format"}),
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "export_events_total",
			Help: "Stored run events read for exports.",
		}),
	}
	for _, f := range []baagentv1.ExportFormat{baagentv1.ExportFormat_EXPORT_FORMAT_CLAUDE, baagentv1.ExportFormat_EXPORT_FORMAT_OPENAI, baagentv1.ExportFormat_EXPORT_FORMAT_EVENTS} {
		m.bytes.WithLabelValues(export.Name(f))
		for _, k := range []string{exportKindRun, exportKindConversation} {
			for _, a := range []string{apiGRPC, apiHTTP} {
				m.exports.WithLabelValues(k, export.Name(f), a, "OK")
			}
		}
	}
	if err := metrics.RegisterExclusive(reg, "gateway exports", m.exports, m.bytes, m.events); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *exportMetrics) observe(kind string, f baagentv1.ExportFormat, api string, err error) {
	name := export.Name(f)
	if name == "" {
		name = "invalid"
	}
	m.exports.WithLabelValues(kind, name, api, codeName(status.Code(err))).Inc()
}

func validateExportRun(req *baagentv1.ExportRunRequest) error {
	var e validate.Errors
	validate.RunID(&e, "run_id", req.GetRunId())
	exportFormat(&e, req.GetFormat())
	return e.Err()
}

func validateExportConversation(req *baagentv1.ExportConversationRequest) error {
	var e validate.Errors
	validate.ID(&e, "conversation_id", req.GetConversationId())
	exportFormat(&e, req.GetFormat())
	return e.Err()
}

func exportFormat(e *validate.Errors, f baagentv1.ExportFormat) {
	if !export.Valid(f) {
		e.Add("format", "required: must be claude, openai or events (EXPORT_FORMAT_CLAUDE, EXPORT_FORMAT_OPENAI, EXPORT_FORMAT_EVENTS)")
	}
}

// exportSink is where an export's document goes: start is called once,
// before the first byte, and may refuse (the response has not begun);
// the bytes follow through Write.
type exportSink interface {
	io.Writer
	start(contentType, filename string) error
}

// exportRun checks that tenant owns the run, then converts its stored
// events to out.
func (s *Server) exportRun(ctx context.Context, tenant, runID string, f baagentv1.ExportFormat, out exportSink) error {
	if err := s.exportReady(); err != nil {
		return err
	}
	if _, err := s.getRun(ctx, tenant, &baagentv1.GetRunRequest{RunId: runID}); err != nil {
		return err
	}
	if err := out.start(export.ContentType(f), export.Filename(exportKindRun, runID, f)); err != nil {
		return err
	}
	w, err := export.NewWriter(out, f)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if err := s.exportEvents(ctx, tenant, runID, w); err != nil {
		return err
	}
	return exportWriteErr(ctx, w.Close())
}

// exportConversation lists the conversation's runs (all of them, oldest
// first; none is NotFound, as for another tenant's conversation) and
// converts their events to out, one run after the other.
func (s *Server) exportConversation(ctx context.Context, tenant, convID string, f baagentv1.ExportFormat, out exportSink) error {
	if err := s.exportReady(); err != nil {
		return err
	}
	runs, err := s.conversationRuns(ctx, tenant, convID)
	if err != nil {
		return err
	}
	if err := out.start(export.ContentType(f), export.Filename(exportKindConversation, convID, f)); err != nil {
		return err
	}
	w, err := export.NewWriter(out, f)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	for _, id := range runs {
		if err := s.exportEvents(ctx, tenant, id, w); err != nil {
			return err
		}
	}
	return exportWriteErr(ctx, w.Close())
}

func (s *Server) exportReady() error {
	if err := s.orchestratorReady(); err != nil {
		return err
	}
	if s.hub == nil {
		return status.Error(codes.Unavailable, "exports read the runs' events from NATS JetStream, which this gateway is not connected to")
	}
	return nil
}

// exportEvents feeds the run's stored events to w.
func (s *Server) exportEvents(ctx context.Context, tenant, runID string, w *export.Writer) error {
	m := s.exportM
	err := s.hub.ReadStored(ctx, tenant, runID, func(e *hub.Entry) error {
		m.events.Inc()
		return w.Add(e.Event, e.JSON)
	})
	switch {
	case err == nil:
		return nil
	case status.Code(err) != codes.Unknown:
		return err // the sink's own status
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	}
	return status.Errorf(codes.Unavailable, "reading the events of run %s: %v", runID, err)
}

func exportWriteErr(ctx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case status.Code(err) != codes.Unknown:
		return err
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	}
	return status.Errorf(codes.Unavailable, "writing the export: %v", err)
}

// conversationRuns lists the ids of a conversation's runs, oldest first.
func (s *Server) conversationRuns(ctx context.Context, tenant, convID string) ([]string, error) {
	type runAt struct {
		id string
		at time.Time
	}
	var runs []runAt
	token := ""
	limit := s.opts.MaxExportRuns
	// Every page but the last holds a run, so limit+1 pages reach past the
	// limit; the bound also ends a peer that pages forever.
	for page := 0; page <= limit; page++ {
		resp, err := s.listRuns(ctx, tenant, &baagentv1.ListRunsRequest{ConversationId: convID, PageSize: MaxPageSize, PageToken: token})
		if err != nil {
			return nil, err
		}
		for _, r := range resp.GetRuns() {
			if r.GetConversationId() != convID {
				continue // not the conversation's (a peer that ignores the filter)
			}
			if len(runs) == limit {
				return nil, status.Errorf(codes.ResourceExhausted,
					"conversation %s has more than %d runs, the most one export holds (max_export_runs); export its runs one by one", convID, limit)
			}
			runs = append(runs, runAt{r.GetRunId(), r.GetCreatedAt().AsTime()})
		}
		token = resp.GetNextPageToken()
		if token == "" {
			break
		}
	}
	if len(runs) == 0 {
		return nil, status.Errorf(codes.NotFound, "conversation %s not found", convID)
	}
	// Listed newest first: oldest first is the reverse, made exact by the
	// creation times.
	slices.Reverse(runs)
	slices.SortStableFunc(runs, func(a, b runAt) int { return a.at.Compare(b.at) })
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.id
	}
	return ids, nil
}

// ExportRun streams a run's export in chunks.
func (s *Server) ExportRun(req *baagentv1.ExportRunRequest, stream grpc.ServerStreamingServer[baagentv1.ExportRunResponse]) error {
	ctx := stream.Context()
	err := s.grpcExport(ctx, "ExportRun", validateExportRun(req), func(tenant string, out exportSink) error {
		return s.exportRun(ctx, tenant, req.GetRunId(), req.GetFormat(), out)
	}, func(ct, name string, data []byte) error {
		return stream.Send(&baagentv1.ExportRunResponse{ContentType: ct, Filename: name, Data: data})
	}, req.GetFormat())
	s.exportM.observe(exportKindRun, req.GetFormat(), apiGRPC, err)
	return err
}

// ExportConversation streams a conversation's export in chunks.
func (s *Server) ExportConversation(req *baagentv1.ExportConversationRequest, stream grpc.ServerStreamingServer[baagentv1.ExportConversationResponse]) error {
	ctx := stream.Context()
	err := s.grpcExport(ctx, "ExportConversation", validateExportConversation(req), func(tenant string, out exportSink) error {
		return s.exportConversation(ctx, tenant, req.GetConversationId(), req.GetFormat(), out)
	}, func(ct, name string, data []byte) error {
		return stream.Send(&baagentv1.ExportConversationResponse{ContentType: ct, Filename: name, Data: data})
	}, req.GetFormat())
	s.exportM.observe(exportKindConversation, req.GetFormat(), apiGRPC, err)
	return err
}

func (s *Server) grpcExport(ctx context.Context, rpc string, invalid error, run func(tenant string, out exportSink) error,
	send func(contentType, filename string, data []byte) error, f baagentv1.ExportFormat) error {
	c, err := s.grpcCaller(ctx)
	if err != nil {
		return err
	}
	if invalid != nil {
		return s.rejected(ctx, rpc, invalid)
	}
	done, err := s.hold(c, s.inFlight, apiGRPC)
	if err != nil {
		return err
	}
	defer done()
	out := &grpcExportSink{send: send, timeout: s.opts.WriteTimeout, bytes: s.exportM.bytes.WithLabelValues(export.Name(f))}
	if err := run(c.tenant, out); err != nil {
		return err
	}
	if err := out.flush(); err != nil {
		return exportWriteErr(ctx, err)
	}
	s.log.DebugContext(ctx, "export sent", "rpc", rpc, "tenant", c.tenant, "format", export.Name(f), "bytes", out.total)
	return nil
}

// grpcExportSink sends the document as messages of at most
// ExportChunkBytes; the first carries the content type and file name (and
// is sent even when the document is empty).
type grpcExportSink struct {
	send        func(contentType, filename string, data []byte) error
	timeout     time.Duration
	bytes       prometheus.Counter
	contentType string
	filename    string
	buf         []byte
	sent        bool
	total       int
}

func (g *grpcExportSink) start(contentType, filename string) error {
	g.contentType, g.filename = contentType, filename
	g.buf = make([]byte, 0, ExportChunkBytes)
	return nil
}

func (g *grpcExportSink) Write(p []byte) (int, error) { return writeChunked(&g.buf, p, g.sendBuf) }

// writeChunked appends p to *buf, calling emit each time *buf holds
// ExportChunkBytes (emit sends *buf and leaves it empty). It reports the
// bytes of p taken before an error.
func writeChunked(buf *[]byte, p []byte, emit func() error) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), ExportChunkBytes-len(*buf))
		*buf = append(*buf, p[:k]...)
		p = p[k:]
		if len(*buf) == ExportChunkBytes {
			if err := emit(); err != nil {
				return n - len(p), err
			}
		}
	}
	return n, nil
}

func (g *grpcExportSink) flush() error {
	if len(g.buf) > 0 || !g.sent {
		return g.sendBuf()
	}
	return nil
}

// sendBuf sends the buffer as one message. A client that does not take it
// within the write timeout fails the export: returning ends the RPC,
// which ends the blocked send and its goroutine.
func (g *grpcExportSink) sendBuf() error {
	ct, name := "", ""
	if !g.sent {
		ct, name = g.contentType, g.filename
	}
	data := g.buf
	done := make(chan error, 1)
	go func() { done <- g.send(ct, name, data) }()
	t := time.NewTimer(g.timeout)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			return err
		}
	case <-t.C:
		return status.Errorf(codes.DeadlineExceeded, "the client did not take the next %d bytes of the export within %s", len(data), g.timeout)
	}
	g.sent = true
	g.total += len(data)
	g.bytes.Add(float64(len(data)))
	g.buf = make([]byte, 0, ExportChunkBytes) // the sent slice may still be read by gRPC
	return nil
}

// httpExportRun is GET /v1/runs/{run_id}/export?format=….
func (s *Server) httpExportRun(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.ExportRunRequest{RunId: r.PathValue("run_id")}
	s.httpExport(w, r, exportKindRun, &req.Format, func() error { return validateExportRun(req) }, func(tenant string, out exportSink) error {
		return s.exportRun(r.Context(), tenant, req.GetRunId(), req.GetFormat(), out)
	})
}

// httpExportConversation is GET /v1/conversations/{conversation_id}/export?format=….
func (s *Server) httpExportConversation(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.ExportConversationRequest{ConversationId: r.PathValue("conversation_id")}
	s.httpExport(w, r, exportKindConversation, &req.Format, func() error { return validateExportConversation(req) }, func(tenant string, out exportSink) error {
		return s.exportConversation(r.Context(), tenant, req.GetConversationId(), req.GetFormat(), out)
	})
}

// httpExport serves an export as a download. The dashboard's links
// authenticate with a stream token (?token=), as its event streams do.
// Until the first ExportChunkBytes are ready nothing is sent, so an error
// up to then is an ordinary error response; one after that aborts the
// response (the client sees a broken transfer, never a short document
// that looks whole).
func (s *Server) httpExport(w http.ResponseWriter, r *http.Request, kind string, format *baagentv1.ExportFormat, validate func() error, run func(tenant string, out exportSink) error) {
	f := baagentv1.ExportFormat_EXPORT_FORMAT_UNSPECIFIED
	var err error
	defer func() { s.exportM.observe(kind, f, apiHTTP, err) }()
	c, err := s.httpCaller(r, true)
	if err != nil {
		writeError(w, err)
		return
	}
	if v := r.URL.Query().Get("format"); v != "" {
		var ok bool
		if f, ok = export.ParseFormat(v); !ok {
			err = fieldError("format", "must be claude, openai or events, not "+quoteShort(v))
			writeError(w, err)
			return
		}
	}
	*format = f
	if err = validate(); err != nil {
		writeError(w, err)
		return
	}
	done, err := s.hold(c, s.inFlight, apiHTTP)
	if err != nil {
		writeError(w, err)
		return
	}
	defer done()
	out := &httpExportSink{w: w, rc: http.NewResponseController(w), timeout: s.opts.WriteTimeout, bytes: s.exportM.bytes.WithLabelValues(export.Name(f))}
	if err = run(c.tenant, out); err == nil {
		err = out.flush()
	}
	if err == nil {
		s.log.DebugContext(r.Context(), "export sent", "kind", kind, "tenant", c.tenant, "format", export.Name(f), "bytes", out.total)
		return
	}
	if !out.committed {
		writeError(w, err)
		return
	}
	s.log.LogAttrs(r.Context(), slog.LevelWarn, "export aborted after it began", slog.String("kind", kind), slog.String("tenant", c.tenant), slog.Any("error", err))
	// net/http's documented way to abort a response: the connection is
	// reset (HTTP/1.1) or the stream cancelled (HTTP/2), so the client
	// cannot mistake the part it got for the whole document.
	panic(http.ErrAbortHandler)
}

// quoteShort quotes v, cut to 64 bytes.
func quoteShort(v string) string {
	if len(v) > 64 {
		v = v[:64] + "…"
	}
	return fmt.Sprintf("%q", v)
}

// httpExportSink buffers the first ExportChunkBytes before it commits to
// a 200 response, then writes in pieces of that size under the write
// timeout.
type httpExportSink struct {
	w           http.ResponseWriter
	rc          *http.ResponseController
	timeout     time.Duration
	bytes       prometheus.Counter
	contentType string
	filename    string
	buf         []byte
	committed   bool
	total       int
}

func (h *httpExportSink) start(contentType, filename string) error {
	h.contentType, h.filename = contentType, filename
	h.buf = make([]byte, 0, ExportChunkBytes)
	return nil
}

func (h *httpExportSink) Write(p []byte) (int, error) { return writeChunked(&h.buf, p, h.writeBuf) }

func (h *httpExportSink) flush() error {
	if len(h.buf) > 0 || !h.committed {
		if err := h.writeBuf(); err != nil {
			return err
		}
	}
	// No deadline left behind for the connection's next request.
	_ = h.rc.SetWriteDeadline(time.Time{})
	return nil
}

func (h *httpExportSink) writeBuf() error {
	if !h.committed {
		hd := h.w.Header()
		hd.Set("Content-Type", h.contentType)
		hd.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": h.filename}))
		hd.Set("Cache-Control", "no-store")
		h.committed = true
		h.w.WriteHeader(http.StatusOK)
	}
	if len(h.buf) == 0 {
		return nil
	}
	_ = h.rc.SetWriteDeadline(time.Now().Add(h.timeout))
	n, err := h.w.Write(h.buf)
	h.total += n
	h.bytes.Add(float64(n))
	h.buf = h.buf[:0]
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return status.FromContextError(err).Err()
		}
		return status.Errorf(codes.Unavailable, "writing the export to the client: %v", err)
	}
	return nil
}

package gateway

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func TestGRPCExportSinkChunks(t *testing.T) {
	type msg struct {
		ct, name string
		data     []byte
	}
	var sent []msg
	g := &grpcExportSink{timeout: time.Minute, bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "x"}),
		send: func(ct, name string, data []byte) error {
			sent = append(sent, msg{ct, name, data})
			return nil
		}}
	if err := g.start("application/json", "run-1.claude.json"); err != nil {
		t.Fatal(err)
	}
	doc := bytes.Repeat([]byte("0123456789abcdef"), (2*ExportChunkBytes+100)/16)
	for p := doc; len(p) > 0; {
		n := min(len(p), 1000)
		if _, err := g.Write(p[:n]); err != nil {
			t.Fatal(err)
		}
		p = p[n:]
	}
	if err := g.flush(); err != nil {
		t.Fatal(err)
	}
	var got []byte
	for i, m := range sent {
		if (i == 0) != (m.ct == "application/json" && m.name == "run-1.claude.json") || len(m.data) > ExportChunkBytes {
			t.Errorf("chunk %d: %q %q, %d bytes", i, m.ct, m.name, len(m.data))
		}
		got = append(got, m.data...)
	}
	if len(sent) != 3 || !bytes.Equal(got, doc) || g.total != len(doc) {
		t.Errorf("%d chunks, %d of %d bytes", len(sent), len(got), len(doc))
	}

	// An empty document is one chunk with the content type.
	sent = nil
	g = &grpcExportSink{timeout: time.Minute, bytes: g.bytes, send: g.send}
	_ = g.start("application/x-ndjson", "run-1.events.jsonl")
	if err := g.flush(); err != nil || len(sent) != 1 || sent[0].ct != "application/x-ndjson" || len(sent[0].data) != 0 {
		t.Errorf("empty document: %v, %+v", err, sent)
	}

	// A client that does not take a chunk fails the export.
	block := make(chan struct{})
	defer close(block)
	g = &grpcExportSink{timeout: 10 * time.Millisecond, bytes: g.bytes, send: func(string, string, []byte) error { <-block; return nil }}
	_ = g.start("application/json", "x.json")
	if err := g.flush(); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("blocked client: %v, want DeadlineExceeded", err)
	}
}

func TestHTTPExportSinkCommitsAfterTheFirstChunk(t *testing.T) {
	rec := httptest.NewRecorder()
	h := &httpExportSink{w: rec, rc: http.NewResponseController(rec), timeout: time.Minute, bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})}
	if err := h.start("application/x-ndjson", "conversation-c.events.jsonl"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Write(bytes.Repeat([]byte("x"), ExportChunkBytes-1)); err != nil {
		t.Fatal(err)
	}
	// Nothing sent yet: an error now is still an ordinary error response.
	if h.committed || rec.Body.Len() != 0 {
		t.Fatalf("committed %v with %d bytes before the first chunk was full", h.committed, rec.Body.Len())
	}
	if _, err := h.Write([]byte("yz")); err != nil {
		t.Fatal(err)
	}
	if !h.committed || rec.Code != http.StatusOK || rec.Body.Len() != ExportChunkBytes {
		t.Fatalf("after the first chunk: committed %v, status %d, %d bytes", h.committed, rec.Code, rec.Body.Len())
	}
	if err := h.flush(); err != nil {
		t.Fatal(err)
	}
	hd := rec.Result().Header
	if rec.Body.Len() != ExportChunkBytes+1 || hd.Get("Content-Type") != "application/x-ndjson" ||
		hd.Get("Content-Disposition") != "attachment; filename=conversation-c.events.jsonl" || hd.Get("Cache-Control") != "no-store" {
		t.Errorf("%d bytes, header %v", rec.Body.Len(), hd)
	}
}

func TestHTTPExportFailingAfterItBeganAbortsTheTransfer(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := testCtx(t)
	failAt := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var f baagentv1.ExportFormat
		e.srv.httpExport(w, r, exportKindRun, &f, func() error { return nil }, func(_ string, out exportSink) error {
			if err := out.start("application/json", "run-x.claude.json"); err != nil {
				return err
			}
			if _, err := out.Write(bytes.Repeat([]byte("x"), failAt)); err != nil {
				return err
			}
			return status.Error(codes.Unavailable, "the event store went away")
		})
	}))
	defer srv.Close()
	get := func() (*http.Response, []byte, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"?format=claude", nil)
		req.Header.Set("Authorization", "Bearer "+keyAcme)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp, body, err
	}
	// Before the first chunk went out: an ordinary error response.
	failAt = 100
	resp, body, err := get()
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "the event store went away") {
		t.Fatalf("early failure: %v, %v %s", err, resp, body)
	}
	// After: the transfer breaks, so the part received cannot pass for
	// the whole document.
	failAt = 3 * ExportChunkBytes
	resp, body, err = get()
	if err == nil {
		t.Fatalf("late failure read as a whole response: status %d, %d bytes", resp.StatusCode, len(body))
	}
	if got := testutil.ToFloat64(e.srv.exportM.exports.WithLabelValues(exportKindRun, "claude", apiHTTP, "UNAVAILABLE")); got != 2 {
		t.Errorf("exports_total{UNAVAILABLE} = %v, want 2", got)
	}
}

package tracing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Reading traces back from Jaeger's query API. The API v3 (/api/v3/…)
// answers in the OTLP JSON encoding ({"result": TracesData}): parent span
// ids and links are explicit, as the exporters sent them. The API v1
// (/api/traces…, the UI's) answers with Jaeger's model: a span's parent is
// its CHILD_OF reference, its links are FOLLOWS_FROM references, and its
// service is that of its process; it is read too, to check that the UI
// shows what the exporters sent.

// Span is one span as the query API returns it.
type Span struct {
	TraceID, SpanID string // lowercase hex
	// ParentSpanID is empty for a root span.
	ParentSpanID string
	Name         string
	// Kind is the OTLP span kind: 1 internal, 2 server, 3 client,
	// 4 producer, 5 consumer (0 unspecified).
	Kind int
	// Service is the resource's (v1: the process's) service.name.
	Service    string
	Start, End time.Time
	// Attrs are the span's attributes, Resource its resource's, each
	// value as text (numbers and booleans formatted, arrays as JSON).
	Attrs, Resource map[string]string
	Links           []Link
	// StatusCode is the OTLP status: 0 unset, 1 ok, 2 error.
	StatusCode int
}

// Link is a span link (v1: a FOLLOWS_FROM reference, or a CHILD_OF one
// beyond the first).
type Link struct{ TraceID, SpanID string }

// Span kinds (OTLP).
const (
	KindInternal = 1
	KindServer   = 2
	KindClient   = 3
	KindProducer = 4
	KindConsumer = 5
)

// Trace is the spans of one trace id.
type Trace struct {
	ID    string
	Spans []Span
}

// errNotFound is what the query API answers for a trace it does not have.
var errNotFound = errors.New("not found")

// TraceQuery selects traces for FindTraces.
type TraceQuery struct {
	Service   string // required
	Operation string // span name, optional
	// Since and Until bound the traces' start (default: the last hour).
	Since, Until time.Time
	Limit        int // default 1000
}

// GetTrace reads one trace through the API v3 (errNotFound if Jaeger has
// no span of it).
func (j *Jaeger) GetTrace(ctx context.Context, traceID string) (*Trace, error) {
	var resp v3Response
	if err := j.getJSON(ctx, "/api/v3/traces/"+url.PathEscape(traceID), nil, &resp); err != nil {
		return nil, err
	}
	traces := resp.traces()
	if len(traces) != 1 || traces[0].ID != strings.ToLower(traceID) {
		return nil, fmt.Errorf("GET trace %s: got %d traces %v", traceID, len(traces), traceIDs(traces))
	}
	return traces[0], nil
}

// FindTraces searches traces through the API v3: every trace that has a
// span of q.Service (named q.Operation, if given) starting in the window,
// each with all its spans. None found is an empty result.
func (j *Jaeger) FindTraces(ctx context.Context, q TraceQuery) ([]*Trace, error) {
	until := q.Until
	if until.IsZero() {
		until = time.Now().Add(time.Minute)
	}
	since := q.Since
	if since.IsZero() {
		since = until.Add(-time.Hour)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 1000
	}
	params := url.Values{
		"query.service_name":   {q.Service},
		"query.start_time_min": {since.UTC().Format(time.RFC3339Nano)},
		"query.start_time_max": {until.UTC().Format(time.RFC3339Nano)},
		"query.num_traces":     {strconv.Itoa(limit)},
	}
	if q.Operation != "" {
		params.Set("query.operation_name", q.Operation)
	}
	var resp v3Response
	if err := j.getJSON(ctx, "/api/v3/traces", params, &resp); err != nil {
		if errors.Is(err, errNotFound) {
			return nil, nil
		}
		return nil, err
	}
	return resp.traces(), nil
}

// Services lists the services Jaeger has spans of (API v3).
func (j *Jaeger) Services(ctx context.Context) ([]string, error) {
	var resp struct {
		Services []string `json:"services"`
	}
	if err := j.getJSON(ctx, "/api/v3/services", nil, &resp); err != nil {
		return nil, err
	}
	slices.Sort(resp.Services)
	return resp.Services, nil
}

// GetTraceV1 reads one trace through the API v1 (the UI's).
func (j *Jaeger) GetTraceV1(ctx context.Context, traceID string) (*Trace, error) {
	var resp v1Response
	if err := j.getJSON(ctx, "/api/traces/"+url.PathEscape(traceID), nil, &resp); err != nil {
		return nil, err
	}
	traces, err := resp.traces()
	if err != nil {
		return nil, err
	}
	if len(traces) != 1 {
		return nil, fmt.Errorf("GET v1 trace %s: got %d traces %v", traceID, len(traces), traceIDs(traces))
	}
	return traces[0], nil
}

// FindTracesV1 searches the traces of a service through the API v1 (the
// UI's search, over its default look-back).
func (j *Jaeger) FindTracesV1(ctx context.Context, service string, limit int) ([]*Trace, error) {
	var resp v1Response
	if err := j.getJSON(ctx, "/api/traces", url.Values{"service": {service}, "limit": {strconv.Itoa(limit)}}, &resp); err != nil {
		return nil, err
	}
	return resp.traces()
}

// getJSON GETs path from the query API and decodes the JSON answer into v;
// a 404 is errNotFound.
func (j *Jaeger) getJSON(ctx context.Context, path string, params url.Values, v any) error {
	u := j.QueryURL + path
	if len(params) > 0 {
		u += "?" + params.Encode()
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("GET %s: %w: %s", u, errNotFound, strings.TrimSpace(string(body)))
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("GET %s: %s: %s", u, resp.Status, tail(strings.TrimSpace(string(body)), 2000))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: decode: %w", u, err)
	}
	return nil
}

// API v3: OTLP JSON (TracesData) in "result".
type v3Response struct {
	Result struct {
		ResourceSpans []struct {
			Resource struct {
				Attributes []otlpKeyValue `json:"attributes"`
			} `json:"resource"`
			ScopeSpans []struct {
				Spans []struct {
					TraceID           string          `json:"traceId"`
					SpanID            string          `json:"spanId"`
					ParentSpanID      string          `json:"parentSpanId"`
					Name              string          `json:"name"`
					Kind              json.RawMessage `json:"kind"`
					StartTimeUnixNano json.Number     `json:"startTimeUnixNano"`
					EndTimeUnixNano   json.Number     `json:"endTimeUnixNano"`
					Attributes        []otlpKeyValue  `json:"attributes"`
					Links             []struct {
						TraceID string `json:"traceId"`
						SpanID  string `json:"spanId"`
					} `json:"links"`
					Status struct {
						Code json.RawMessage `json:"code"`
					} `json:"status"`
				} `json:"spans"`
			} `json:"scopeSpans"`
		} `json:"resourceSpans"`
	} `json:"result"`
}

type otlpKeyValue struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// traces groups the spans by trace id, in the order the ids first appear.
func (r *v3Response) traces() []*Trace {
	byID := map[string]*Trace{}
	var out []*Trace
	for _, rs := range r.Result.ResourceSpans {
		res := attrMap(rs.Resource.Attributes)
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := Span{
					TraceID: strings.ToLower(s.TraceID), SpanID: strings.ToLower(s.SpanID),
					ParentSpanID: strings.ToLower(s.ParentSpanID), Name: s.Name,
					Kind: enumValue(s.Kind, spanKinds), Service: res["service.name"],
					Start: unixNano(s.StartTimeUnixNano), End: unixNano(s.EndTimeUnixNano),
					Attrs: attrMap(s.Attributes), Resource: res,
					StatusCode: enumValue(s.Status.Code, statusCodes),
				}
				for _, l := range s.Links {
					sp.Links = append(sp.Links, Link{TraceID: strings.ToLower(l.TraceID), SpanID: strings.ToLower(l.SpanID)})
				}
				tr := byID[sp.TraceID]
				if tr == nil {
					tr = &Trace{ID: sp.TraceID}
					byID[sp.TraceID] = tr
					out = append(out, tr)
				}
				tr.Spans = append(tr.Spans, sp)
			}
		}
	}
	return out
}

var (
	spanKinds = map[string]int{
		"SPAN_KIND_UNSPECIFIED": 0, "SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2,
		"SPAN_KIND_CLIENT": 3, "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5,
	}
	statusCodes = map[string]int{"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
)

// enumValue reads a protobuf enum in JSON: a number or its name (-1 if
// neither); absent is 0.
func enumValue(raw json.RawMessage, names map[string]int) int {
	if len(raw) == 0 {
		return 0
	}
	var n int
	if json.Unmarshal(raw, &n) == nil {
		return n
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if v, ok := names[s]; ok {
			return v
		}
	}
	return -1
}

// unixNano reads a uint64 of nanoseconds (a JSON string or number).
func unixNano(n json.Number) time.Time {
	v, err := strconv.ParseInt(strings.Trim(n.String(), `"`), 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, v)
}

// attrMap turns OTLP key-values into text values.
func attrMap(kvs []otlpKeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = anyValueText(kv.Value)
	}
	return m
}

// anyValueText formats an OTLP AnyValue: strings as they are, numbers and
// booleans as Go formats them, anything else as its JSON.
func anyValueText(raw json.RawMessage) string {
	var v map[string]json.RawMessage
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	for _, key := range []string{"stringValue", "intValue", "boolValue", "doubleValue"} {
		if x, ok := v[key]; ok {
			var s string
			if json.Unmarshal(x, &s) == nil {
				return s // strings, and int64s (JSON strings)
			}
			return string(x)
		}
	}
	if len(v) == 0 {
		return ""
	}
	return string(raw)
}

// API v1: Jaeger's JSON model.
type v1Response struct {
	Data []struct {
		TraceID string `json:"traceID"`
		Spans   []struct {
			TraceID       string `json:"traceID"`
			SpanID        string `json:"spanID"`
			OperationName string `json:"operationName"`
			References    []struct {
				RefType string `json:"refType"`
				TraceID string `json:"traceID"`
				SpanID  string `json:"spanID"`
			} `json:"references"`
			StartTime int64 `json:"startTime"` // µs
			Duration  int64 `json:"duration"`  // µs
			Tags      []struct {
				Key   string `json:"key"`
				Value any    `json:"value"`
			} `json:"tags"`
			ProcessID string `json:"processID"`
		} `json:"spans"`
		Processes map[string]struct {
			ServiceName string `json:"serviceName"`
			Tags        []struct {
				Key   string `json:"key"`
				Value any    `json:"value"`
			} `json:"tags"`
		} `json:"processes"`
	} `json:"data"`
	Errors []struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
	} `json:"errors"`
}

// traces converts the model: the first CHILD_OF reference within the
// trace is the parent, every other reference a link; the span.kind tag is
// the kind.
func (r *v1Response) traces() ([]*Trace, error) {
	if len(r.Errors) > 0 {
		return nil, fmt.Errorf("query API v1 errors: %+v", r.Errors)
	}
	var out []*Trace
	for _, d := range r.Data {
		tr := &Trace{ID: strings.ToLower(d.TraceID)}
		for _, s := range d.Spans {
			p := d.Processes[s.ProcessID]
			sp := Span{
				TraceID: strings.ToLower(s.TraceID), SpanID: strings.ToLower(s.SpanID), Name: s.OperationName,
				Service: p.ServiceName,
				Start:   time.UnixMicro(s.StartTime), End: time.UnixMicro(s.StartTime + s.Duration),
				Attrs: map[string]string{}, Resource: map[string]string{"service.name": p.ServiceName},
			}
			for _, tag := range p.Tags {
				sp.Resource[tag.Key] = fmt.Sprint(tag.Value)
			}
			for _, tag := range s.Tags {
				if tag.Key == "span.kind" {
					sp.Kind = spanKinds["SPAN_KIND_"+strings.ToUpper(fmt.Sprint(tag.Value))]
					continue
				}
				sp.Attrs[tag.Key] = fmt.Sprint(tag.Value)
			}
			for _, ref := range s.References {
				if ref.RefType == "CHILD_OF" && sp.ParentSpanID == "" && strings.EqualFold(ref.TraceID, sp.TraceID) {
					sp.ParentSpanID = strings.ToLower(ref.SpanID)
					continue
				}
				sp.Links = append(sp.Links, Link{TraceID: strings.ToLower(ref.TraceID), SpanID: strings.ToLower(ref.SpanID)})
			}
			tr.Spans = append(tr.Spans, sp)
		}
		out = append(out, tr)
	}
	return out, nil
}

func traceIDs(traces []*Trace) []string {
	ids := make([]string, len(traces))
	for i, tr := range traces {
		ids[i] = tr.ID
	}
	return ids
}

// Span returns the span with id, if the trace has it.
func (tr *Trace) Span(id string) (Span, bool) {
	for _, s := range tr.Spans {
		if s.SpanID == id {
			return s, true
		}
	}
	return Span{}, false
}

// Services returns the services that have spans in the trace, sorted.
func (tr *Trace) Services() []string {
	var out []string
	for _, s := range tr.Spans {
		if !slices.Contains(out, s.Service) {
			out = append(out, s.Service)
		}
	}
	slices.Sort(out)
	return out
}

// Dangling returns the spans whose parent is not in the trace.
func (tr *Trace) Dangling() []Span {
	ids := map[string]bool{}
	for _, s := range tr.Spans {
		ids[s.SpanID] = true
	}
	var out []Span
	for _, s := range tr.Spans {
		if s.ParentSpanID != "" && !ids[s.ParentSpanID] {
			out = append(out, s)
		}
	}
	return out
}

// Roots returns the spans without a parent.
func (tr *Trace) Roots() []Span {
	var out []Span
	for _, s := range tr.Spans {
		if s.ParentSpanID == "" {
			out = append(out, s)
		}
	}
	return out
}

// Select returns the spans for which f holds.
func (tr *Trace) Select(f func(Span) bool) []Span {
	var out []Span
	for _, s := range tr.Spans {
		if f(s) {
			out = append(out, s)
		}
	}
	return out
}

// Tree renders the trace for logs and failure messages: each span (service,
// name, id, kind, duration) under its parent, in start order; spans whose
// parent is missing are at the top, marked.
func (tr *Trace) Tree() string {
	if tr == nil {
		return "(no trace)"
	}
	children := map[string][]Span{}
	ids := map[string]bool{}
	for _, s := range tr.Spans {
		ids[s.SpanID] = true
	}
	var tops []Span
	for _, s := range tr.Spans {
		if s.ParentSpanID != "" && ids[s.ParentSpanID] {
			children[s.ParentSpanID] = append(children[s.ParentSpanID], s)
		} else {
			tops = append(tops, s)
		}
	}
	byStart := func(a, b Span) int { return a.Start.Compare(b.Start) }
	var b strings.Builder
	fmt.Fprintf(&b, "trace %s: %d spans\n", tr.ID, len(tr.Spans))
	var walk func(s Span, depth int)
	walk = func(s Span, depth int) {
		b.WriteString(strings.Repeat("  ", depth))
		fmt.Fprintf(&b, "%s: %s [%s kind=%d %s]", s.Service, s.Name, s.SpanID, s.Kind, s.End.Sub(s.Start).Round(time.Microsecond))
		if depth == 0 && s.ParentSpanID != "" {
			fmt.Fprintf(&b, " (parent %s missing)", s.ParentSpanID)
		}
		for _, l := range s.Links {
			fmt.Fprintf(&b, " link→%s/%s", l.TraceID, l.SpanID)
		}
		b.WriteByte('\n')
		kids := children[s.SpanID]
		slices.SortStableFunc(kids, byStart)
		for _, k := range kids {
			walk(k, depth+1)
		}
	}
	slices.SortStableFunc(tops, byStart)
	for _, s := range tops {
		walk(s, 0)
	}
	return b.String()
}

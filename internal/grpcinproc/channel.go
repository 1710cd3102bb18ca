// Package grpcinproc is a gRPC channel to services registered in the same
// process. Generated clients built on it call the service implementation
// directly, through the same unary server interceptors (metrics, logging,
// panic recovery) a network call goes through, with the request and the
// response deep-copied so that neither side sees the other's later
// changes — but without HTTP/2 framing, loopback TCP and a serialisation
// round trip per call. `-target=all` uses it between its services; a split
// deployment dials the network as before, and the services cannot tell the
// difference: they see incoming metadata, a peer, a deadline and can set
// headers, and clients get status errors with the same codes.
package grpcinproc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/baagent/baagent/internal/tracing"
)

// DefaultMaxMsgBytes bounds one request or response, as the network
// server's default does.
const DefaultMaxMsgBytes = 16 << 20

// Options configures a Channel.
type Options struct {
	// Interceptor runs around every call, as on the network server; nil
	// calls handlers directly.
	Interceptor grpc.UnaryServerInterceptor
	// MaxMsgBytes bounds a request and a response (ResourceExhausted
	// beyond); 0 means DefaultMaxMsgBytes.
	MaxMsgBytes int
	// Logger receives the panics of handlers called without a recovering
	// interceptor; nil discards them.
	Logger *slog.Logger
	// TracerProvider traces every call with one span (what a network
	// call's client and server spans are together); the caller's span is
	// its parent, as the context is shared. Nil or no-op: no spans.
	TracerProvider trace.TracerProvider
}

// Channel is a grpc.ClientConnInterface for unary calls to the services
// registered on it (it is a grpc.ServiceRegistrar too). Streaming calls go
// to the fallback connection of their service (SetStreamFallback): the
// in-process path would save little on a long-lived stream.
type Channel struct {
	opts   Options
	log    *slog.Logger
	tracer trace.Tracer // nil without tracing

	mu        sync.RWMutex
	methods   map[string]registered // full method name → handler
	fallbacks map[string]grpc.ClientConnInterface
	closed    bool
}

type registered struct {
	impl        any
	handler     grpc.MethodHandler
	interceptor grpc.UnaryServerInterceptor
	// span is the name and start options of the method's span, built once
	// at registration (only with tracing on): a call allocates no
	// attributes nor options of its own.
	span     string
	spanOpts []trace.SpanStartOption
}

var (
	_ grpc.ClientConnInterface = (*Channel)(nil)
	_ grpc.ServiceRegistrar    = (*Channel)(nil)
)

// New returns an empty Channel.
func New(opts Options) *Channel {
	if opts.MaxMsgBytes <= 0 {
		opts.MaxMsgBytes = DefaultMaxMsgBytes
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var tracer trace.Tracer
	if tracing.Enabled(opts.TracerProvider) {
		tracer = opts.TracerProvider.Tracer("github.com/baagent/baagent/internal/grpcinproc")
	}
	return &Channel{
		opts:      opts,
		log:       log,
		tracer:    tracer,
		methods:   map[string]registered{},
		fallbacks: map[string]grpc.ClientConnInterface{},
	}
}

// RegisterService makes desc's unary methods callable on the channel,
// behind Options.Interceptor. It panics on a second registration of a
// service, like grpc.Server does.
func (c *Channel) RegisterService(desc *grpc.ServiceDesc, impl any) {
	c.register(desc, impl, c.opts.Interceptor)
}

// Registrar registers services behind their own interceptor (that of the
// network server they are also registered on, so their logs name it).
func (c *Channel) Registrar(interceptor grpc.UnaryServerInterceptor) grpc.ServiceRegistrar {
	return registrarFunc(func(desc *grpc.ServiceDesc, impl any) { c.register(desc, impl, interceptor) })
}

type registrarFunc func(desc *grpc.ServiceDesc, impl any)

func (f registrarFunc) RegisterService(desc *grpc.ServiceDesc, impl any) { f(desc, impl) }

func (c *Channel) register(desc *grpc.ServiceDesc, impl any, interceptor grpc.UnaryServerInterceptor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range desc.Methods {
		name := "/" + desc.ServiceName + "/" + m.MethodName
		if _, dup := c.methods[name]; dup {
			panic(fmt.Sprintf("grpcinproc: service %s registered twice", desc.ServiceName))
		}
		r := registered{impl: impl, handler: m.Handler, interceptor: interceptor}
		if c.tracer != nil {
			r.span, r.spanOpts = spanStart(name)
		}
		c.methods[name] = r
	}
}

// SetStreamFallback routes the streaming calls of service (its full name,
// e.g. "baagent.v1.GatewayService") to conn.
func (c *Channel) SetStreamFallback(service string, conn grpc.ClientConnInterface) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fallbacks[service] = conn
}

// Close makes every later call fail with Unavailable, as calls to a
// stopped server do.
func (c *Channel) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
}

// Invoke calls the registered handler of method with a copy of args and
// copies its response into reply.
func (c *Channel) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) (err error) {
	c.mu.RLock()
	m, ok := c.methods[method]
	closed := c.closed
	c.mu.RUnlock()
	switch {
	case closed:
		return status.Error(codes.Unavailable, "the in-process channel is closed")
	case !ok:
		return status.Errorf(codes.Unimplemented, "unknown method %s", method)
	}
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	in, okIn := args.(proto.Message)
	out, okOut := reply.(proto.Message)
	if !okIn || !okOut {
		return status.Errorf(codes.Internal, "grpcinproc: %s: request and reply must be protobuf messages (got %T, %T)", method, args, reply)
	}
	if n := proto.Size(in); n > c.opts.MaxMsgBytes {
		return status.Errorf(codes.ResourceExhausted, "grpc: trying to send message larger than max (%d vs. %d)", n, c.opts.MaxMsgBytes)
	}

	if c.tracer != nil {
		var span trace.Span
		ctx, span = c.tracer.Start(ctx, m.span, m.spanOpts...)
		defer span.End()
		defer func() {
			if err != nil {
				st := status.Convert(err)
				span.SetAttributes(attribute.Int("rpc.grpc.status_code", int(st.Code())))
				span.SetStatus(otelcodes.Error, st.Message())
			}
		}()
	}
	sts := &transportStream{method: method}
	sctx := serverContext(ctx, sts)
	dec := func(v any) error {
		dst, ok := v.(proto.Message)
		if !ok {
			return status.Errorf(codes.Internal, "grpcinproc: %s: request type %T is not a protobuf message", method, v)
		}
		proto.Merge(dst, in) // a deep copy: the handler may keep or change it
		return nil
	}
	resp, err := c.call(sctx, m, method, dec)
	sts.deliver(opts)
	if err != nil {
		return clientError(ctx, err)
	}
	rm, ok := resp.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "grpcinproc: %s: response type %T is not a protobuf message", method, resp)
	}
	if n := proto.Size(rm); n > c.opts.MaxMsgBytes {
		return status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", n, c.opts.MaxMsgBytes)
	}
	proto.Reset(out)
	proto.Merge(out, rm)
	return nil
}

// spanStart returns the span name and start options of an in-process call
// of method.
func spanStart(method string) (string, []trace.SpanStartOption) {
	service, name, _ := splitMethod(method)
	return strings.TrimPrefix(method, "/"), []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("rpc.system", "grpc"),
			attribute.String("rpc.service", service),
			attribute.String("rpc.method", name),
			attribute.String("network.transport", "inproc"),
		),
	}
}

// call runs the handler, turning a panic that no interceptor recovered
// into Internal: one bad request must not take the process down.
func (c *Channel) call(ctx context.Context, m registered, method string, dec func(any) error) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.log.ErrorContext(ctx, "panic in an in-process gRPC handler", "method", method, "panic", fmt.Sprint(r))
			resp, err = nil, status.Errorf(codes.Internal, "internal error in %s", method)
		}
	}()
	return m.handler(m.impl, ctx, dec, m.interceptor)
}

// NewStream forwards a streaming call to its service's fallback connection.
func (c *Channel) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	service, _, ok := splitMethod(method)
	c.mu.RLock()
	conn := c.fallbacks[service]
	closed := c.closed
	c.mu.RUnlock()
	switch {
	case closed:
		return nil, status.Error(codes.Unavailable, "the in-process channel is closed")
	case !ok || conn == nil:
		return nil, status.Errorf(codes.Unimplemented, "streaming method %s has no connection in this process", method)
	}
	return conn.NewStream(ctx, desc, method, opts...)
}

// clientError is what a network client would see for a handler's error:
// the status as returned, the context's own error once the caller gave
// up, and Unknown for an error that carries no status.
func clientError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	if s, ok := status.FromError(err); ok {
		return s.Err()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return status.Error(codes.Unknown, err.Error())
}

// serverContext is the handler's view of the call: the caller's outgoing
// metadata as incoming, none outgoing (a handler calling further peers
// starts afresh, as on a network server), an in-process peer, and a
// transport stream that collects the headers the handler sets.
func serverContext(ctx context.Context, sts *transportStream) context.Context {
	md, _ := metadata.FromOutgoingContext(ctx)
	ctx = metadata.NewIncomingContext(ctx, md.Copy())
	ctx = metadata.NewOutgoingContext(ctx, nil)
	ctx = peer.NewContext(ctx, &peer.Peer{Addr: Addr{}, LocalAddr: Addr{}})
	return grpc.NewContextWithServerTransportStream(ctx, sts)
}

// Addr is the address of both ends of an in-process call.
type Addr struct{}

// Network implements net.Addr.
func (Addr) Network() string { return "inproc" }

// String implements net.Addr.
func (Addr) String() string { return "inproc" }

func splitMethod(full string) (service, method string, ok bool) {
	if len(full) < 3 || full[0] != '/' {
		return "", "", false
	}
	for i := len(full) - 1; i > 0; i-- {
		if full[i] == '/' {
			return full[1:i], full[i+1:], i > 1 && i < len(full)-1
		}
	}
	return "", "", false
}

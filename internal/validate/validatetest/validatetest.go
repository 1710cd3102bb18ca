// Package validatetest holds test helpers for services whose handlers
// validate requests at the edge: a real gRPC server on loopback, table tests
// that expect InvalidArgument naming a field or Unimplemented, and fuzz
// adapters that feed arbitrary bytes to a handler.
package validatetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// Serve starts a plain gRPC server on 127.0.0.1:0, lets register add the
// services under test, and returns a client connection to it. The server and
// the connection are stopped when the test ends.
func Serve(tb testing.TB, register func(grpc.ServiceRegistrar)) *grpc.ClientConn {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listen: %v", err)
	}
	srv := grpc.NewServer()
	register(srv)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		srv.Stop()
		tb.Fatalf("dial %s: %v", lis.Addr(), err)
	}
	tb.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			tb.Errorf("serve: %v", err)
		}
	})
	return conn
}

// MustStruct builds a google.protobuf.Struct from m, e.g. a tool's JSON
// Schema in a table of valid requests; it panics on values structpb cannot
// hold, which is a mistake in the test.
func MustStruct(m map[string]any) *structpb.Struct {
	s, err := structpb.NewStruct(m)
	if err != nil {
		panic(err)
	}
	return s
}

// Case is one row of an RPC table test.
type Case struct {
	// Name is the subtest name, `Rpc/what is wrong`.
	Name string
	// Call performs the RPC and returns its error.
	Call func(ctx context.Context) error
	// Field is the field path the InvalidArgument error must name; empty
	// means the request is valid and the RPC must answer Unimplemented.
	Field string
}

// Run runs every case as a subtest and checks its outcome with
// [WantInvalid] or [WantUnimplemented].
func Run(t *testing.T, cases []Case) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			err := c.Call(t.Context())
			if c.Field == "" {
				WantUnimplemented(t, err)
				return
			}
			WantInvalid(t, err, c.Field)
		})
	}
}

// Call adapts a unary client method and a request into a [Case] call.
func Call[Req, Resp any](rpc func(context.Context, Req, ...grpc.CallOption) (Resp, error), req Req) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := rpc(ctx, req)
		return err
	}
}

// With returns a copy of valid changed by mutate, so one valid request can
// spawn many bad ones.
func With[M proto.Message](valid M, mutate func(M)) M {
	m := proto.Clone(valid).(M)
	if mutate != nil {
		mutate(m)
	}
	return m
}

// WantInvalid fails the test unless err is an InvalidArgument status whose
// message names field and whose BadRequest detail has a violation for
// exactly that field.
func WantInvalid(tb testing.TB, err error, field string) {
	tb.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.InvalidArgument {
		tb.Fatalf("want InvalidArgument naming %q, got %v", field, err)
	}
	if !strings.Contains(st.Message(), field+": ") {
		tb.Errorf("message does not name %q: %s", field, st.Message())
	}
	var fields []string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				if v.GetField() == field {
					return
				}
				fields = append(fields, v.GetField())
			}
		}
	}
	tb.Errorf("BadRequest detail has no violation for %q (has %q); message: %s", field, fields, st.Message())
}

// WantUnimplemented fails the test unless err is an Unimplemented status.
func WantUnimplemented(tb testing.TB, err error) {
	tb.Helper()
	if status.Code(err) != codes.Unimplemented {
		tb.Fatalf("want Unimplemented, got %v", err)
	}
}

// CheckEdge returns an error unless err is what an edge-validated handler
// that is not implemented yet may return: InvalidArgument with a BadRequest
// detail, or Unimplemented.
func CheckEdge(err error) error {
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.Unimplemented:
		return nil
	case codes.InvalidArgument:
		for _, d := range st.Details() {
			if _, ok := d.(*errdetails.BadRequest); ok {
				return nil
			}
		}
		return fmt.Errorf("InvalidArgument without a BadRequest detail: %v", err)
	default:
		return fmt.Errorf("want InvalidArgument or Unimplemented, got %v", err)
	}
}

// Handler adapts a unary handler for fuzzing: the returned function
// unmarshals data into a new request, calls h directly (no gRPC) and returns
// its error. ok is false (and h is not called) when data is not a valid
// encoding of the request.
func Handler[Req proto.Message, Resp any](h func(context.Context, Req) (Resp, error)) func(ctx context.Context, data []byte) (ok bool, err error) {
	return func(ctx context.Context, data []byte) (bool, error) {
		var zero Req
		req := zero.ProtoReflect().Type().New().Interface().(Req)
		if proto.Unmarshal(data, req) != nil {
			return false, nil
		}
		_, err := h(ctx, req)
		return true, err
	}
}

// Fuzz runs one fuzz input against a set of handler adapters: which picks the
// handler, data is the request encoding. It fails the test when the handler
// returns anything [CheckEdge] refuses; a panic fails the fuzz test by itself.
func Fuzz(t *testing.T, handlers []func(context.Context, []byte) (bool, error), which uint8, data []byte) {
	t.Helper()
	h := handlers[int(which)%len(handlers)]
	ok, err := h(t.Context(), data)
	if !ok {
		return
	}
	if cerr := CheckEdge(err); cerr != nil {
		t.Fatal(cerr)
	}
}

// Marshal encodes m for a fuzz seed, failing the test on error.
func Marshal(tb testing.TB, m proto.Message) []byte {
	tb.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		tb.Fatalf("marshal seed: %v", err)
	}
	return b
}

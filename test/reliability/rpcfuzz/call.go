package rpcfuzz

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Method is one RPC of a service the suite serves.
type Method struct {
	Target  string // the -target that serves it
	Desc    protoreflect.MethodDescriptor
	Path    string // /package.Service/Method
	Streams bool   // server streaming
}

// Methods lists every RPC of the given services (target → full service
// name) from the registered file descriptors, in a stable order.
func Methods(services map[string]string) ([]Method, error) {
	var out []Method
	for target, name := range services {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
		if err != nil {
			return nil, fmt.Errorf("service %s: %w", name, err)
		}
		sd, ok := d.(protoreflect.ServiceDescriptor)
		if !ok {
			return nil, fmt.Errorf("%s is not a service", name)
		}
		for i := range sd.Methods().Len() {
			md := sd.Methods().Get(i)
			out = append(out, Method{
				Target:  target,
				Desc:    md,
				Path:    "/" + string(sd.FullName()) + "/" + string(md.Name()),
				Streams: md.IsStreamingServer(),
			})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// rawCodec sends and receives messages as the bytes they are, so requests
// can carry what a generated client would never marshal.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("rawCodec: cannot marshal %T", v)
	}
	return *b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("rawCodec: cannot unmarshal into %T", v)
	}
	*b = append((*b)[:0], data...)
	return nil
}

// Call sends req to m and returns the status of the call: for a stream,
// the status of its end or nil once the first message arrived.
func Call(ctx context.Context, conn *grpc.ClientConn, m Method, req []byte) error {
	opt := grpc.ForceCodec(rawCodec{})
	var resp []byte
	if !m.Streams {
		return conn.Invoke(ctx, m.Path, &req, &resp, opt)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, m.Path, opt)
	if err != nil {
		return err
	}
	if err := cs.SendMsg(&req); err != nil {
		return cs.RecvMsg(&resp) // the real status
	}
	if err := cs.CloseSend(); err != nil {
		return err
	}
	return cs.RecvMsg(&resp)
}

// allowed are the codes a refused (or served) request may end with.
var allowed = []codes.Code{
	codes.OK, codes.InvalidArgument, codes.ResourceExhausted, codes.NotFound, codes.FailedPrecondition,
	codes.Unimplemented, codes.Unauthenticated, codes.PermissionDenied, codes.OutOfRange,
	codes.AlreadyExists, codes.Unavailable,
}

// unmarshalPrefix starts grpc-go's own error for a request that is not a
// valid protobuf message (bad wire bytes, invalid UTF-8 in a proto3
// string). grpc-go returns it as codes.Internal before any handler or
// interceptor runs, so no service can turn it into InvalidArgument.
const unmarshalPrefix = "grpc: failed to unmarshal the received message"

// Verdict explains why err is not an acceptable answer to a request in
// mode, or returns "" when it is.
func Verdict(err error, mode Mode) string {
	st := status.Convert(err)
	if slices.Contains(allowed, st.Code()) {
		return ""
	}
	if st.Code() == codes.Internal && strings.HasPrefix(st.Message(), unmarshalPrefix) {
		switch mode {
		case ModeInvalidUTF8:
			if strings.Contains(st.Message(), "invalid UTF-8") {
				return "" // known grpc-go limitation, see RELIABILITY.md
			}
		case ModeRawBytes:
			return "" // same limitation: the bytes are not a message
		}
	}
	return fmt.Sprintf("%s: %s", st.Code(), st.Message())
}

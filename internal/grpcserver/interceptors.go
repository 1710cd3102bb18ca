package grpcserver

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// recoverUnary turns a handler panic into codes.Internal so one bad request
// cannot take down a process that serves many tenants. The stack is logged;
// the client gets a generic message, never the panic value.
func recoverUnary(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = panicError(ctx, log, info.FullMethod, r)
			}
		}()
		return handler(ctx, req)
	}
}

func recoverStream(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = panicError(ss.Context(), log, info.FullMethod, r)
			}
		}()
		return handler(srv, ss)
	}
}

func panicError(ctx context.Context, log *slog.Logger, method string, r any) error {
	log.ErrorContext(ctx, "panic in gRPC handler",
		"grpc.method", method, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	return status.Errorf(codes.Internal,
		"internal error in %s: the server hit an unexpected fault (logged); retry, and report it if it persists", method)
}

// codeLevel picks the log level for a finished RPC: OK is routine (debug), a
// client going away is informational, errors caused by the request are
// warnings, and errors that mean the server is broken or unavailable are
// errors.
func codeLevel(c codes.Code) slog.Level {
	switch c {
	case codes.OK:
		return slog.LevelDebug
	case codes.Canceled:
		return slog.LevelInfo
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.PermissionDenied,
		codes.Unauthenticated, codes.FailedPrecondition, codes.OutOfRange, codes.Aborted,
		codes.ResourceExhausted, codes.DeadlineExceeded:
		return slog.LevelWarn
	default: // Unknown, Internal, Unimplemented, Unavailable, DataLoss
		return slog.LevelError
	}
}

func logRPC(ctx context.Context, log *slog.Logger, fullMethod string, start time.Time, err error) {
	code := status.Code(err)
	lvl := codeLevel(code)
	if !log.Enabled(ctx, lvl) {
		return
	}
	svc, method := splitMethod(fullMethod)
	attrs := []slog.Attr{
		slog.String("grpc.service", svc),
		slog.String("grpc.method", method),
		slog.String("grpc.code", code.String()),
		slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		attrs = append(attrs, slog.String("peer", p.Addr.String()))
	}
	if err != nil {
		attrs = append(attrs, slog.String("err", status.Convert(err).Message()))
	}
	log.LogAttrs(ctx, lvl, "rpc finished", attrs...)
}

func logUnary(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		logRPC(ctx, log, info.FullMethod, start, err)
		return resp, err
	}
}

func logStream(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		start := time.Now()
		err := handler(srv, ss)
		logRPC(ss.Context(), log, info.FullMethod, start, err)
		return err
	}
}

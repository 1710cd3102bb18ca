package grpcinproc

import (
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// transportStream is the grpc.ServerTransportStream of an in-process call:
// it keeps the header and trailer metadata a handler sets, and hands them
// to the caller's grpc.Header / grpc.Trailer call options afterwards.
type transportStream struct {
	method string

	mu         sync.Mutex
	header     metadata.MD
	trailer    metadata.MD
	headerSent bool
}

var _ grpc.ServerTransportStream = (*transportStream)(nil)

func (s *transportStream) Method() string { return s.method }

func (s *transportStream) SetHeader(md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.headerSent {
		return status.Error(codes.Internal, "transport: the header was already sent")
	}
	s.header = metadata.Join(s.header, md)
	return nil
}

func (s *transportStream) SendHeader(md metadata.MD) error {
	if err := s.SetHeader(md); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.headerSent = true
	return nil
}

func (s *transportStream) SetTrailer(md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trailer = metadata.Join(s.trailer, md)
	return nil
}

// deliver fills the caller's header and trailer call options.
func (s *transportStream) deliver(opts []grpc.CallOption) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			if o.HeaderAddr != nil {
				*o.HeaderAddr = s.header.Copy()
			}
		case grpc.TrailerCallOption:
			if o.TrailerAddr != nil {
				*o.TrailerAddr = s.trailer.Copy()
			}
		}
	}
}

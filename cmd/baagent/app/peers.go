package app

import (
	"fmt"
	"net"

	"google.golang.org/grpc"

	"github.com/baagent/baagent/internal/grpcclient"
)

// peer returns the shared client connection to a peer service: the
// in-process channel when this process runs it (-target=all), else a
// network connection dialled lazily, so a peer that is down shows up as
// Unavailable on the first call, not as a start-up failure.
//
// A service this process runs itself is reached in process, or in a
// single-target process on its own bound listener (a memory replica's
// capture consumer calls its own memory service), never through
// -<service>-addr, which names the other replicas.
func (a *App) peer(svc string) (grpc.ClientConnInterface, error) {
	if a.servers[svc] != nil {
		return a.selfConn(svc)
	}
	return a.network(svc)
}

// peersOf returns the connections to several peers, by service.
func (a *App) peersOf(svcs ...string) (map[string]grpc.ClientConnInterface, error) {
	conns := make(map[string]grpc.ClientConnInterface, len(svcs))
	for _, svc := range svcs {
		conn, err := a.peer(svc)
		if err != nil {
			return nil, err
		}
		conns[svc] = conn
	}
	return conns, nil
}

// selfConn is a connection to svc, which this process runs: the in-process
// channel in -target=all, else the service's own bound listener (on
// loopback when it listens on every interface), shared.
func (a *App) selfConn(svc string) (grpc.ClientConnInterface, error) {
	if a.inproc != nil {
		return a.inproc, nil
	}
	if conn, ok := a.networkPeers[svc]; ok {
		return conn, nil
	}
	host, port, err := net.SplitHostPort(a.servers[svc].Addr().String())
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	conn, err := grpcclient.Dial(net.JoinHostPort(host, port), grpcclient.Options{MaxMsgBytes: a.cfg.MaxMsgBytes, TracerProvider: a.tp})
	if err != nil {
		return nil, fmt.Errorf("%s: dial its own listener: %w", svc, err)
	}
	a.networkPeers[svc] = conn
	a.cleanup = append(a.cleanup, func() { _ = conn.Close() })
	return conn, nil
}

// network returns the shared network connection to svc.
func (a *App) network(svc string) (*grpc.ClientConn, error) {
	if conn, ok := a.networkPeers[svc]; ok {
		return conn, nil
	}
	conn, err := grpcclient.Dial(a.dial[svc], grpcclient.Options{MaxMsgBytes: a.cfg.MaxMsgBytes, TracerProvider: a.tp})
	if err != nil {
		return nil, fmt.Errorf("setting %s-addr: %w", svc, err)
	}
	a.networkPeers[svc] = conn
	a.cleanup = append(a.cleanup, func() { _ = conn.Close() })
	return conn, nil
}

// registrar is where svc registers its gRPC services: its network server
// and, in -target=all, the in-process channel too (behind the same
// interceptors; streaming calls on the channel use the network).
func (a *App) registrar(svc string) grpc.ServiceRegistrar {
	srv := a.servers[svc]
	if a.inproc == nil {
		return srv.GRPC()
	}
	inproc := a.inproc.Registrar(srv.UnaryInterceptor())
	return registrarFunc(func(desc *grpc.ServiceDesc, impl any) {
		srv.GRPC().RegisterService(desc, impl)
		inproc.RegisterService(desc, impl)
		if len(desc.Streams) > 0 {
			if conn, err := a.network(svc); err == nil {
				a.inproc.SetStreamFallback(desc.ServiceName, conn)
			}
		}
	})
}

type registrarFunc func(desc *grpc.ServiceDesc, impl any)

func (f registrarFunc) RegisterService(desc *grpc.ServiceDesc, impl any) { f(desc, impl) }

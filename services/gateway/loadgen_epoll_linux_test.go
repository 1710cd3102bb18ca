package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"runtime"
	"slices"
	"syscall"
	"time"
)

// epollLoadgen: on Linux the fan-out clients are read by one epoll loop
// instead of one goroutine per stream. Each event then costs a client one
// read instead of a failed read, a park, a netpoll wake-up and a second
// read, which halves the clients' share of a machine they share with the
// gateway. What is measured is unchanged: the time from publish to the
// read that brought the event.
const epollLoadgen = true

// runFanoutEpoll opens n SSE streams (WebSockets if ws) of rawURL, prints
// "ready" once every response head is in, reads them all until their
// complete events and prints the result line.
func runFanoutEpoll(ctx context.Context, rawURL, key string, n int, ws bool) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	head := "GET " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\nAuthorization: Bearer " + key + "\r\n"
	if ws {
		head += "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
	}
	req := []byte(head + "\r\n")
	addr, err := netip.ParseAddrPort(u.Host)
	if err != nil || !addr.Addr().Is4() {
		return fmt.Errorf("load generator: %q is not an IPv4 address and port", u.Host)
	}
	fds := make([]int, n)
	for i := range fds {
		fds[i] = -1
	}
	defer func() {
		for _, fd := range fds {
			if fd >= 0 {
				syscall.Close(fd)
			}
		}
	}()
	err = openStreams(n, func(i int) error {
		fd, err := dialRaw(addr, req)
		fds[i] = fd
		return err
	})
	if err != nil {
		return err
	}

	ep, err := newEpollReader(fds, ws)
	if err != nil {
		return err
	}
	defer ep.close()
	if err := ep.run(ctx, func() bool { return ep.heads == n }); err != nil {
		return err
	}
	fmt.Println("ready")
	cpu0, wall0 := processCPU(), time.Now()
	if err := ep.run(ctx, func() bool { return ep.done == n }); err != nil {
		return err
	}
	cores := float64(processCPU()-cpu0) / float64(time.Since(wall0))
	var all []time.Duration
	for _, s := range ep.streams {
		all = append(all, s.lats...)
		if s.ws != nil {
			all = append(all, s.ws.lats...)
		}
	}
	return printResult(all, cores)
}

// epollReader reads many SSE responses (or WebSockets) from one goroutine.
type epollReader struct {
	epfd    int
	streams []*epollStream
	heads   int // responses whose head has been read
	done    int // streams that reached their complete event
	buf     []byte
	events  []syscall.EpollEvent
}

type epollStream struct {
	fd     int
	inBody bool
	head   []byte       // the response head read so far
	ws     *wsLatencies // set for a WebSocket
	sseLatencies
}

func newEpollReader(fds []int, ws bool) (*epollReader, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	ep := &epollReader{epfd: epfd, buf: make([]byte, 64<<10), events: make([]syscall.EpollEvent, 256)}
	for i, fd := range fds {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(i)}
		if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
			ep.close()
			return nil, err
		}
		s := &epollStream{fd: fd}
		if ws {
			s.ws = &wsLatencies{}
		}
		ep.streams = append(ep.streams, s)
	}
	return ep, nil
}

// dialRaw connects a socket that the Go runtime's poller does not know
// (a net.Conn's socket would wake it on every event, for nothing), sends
// req and makes the socket non-blocking for the epoll loop.
func dialRaw(addr netip.AddrPort, req []byte) (int, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	sa := &syscall.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().As4()}
	if err := syscall.Connect(fd, sa); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	if err := writeAll(fd, req); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

func (ep *epollReader) close() { syscall.Close(ep.epfd) }

// run reads whatever is ready until until() holds or ctx ends.
func (ep *epollReader) run(ctx context.Context, until func() bool) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for !until() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		n, err := syscall.EpollWait(ep.epfd, ep.events, 100)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("epoll_wait: %w", err)
		}
		for _, ev := range ep.events[:n] {
			if err := ep.read(int(ev.Fd)); err != nil {
				return err
			}
		}
	}
	return nil
}

// read reads one ready stream once.
func (ep *epollReader) read(i int) error {
	s := ep.streams[i]
	n, err := syscall.Read(s.fd, ep.buf)
	now := time.Now()
	switch {
	case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EINTR):
		return nil
	case err != nil:
		return fmt.Errorf("stream %d: %w", i, err)
	case n == 0:
		return fmt.Errorf("stream %d ended before complete", i)
	}
	b := ep.buf[:n]
	if !s.inBody {
		s.head = append(s.head, b...)
		end := bytes.Index(s.head, []byte("\r\n\r\n"))
		if end < 0 {
			return nil
		}
		status := "HTTP/1.1 200 "
		if s.ws != nil {
			status = "HTTP/1.1 101 "
		}
		if !bytes.HasPrefix(s.head, []byte(status)) {
			return fmt.Errorf("stream %d: %q", i, s.head[:min(len(s.head), 64)])
		}
		b = slices.Clone(s.head[end+4:])
		s.inBody, s.head = true, nil
		ep.heads++
	}
	done := false
	if s.ws != nil {
		if done, err = s.ws.feed(b, now); err != nil {
			return fmt.Errorf("stream %d: %w", i, err)
		}
		if err := writeAll(s.fd, s.ws.pongs); err != nil {
			return fmt.Errorf("stream %d: pong: %w", i, err)
		}
		s.ws.pongs = s.ws.pongs[:0]
	} else {
		done = s.feed(b, now)
	}
	if done {
		ep.done++
		return syscall.EpollCtl(ep.epfd, syscall.EPOLL_CTL_DEL, s.fd, nil)
	}
	return nil
}

// writeAll writes b to fd, waiting out a full socket buffer (a pong is
// a few bytes: it never is).
func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := syscall.Write(fd, b)
		switch {
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EINTR):
			runtime.Gosched()
			continue
		case err != nil:
			return err
		}
		b = b[n:]
	}
	return nil
}

package external

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/baagent/baagent/internal/mcpws"
	"github.com/baagent/baagent/internal/testkit"
)

type sumArgs struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

// sdkServer is an in-process MCP server (the official SDK) with two tools,
// `echo` and `add`.
func sdkServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "sdk-test", Version: "1.2.3"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes the message."}, func(_ context.Context, _ *mcp.CallToolRequest, a struct {
		Message string `json:"message"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Echo: " + a.Message}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds two numbers."}, func(_ context.Context, _ *mcp.CallToolRequest, a sumArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(a.A + a.B)}}}, nil, nil
	})
	return s
}

// httpServer serves a handler on a fixed loopback address and can be
// stopped (every connection cut, like a crash) and started again there.
type httpServer struct {
	t       *testing.T
	addr    string
	handler func() http.Handler // a fresh handler per start: a restarted server forgets its sessions

	mu       sync.Mutex
	srv      *http.Server
	conns    map[net.Conn]bool // open connections, hijacked ones (WebSocket) included
	requests []http.Header     // headers of every request, in order
	streams  atomic.Int64      // GET requests (SSE streams, WebSocket handshakes)
}

func newHTTPServer(t *testing.T, handler func() http.Handler) *httpServer {
	s := &httpServer{t: t, addr: freeAddr(t), handler: handler, conns: map[net.Conn]bool{}}
	t.Cleanup(s.stop)
	s.start()
	return s
}

func (s *httpServer) start() {
	s.t.Helper()
	var lis net.Listener
	testkit.Eventually(s.t, 10*time.Second, "the address to be free again", func() bool {
		var err error
		lis, err = net.Listen("tcp", s.addr)
		return err == nil
	})
	h := s.handler()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, r.Header.Clone())
		s.mu.Unlock()
		if r.Method == http.MethodGet {
			s.streams.Add(1)
		}
		h.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second, ConnState: func(c net.Conn, st http.ConnState) {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch st {
		case http.StateNew:
			s.conns[c] = true
		case http.StateClosed:
			delete(s.conns, c)
		}
	}}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go srv.Serve(lis) //nolint:errcheck // ends with ErrServerClosed on stop
}

func (s *httpServer) stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	conns := s.conns
	s.conns = map[net.Conn]bool{}
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
	// Close does not cut hijacked connections; a crash would.
	for c := range conns {
		_ = c.Close()
	}
}

func (s *httpServer) headers() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.requests...)
}

// checkNetworkTransport runs the toolrunner against srv over transport: it
// lists and calls the tools, keeps calling after longer than the connect
// timeout (the session must outlive it), checks the configured header went
// with every request, then stops the server (tools withdrawn) and starts it
// again (tools back, restart counted).
func checkNetworkTransport(t *testing.T, srv *httpServer, transport, url string) {
	const timeout = time.Second
	doc := fmt.Sprintf("mcp_servers:\n - name: net\n   transport: %s\n   timeout: %s\n   http: {url: '%s', headers: {X-Test: '${TOKEN}'}}\n", transport, timeout, url)
	cfg, err := Parse([]byte(doc), env(map[string]string{"TOKEN": "t0k"}))
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(cfg, Options{Logger: testLogger(t), Backoff: fastBackoff, KeepAlive: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	src := m.Sources()[0]
	runManager(t, m)
	testkit.Eventually(t, 20*time.Second, "the server's tools", func() bool { return len(src.Tools()) == 2 })
	upAt, streams := time.Now(), srv.streams.Load()
	spec := toolNamed(src, "mcp__net__echo").Spec()
	if spec.Source != "mcp:net" || spec.Version == "" || !strings.Contains(spec.Version, "1.2.3") {
		t.Fatalf("echo spec = %+v", spec)
	}
	res, err := callTool(t, src, "mcp__net__echo", map[string]any{"message": "hi"})
	if err != nil || res.Data != "Echo: hi" {
		t.Fatalf("echo: %#v, %v", res.Data, err)
	}

	// Well past the connect timeout, the same session still serves.
	testkit.Eventually(t, 10*time.Second, "three connect timeouts to pass", func() bool { return time.Since(upAt) > 3*timeout })
	res, err = callTool(t, src, "mcp__net__add", map[string]any{"a": 2.0, "b": 3.0})
	if err != nil || res.Data != "5" {
		t.Fatalf("add after the connect timeout: %#v, %v", res.Data, err)
	}
	if n := srv.streams.Load(); n != streams {
		t.Fatalf("%d streams opened since the tools came up: the session did not outlive the connect timeout", n-streams)
	}
	if r := gauge(t, m, "restarts", "mcp:net"); r != 0 {
		t.Fatalf("restarts = %v before the server was stopped", r)
	}
	if v := testutil.ToFloat64(m.metrics.mcpTransport.WithLabelValues("mcp:net", transport)); v != 1 {
		t.Fatalf("transport gauge for %s = %v", transport, v)
	}
	for i, h := range srv.headers() {
		if h.Get("X-Test") != "t0k" {
			t.Fatalf("request %d lacks the configured header: %v", i, h)
		}
	}

	srv.stop()
	testkit.Eventually(t, 20*time.Second, "the tools to be withdrawn", func() bool { return len(src.Tools()) == 0 })
	if gauge(t, m, "up", "mcp:net") != 0 {
		t.Fatal("up gauge still 1")
	}
	srv.start()
	testkit.Eventually(t, 20*time.Second, "the tools to come back", func() bool { return len(src.Tools()) == 2 })
	res, err = callTool(t, src, "mcp__net__echo", map[string]any{"message": "back"})
	if err != nil || res.Data != "Echo: back" {
		t.Fatalf("echo after restart: %#v, %v", res.Data, err)
	}
	if r := gauge(t, m, "restarts", "mcp:net"); r != 1 {
		t.Fatalf("restarts = %v, want 1", r)
	}
}

// TestMCPSSE connects over the legacy HTTP+SSE transport to the SDK's SSE
// handler.
func TestMCPSSE(t *testing.T) {
	t.Parallel()
	srv := newHTTPServer(t, func() http.Handler {
		server := sdkServer()
		return mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return server }, nil)
	})
	checkNetworkTransport(t, srv, "sse", "http://"+srv.addr+"/sse")
}

// TestMCPWebSocket connects over WebSocket to the SDK server behind
// mcpws.Handler.
func TestMCPWebSocket(t *testing.T) {
	t.Parallel()
	srv := newHTTPServer(t, func() http.Handler {
		server := sdkServer()
		return &mcpws.Handler{GetServer: func(*http.Request) *mcp.Server { return server }}
	})
	checkNetworkTransport(t, srv, "websocket", "ws://"+srv.addr+"/mcp")
}

// TestMCPSSEWrongServer checks that an endpoint that is no SSE server is
// retried with backoff and counted, and offers nothing.
func TestMCPSSEWrongServer(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message\ndata: {}\n\n")
	}))
	t.Cleanup(hs.Close)
	ws := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(ws.Close)
	cfg := Config{MCPServers: []MCPServerConfig{
		{Name: "sse", Transport: TransportSSE, HTTP: &HTTPConfig{URL: hs.URL + "/sse"}},
		{Name: "ws", HTTP: &HTTPConfig{URL: "ws" + strings.TrimPrefix(ws.URL, "http") + "/mcp"}},
	}}
	m, err := New(cfg, Options{Logger: testLogger(t), Backoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	runManager(t, m)
	testkit.Eventually(t, 10*time.Second, "several failed connects", func() bool {
		return gauge(t, m, "list_failures", "mcp:sse") >= 3 && gauge(t, m, "list_failures", "mcp:ws") >= 3
	})
	for _, src := range m.Sources() {
		if len(src.Tools()) != 0 {
			t.Fatalf("%s offers tools", src.Name())
		}
	}
}

// TestHeadersOnlyToOrigin checks that configured headers never leave the
// configured origin: a redirect to another host gets none of them.
func TestHeadersOnlyToOrigin(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]http.Header{}
	record := func(name string, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[name] = r.Header.Clone()
			mu.Unlock()
			next.ServeHTTP(w, r)
		})
	}
	other := httptest.NewServer(record("other", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })))
	defer other.Close()
	origin := httptest.NewServer(record("origin", http.RedirectHandler(other.URL+"/x", http.StatusFound)))
	defer origin.Close()

	o, err := originOf(origin.URL + "/sse")
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: headerTransport{headers: map[string]string{"Authorization": "Bearer secret", "X-Api-Key": "k"}, origin: o, base: http.DefaultTransport}}
	resp, err := client.Get(origin.URL + "/sse")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if seen["origin"].Get("Authorization") != "Bearer secret" || seen["origin"].Get("X-Api-Key") != "k" {
		t.Fatalf("the origin did not get the headers: %v", seen["origin"])
	}
	if seen["other"] == nil {
		t.Fatal("the redirect was not followed")
	}
	if seen["other"].Get("Authorization") != "" || seen["other"].Get("X-Api-Key") != "" {
		t.Fatalf("headers leaked to another origin: %v", seen["other"])
	}
}

// TestConnectOnlyAbandoned checks that a connect whose context ends first
// fails and leaves no connection open.
func TestConnectOnlyAbandoned(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // never announces an endpoint
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer hs.Close()
	defer close(block)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := connectOnly{&mcp.SSEClientTransport{Endpoint: hs.URL}}.Connect(ctx)
	if err == nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("connect to a silent server: %v", err)
	}
}

// TestMCPSSEEverything runs server-everything's SSE transport in its own
// process, calls a tool, stops and restarts it.
func TestMCPSSEEverything(t *testing.T) {
	t.Parallel()

	node, script := everythingServer(t)
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	start := func() (kill func()) {
		cmd := exec.Command(node, script, "sse")
		cmd.Env = append(os.Environ(), "PORT="+port)
		cmd.Stdout, cmd.Stderr = testWriter{t}, testWriter{t}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var once sync.Once
		kill = func() {
			once.Do(func() {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			})
		}
		t.Cleanup(kill)
		testkit.Eventually(t, 30*time.Second, "the SSE server to listen", func() bool {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
		return kill
	}
	kill := start()

	cfg, err := Parse([]byte("mcp_servers:\n - name: legacy\n   transport: sse\n   timeout: 2s\n   http: {url: 'http://"+addr+"/sse'}\n   tools: [echo, get-sum]\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(cfg, Options{Logger: testLogger(t), Backoff: fastBackoff, KeepAlive: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	src := m.Sources()[0]
	runManager(t, m)
	testkit.Eventually(t, 30*time.Second, "the SSE server's tools", func() bool { return len(src.Tools()) == 2 })
	upAt := time.Now()
	res, err := callTool(t, src, "mcp__legacy__echo", map[string]any{"message": "over sse"})
	if err != nil || res.Data != "Echo: over sse" {
		t.Fatalf("echo: %#v, %v", res.Data, err)
	}
	testkit.Eventually(t, 20*time.Second, "twice the connect timeout to pass", func() bool { return time.Since(upAt) > 4*time.Second })
	res, err = callTool(t, src, "mcp__legacy__get-sum", map[string]any{"a": 2.0, "b": 2.0})
	if err != nil || !strings.Contains(res.Data.(string), "is 4") {
		t.Fatalf("get-sum after the connect timeout: %#v, %v", res.Data, err)
	}
	if r := gauge(t, m, "restarts", "mcp:legacy"); r != 0 {
		t.Fatalf("the session was restarted %v times before the server stopped", r)
	}

	kill()
	testkit.Eventually(t, 30*time.Second, "the tools to be withdrawn", func() bool { return len(src.Tools()) == 0 })
	start()
	testkit.Eventually(t, 30*time.Second, "the tools to come back", func() bool { return len(src.Tools()) == 2 })
	res, err = callTool(t, src, "mcp__legacy__echo", map[string]any{"message": "again"})
	if err != nil || res.Data != "Echo: again" {
		t.Fatalf("echo after restart: %#v, %v", res.Data, err)
	}
}

// TestMCPSSEHeadersStayOnOrigin runs an SSE server that announces its
// message endpoint on another origin (a proxy back to itself): the session
// works, and the configured header reaches only the configured origin.
func TestMCPSSEHeadersStayOnOrigin(t *testing.T) {
	t.Parallel()
	server := sdkServer()
	sse := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return server }, nil)
	var mu sync.Mutex
	var originHeaders, otherHeaders []string
	var otherURL string
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if r.Header.Get("X-Forwarded-For") == "" { // not through the proxy
			originHeaders = append(originHeaders, r.Header.Get("X-Test"))
		}
		to := otherURL
		mu.Unlock()
		sse.ServeHTTP(&endpointRewriter{ResponseWriter: w, to: to}, r)
	}))
	// Cleanups, not defers: the servers must outlive the manager (stopped
	// by its own cleanup, which runs first), whose event stream they hold.
	t.Cleanup(origin.Close)
	target, _ := url.Parse(origin.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		otherHeaders = append(otherHeaders, r.Header.Get("X-Test"))
		mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(other.Close)
	mu.Lock()
	otherURL = other.URL
	mu.Unlock()

	cfg := Config{MCPServers: []MCPServerConfig{{Name: "moved", Transport: TransportSSE, HTTP: &HTTPConfig{URL: origin.URL + "/sse", Headers: map[string]string{"X-Test": "secret"}}}}}
	m, err := New(cfg, Options{Logger: testLogger(t), Backoff: fastBackoff, KeepAlive: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	src := m.Sources()[0]
	runManager(t, m)
	testkit.Eventually(t, 20*time.Second, "the server's tools", func() bool { return len(src.Tools()) == 2 })
	res, err := callTool(t, src, "mcp__moved__echo", map[string]any{"message": "via proxy"})
	if err != nil || res.Data != "Echo: via proxy" {
		t.Fatalf("echo: %#v, %v", res.Data, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(otherHeaders) == 0 {
		t.Fatal("no message was posted to the announced endpoint")
	}
	for _, h := range originHeaders {
		if h != "secret" {
			t.Fatalf("a request to the configured origin lacks the header: %q", originHeaders)
		}
	}
	for _, h := range otherHeaders {
		if h != "" {
			t.Fatalf("the header leaked to the announced endpoint on another origin: %q", otherHeaders)
		}
	}
}

// endpointRewriter makes the SSE handler's `endpoint` event absolute, on
// the origin to.
type endpointRewriter struct {
	http.ResponseWriter
	to string
}

func (e *endpointRewriter) Write(p []byte) (int, error) {
	if s := string(p); strings.HasPrefix(s, "event: endpoint\n") {
		out := strings.Replace(s, "data: /", "data: "+e.to+"/", 1)
		if _, err := e.ResponseWriter.Write([]byte(out)); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return e.ResponseWriter.Write(p)
}

func (e *endpointRewriter) Unwrap() http.ResponseWriter { return e.ResponseWriter }

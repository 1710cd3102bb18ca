package gateway

import (
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Browser protections.
//
// With no API keys configured (`make run`), a request carries no secret:
// the gateway trusts any loopback client, and a visitor's browser is one.
// A page on another site could make it start runs with a CORS "simple"
// request (a text/plain POST, sent without a preflight), read runs through
// DNS rebinding (its own name resolving to 127.0.0.1, so the browser sees
// a same-origin request with Host: evil.example) and read streams over a
// WebSocket (which CORS does not cover). So without keys every request
// except /healthz must
//
//   - name the gateway in Host: a loopback name or IP (localhost,
//     127.0.0.1, [::1], any port), or the host of an allowed origin;
//   - if it has an Origin (browsers send one on every cross-origin request
//     and on same-origin POSTs), come from the request's own origin or an
//     allowed one;
//   - if it changes state (POST, PUT, PATCH, DELETE), say Content-Type:
//     application/json, which no page can send to another origin without
//     a preflight (which the gateway never grants). Every state-changing
//     route takes a JSON body, or none, except a skill upload (PUT
//     /v1/skills/{name}), which may also be text/markdown or an archive
//     type: none of those is CORS-safelisted either, and a PUT is
//     preflighted whatever its type.
//
// With keys, a page cannot send a key it does not have (headers need a
// preflight), so only the WebSocket handshake, which browsers send with
// any credentials in the URL and without CORS, checks Origin: in every
// mode it must be absent (non-browser clients) or the gateway's own or an
// allowed origin.

// originPolicy holds the allowed origins (Options.AllowedOrigins).
type originPolicy struct {
	origins map[string]bool // canonical scheme://host:port
	hosts   map[string]bool // their host names, for the Host check
}

func newOriginPolicy(list []string) (*originPolicy, error) {
	p := &originPolicy{origins: map[string]bool{}, hosts: map[string]bool{}}
	for _, o := range list {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		canon, host, _, err := parseOrigin(strings.TrimSuffix(o, "/"))
		if err != nil {
			return nil, fmt.Errorf("allowed origin %q (gateway-allowed-origins): %w", o, err)
		}
		p.origins[canon] = true
		p.hosts[host] = true
	}
	return p, nil
}

// parseOrigin parses an origin, scheme://host[:port], into its canonical
// form (lower case, explicit port), host name and port.
func parseOrigin(o string) (canon, host, port string, err error) {
	u, err := url.Parse(o)
	if err != nil {
		return "", "", "", errors.New("not a URL")
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", "", "", errors.New("want http://host[:port] or https://host[:port]")
	}
	if u.Opaque != "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.Host == "" {
		return "", "", "", errors.New("want only scheme://host[:port], no path, user, query or fragment")
	}
	host = strings.ToLower(u.Hostname())
	port = u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	if n, err := strconv.Atoi(port); host == "" || err != nil || n < 1 || n > 65535 {
		return "", "", "", errors.New("bad host or port")
	}
	return scheme + "://" + net.JoinHostPort(host, port), host, port, nil
}

// splitHost splits a Host header into its lower-case host name (no
// brackets) and port ("" if none).
func splitHost(h string) (host, port string) {
	if hh, p, err := net.SplitHostPort(h); err == nil {
		return strings.ToLower(hh), p
	}
	return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")), ""
}

// isLoopbackHost reports a host name that can only reach this machine:
// browsers resolve neither to anything an attacker controls.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// checkHost refuses a Host that is not the gateway's (DNS rebinding).
func (p *originPolicy) checkHost(r *http.Request) error {
	host, _ := splitHost(r.Host)
	if isLoopbackHost(host) || p.hosts[host] {
		return nil
	}
	return status.Errorf(codes.PermissionDenied,
		"Host %q is not a name of this gateway: with no API keys configured only localhost, 127.0.0.1 and [::1] are accepted "+
			"(protection against DNS rebinding); add the origin to gateway-allowed-origins to use another name", r.Host)
}

// checkOrigin refuses a browser request from a page of another origin
// that is not allowed. A request without Origin is not a cross-origin
// browser request and passes.
func (p *originPolicy) checkOrigin(r *http.Request) error {
	o := r.Header.Get("Origin")
	if o == "" {
		return nil
	}
	canon, host, port, err := parseOrigin(o)
	if err == nil {
		if p.origins[canon] {
			return nil
		}
		// Same origin: the page was served by this gateway under the
		// name and port the request is sent to.
		h, hp := splitHost(r.Host)
		if hp == "" {
			hp = port
		}
		if h == host && hp == port {
			return nil
		}
	}
	return status.Errorf(codes.PermissionDenied,
		"Origin %q is neither this gateway's origin nor in gateway-allowed-origins: pages of other sites may not use it from a browser", o)
}

// reasonMediaType marks an InvalidArgument status that HTTP answers 415.
const reasonMediaType = "UNSUPPORTED_MEDIA_TYPE"

// checkContentType refuses a state-changing request that is not JSON.
func checkContentType(r *http.Request) error {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return nil
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil && (mt == "application/json" || isSkillUpload(r, mt)) {
		return nil
	}
	st := status.New(codes.InvalidArgument, "with no API keys configured, "+r.Method+" requests must have Content-Type: application/json "+
		"(a web page cannot send that to another site without permission, which this gateway never gives)")
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reasonMediaType, Domain: "baagent.dev"}); err == nil {
		st = d
	}
	return st.Err()
}

// browserGuard applies the no-key checks above to every request but
// /healthz. With keys it adds nothing (see httpWebSocket).
func (s *Server) browserGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.auth == nil || !s.auth.open() || r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		reason, err := refusedHost, s.origins.checkHost(r)
		if err == nil {
			reason, err = refusedOrigin, s.origins.checkOrigin(r)
		}
		if err == nil {
			reason, err = refusedContentType, checkContentType(r)
		}
		if err != nil {
			s.edge.browserRefused.WithLabelValues(reason).Inc()
			writeError(w, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bodyDeadline bounds how long the body of a request may take to arrive
// (Options.BodyReadTimeout): a read deadline on the connection, set before
// the handler runs and cleared by readBody once the body is in. It also
// bounds net/http's own reading of a body the handler did not read (after
// a refusal), which otherwise has no deadline. Requests without a body,
// the event streams among them, are left alone.
func (s *Server) bodyDeadline(next http.Handler) http.Handler {
	if s.opts.BodyReadTimeout <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.opts.BodyReadTimeout))
		}
		next.ServeHTTP(w, r)
	})
}

// reasonBodyTimeout marks a DeadlineExceeded status that HTTP answers 408.
const reasonBodyTimeout = "BODY_READ_TIMEOUT"

// bodyTimeout refuses a body that did not arrive in time.
func (s *Server) bodyTimeout() error {
	s.edge.bodyTimeouts.Inc()
	st := status.New(codes.DeadlineExceeded, "request body not received within "+s.opts.BodyReadTimeout.String()+
		" (gateway body read timeout)")
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reasonBodyTimeout, Domain: "baagent.dev"}); err == nil {
		st = d
	}
	return st.Err()
}

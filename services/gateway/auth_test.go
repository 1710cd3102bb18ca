package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// forge signs a token with arbitrary claims, as a signer holding the
// secret could.
func forge(a *authenticator, claims string) string {
	payload := base64.RawURLEncoding.EncodeToString([]byte(claims))
	return tokenPrefix + payload + "." + a.sign(payload)
}

func TestStreamTokenExpiryIsCappedByTheTTL(t *testing.T) {
	keys := map[string]string{keyAcme: "acme"}
	a, err := newAuthenticator(keys, "a shared secret of the replicas", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	a.now = clock.now
	acme, _ := a.tenantForKey(keyAcme, nil)
	sub := a.subject(acme.id)
	at := func(d time.Duration) string { return strconv.FormatInt(clock.t.Add(d).Unix(), 10) }
	for _, c := range []struct {
		claims string
		want   error
	}{
		{"acme|" + at(10*time.Minute) + "|" + sub, nil},
		{"acme|" + at(10*time.Minute+tokenClockSkew) + "|" + sub, nil},
		{"acme|" + at(10*time.Minute+tokenClockSkew+time.Second) + "|" + sub, errTokenTooLong},
		{"acme|" + at(10*365*24*time.Hour) + "|" + sub, errTokenTooLong},
		{"acme|" + at(10*365*24*time.Hour), errTokenTooLong},
		{"acme|" + at(0) + "|" + sub, errBadToken},            // expired
		{"acme|" + at(-time.Second) + "|" + sub, errBadToken}, // expired
		{"acme|" + at(time.Minute) + "|nosuchsubject", errBadToken},
		{"initech|" + at(time.Minute) + "|" + sub, errBadToken}, // acme's key, another tenant
		{"acme|" + at(time.Minute) + "|" + sub + "|x", errBadToken},
		{"acme", errBadToken},
		{"acme|soon|" + sub, errBadToken},
	} {
		if _, err := a.verify(forge(a, c.claims)); err != c.want {
			t.Errorf("token %q: %v, want %v", c.claims, err, c.want)
		}
	}
	// What the gateway issues is within its own cap.
	tok, _ := a.issue(acme)
	if c, err := a.verify(tok); err != nil || c != acme {
		t.Errorf("an issued token: %+v %v, want the key's caller", c, err)
	}
}

func TestStreamTokenSecretIsSharedByReplicas(t *testing.T) {
	const secret = "a shared secret of the replicas"
	a, err := newAuthenticator(map[string]string{keyAcme: "acme"}, secret, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// A replica that also knows a newer key accepts a's tokens; with the
	// key list as the secret, it would not.
	b, err := newAuthenticator(map[string]string{keyAcme: "acme", keyInitech: "initech"}, secret, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	acme, _ := a.tenantForKey(keyAcme, nil)
	tok, _ := a.issue(acme)
	if c, err := b.verify(tok); err != nil || c.tenant != "acme" || c.id != acme.id {
		t.Errorf("another replica with the same secret: %+v %v", c, err)
	}
	other, _ := newAuthenticator(map[string]string{keyAcme: "acme"}, "another secret entirely", time.Minute)
	if _, err := other.verify(tok); err != errBadToken {
		t.Errorf("a replica with another secret accepted the token: %v", err)
	}
	// The key removed: its tokens stop working.
	rotated, _ := newAuthenticator(map[string]string{keyInitech: "initech"}, secret, time.Minute)
	if _, err := rotated.verify(tok); err != errBadToken {
		t.Errorf("a token of a removed key: %v, want refused", err)
	}
	if _, err := newAuthenticator(nil, "short", time.Minute); err == nil || !strings.Contains(err.Error(), "gateway-token-secret") {
		t.Errorf("a 5-byte secret: %v, want refused naming the setting", err)
	}
	if a.derived {
		t.Error("configured secret reported as derived")
	}
	if d, _ := newAuthenticator(map[string]string{keyAcme: "acme"}, "", time.Minute); !d.derived {
		t.Error("no secret with keys: not reported as derived from the keys")
	}

	// Without a secret New warns, naming the setting; with one it does not.
	for _, secret := range []string{"", "a shared secret of the replicas"} {
		var logs bytes.Buffer
		New(Options{APIKeys: map[string]string{keyAcme: "acme"}, StreamTokenSecret: secret, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if warned := strings.Contains(logs.String(), "gateway-token-secret"); warned != (secret == "") {
			t.Errorf("secret %q: warning logged %v: %s", secret, warned, logs.String())
		}
	}
	if err := New(Options{StreamTokenSecret: "short"}).Run(t.Context()); err == nil {
		t.Error("a short secret does not fail Run")
	}
}

// TestEarlierTokensAreAccepted: tokens without a subject (issued before
// it existed) still work, counted per tenant.
func TestEarlierTokensAreAccepted(t *testing.T) {
	a, _ := newAuthenticator(map[string]string{keyAcme: "acme"}, "", time.Minute)
	c, err := a.verify(forge(a, "acme|"+strconv.FormatInt(time.Now().Add(30*time.Second).Unix(), 10)))
	if err != nil || c != a.tokenCaller("acme") {
		t.Errorf("a subject-less token: %+v %v", c, err)
	}
}

func TestFarFutureTokenIsRefusedOverHTTP(t *testing.T) {
	e := newEnv(t, Options{StreamTokenSecret: "the replicas' shared secret"})
	r := e.run("acme", "run-1")
	publishN(t, r, 1)
	if _, err := r.Complete(testCtx(t), "ok"); err != nil { // were it accepted, its stream would end
		t.Fatal(err)
	}
	acme, _ := e.srv.auth.tenantForKey(keyAcme, nil)
	far := forge(e.srv.auth, "acme|"+strconv.FormatInt(time.Now().Add(365*24*time.Hour).Unix(), 10)+"|"+e.srv.auth.subject(acme.id))
	code, body, _ := e.send(t, request{method: "GET", path: "/v1/runs/run-1/events?token=" + far})
	if code != http.StatusUnauthorized || !strings.Contains(body, "token lifetime") {
		t.Errorf("a token valid for a year: %d %s, want 401", code, body)
	}
}

func TestAuthThrottle(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	th := newAuthThrottle(3, time.Minute, 100, clock.now)
	p := func(s string) netip.Prefix {
		pp, ok := clientPrefix(&net.TCPAddr{IP: net.ParseIP(s)})
		if !ok {
			t.Fatalf("no prefix for %s", s)
		}
		return pp
	}
	a, b := p("192.0.2.1"), p("192.0.2.2")
	for range 3 {
		if blocked, _ := th.blocked(a); blocked {
			t.Fatal("blocked before its failures were used up")
		}
		th.fail(a)
	}
	if blocked, wait := th.blocked(a); !blocked || wait != time.Minute {
		t.Errorf("after 3 failures: blocked %v for %v, want a minute", blocked, wait)
	}
	if blocked, _ := th.blocked(b); blocked {
		t.Error("another address blocked")
	}
	if p("::ffff:192.0.2.1") != a {
		t.Error("an IPv4-mapped address is not its IPv4 address")
	}
	if p("2001:db8:1:2::1") != p("2001:db8:1:2:ffff::7") || p("2001:db8:1:2::1") == p("2001:db8:1:3::1") {
		t.Error("IPv6 clients are not grouped by /64")
	}
	if _, ok := clientPrefix(&net.UnixAddr{Name: "@x", Net: "unix"}); ok {
		t.Error("a Unix socket peer has a prefix")
	}
	clock.advance(59 * time.Second)
	if blocked, wait := th.blocked(a); !blocked || wait != time.Second {
		t.Errorf("near the window's end: blocked %v for %v", blocked, wait)
	}
	clock.advance(time.Second)
	if blocked, _ := th.blocked(a); blocked {
		t.Error("still blocked after the window")
	}
	if th.size() != 0 {
		t.Errorf("%d addresses kept after their window", th.size())
	}
}

// TestAuthThrottleIsBounded: failures from ever more addresses never hold
// more than maxAddrs, and a throttled address outlives one-off failures.
func TestAuthThrottleIsBounded(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	th := newAuthThrottle(3, time.Minute, 100, clock.now)
	bad := netip.MustParsePrefix("198.51.100.7/32")
	for range 3 {
		th.fail(bad)
	}
	for i := range 10_000 {
		th.fail(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32))
		clock.advance(time.Millisecond)
		if th.size() > 100 {
			t.Fatalf("%d addresses tracked, bound 100", th.size())
		}
	}
	if blocked, _ := th.blocked(bad); !blocked {
		t.Error("the throttled address was evicted by one-off failures")
	}
}

func TestFailedAuthIsThrottledPerAddress(t *testing.T) {
	e := newEnv(t, Options{AuthFailureLimit: 3})
	e.run("acme", "run-1")
	get := func(path string, h map[string]string) (int, string, http.Header) {
		return e.send(t, request{method: "GET", path: path, header: h})
	}
	wrong := map[string]string{"Authorization": "Bearer wrong-key-0123456789"}
	// Missing keys cost nothing (the dashboard asks once without one).
	for range 5 {
		if code, _, _ := get("/v1/whoami", nil); code != http.StatusUnauthorized {
			t.Fatalf("no key: %d", code)
		}
	}
	if code, _, _ := get("/v1/runs", wrong); code != http.StatusUnauthorized {
		t.Fatalf("wrong key 1: %d", code)
	}
	if code, _, _ := get("/v1/runs/run-1/events?token=v1.forged.mac", nil); code != http.StatusUnauthorized {
		t.Fatalf("forged token: %d", code)
	}
	if _, err := e.client.ListRuns(withKey(testCtx(t), "wrong-key-0123456789"), &baagentv1.ListRunsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("wrong key over gRPC: %v", err)
	}
	// Three failures (HTTP key, token, gRPC key): now everything from
	// this address is refused unchecked.
	code, body, h := get("/v1/runs", map[string]string{"Authorization": "Bearer " + keyAcme})
	if code != http.StatusTooManyRequests || !strings.Contains(body, "failed authentications") || h.Get("Retry-After") == "" {
		t.Errorf("a valid key from the throttled address: %d %s (Retry-After %q)", code, body, h.Get("Retry-After"))
	}
	if _, err := e.client.ListRuns(withKey(testCtx(t), keyAcme), &baagentv1.ListRunsRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("gRPC with a valid key from the throttled address: %v", err)
	}
	if got := testutil.ToFloat64(e.srv.edge.authFailures.WithLabelValues(apiHTTP)) + testutil.ToFloat64(e.srv.edge.authFailures.WithLabelValues(apiGRPC)); got != 3 {
		t.Errorf("auth_failures_total = %v, want 3", got)
	}
	if got := testutil.ToFloat64(e.srv.edge.authThrottled.WithLabelValues(apiHTTP)); got != 1 {
		t.Errorf("auth_throttled_total{api=http} = %v, want 1", got)
	}
	// Another address is not affected.
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
	req, _ := http.NewRequestWithContext(testCtx(t), http.MethodGet, e.base+"/v1/runs", nil)
	req.Header.Set("Authorization", "Bearer "+keyAcme)
	resp, err := other.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("a valid key from 127.0.0.2: %d", resp.StatusCode)
	}
}

// TestGRPCAuthenticatesBeforeValidating: without a valid key every RPC
// answers Unauthenticated, even to an invalid request.
func TestGRPCAuthenticatesBeforeValidating(t *testing.T) {
	e := newEnv(t, Options{AuthFailureLimit: -1})
	for _, key := range []string{"", "wrong-key-0123456789"} {
		ctx := testCtx(t)
		if key != "" {
			ctx = withKey(ctx, key)
		}
		calls := map[string]func(context.Context) error{
			"StartRun": func(ctx context.Context) error { _, err := e.client.StartRun(ctx, &startReq{}); return err },
			"GetRun": func(ctx context.Context) error {
				_, err := e.client.GetRun(ctx, &baagentv1.GetRunRequest{})
				return err
			},
			"ListRuns":        func(ctx context.Context) error { _, err := e.client.ListRuns(ctx, &listReq{PageSize: -1}); return err },
			"CancelRun":       func(ctx context.Context) error { _, err := e.client.CancelRun(ctx, &cancelReq{}); return err },
			"SubmitInput":     func(ctx context.Context) error { _, err := e.client.SubmitInput(ctx, &submitReq{}); return err },
			"StreamRunEvents": streamCall(e.client, &streamReq{After: "a b"}),
			"ListSkills": func(ctx context.Context) error {
				_, err := e.client.ListSkills(ctx, &baagentv1.GatewayServiceListSkillsRequest{Project: "a/b"})
				return err
			},
			"GetSkill": func(ctx context.Context) error { _, err := e.client.GetSkill(ctx, &skillReq{}); return err },
			"ListTools": func(ctx context.Context) error {
				_, err := e.client.ListTools(ctx, &baagentv1.GatewayServiceListToolsRequest{})
				return err
			},
			"InvokeTool":  func(ctx context.Context) error { _, err := e.client.InvokeTool(ctx, &invokeReq{}); return err },
			"CountTokens": func(ctx context.Context) error { _, err := e.client.CountTokens(ctx, &countReq{}); return err },
		}
		for name, call := range calls {
			if err := call(ctx); status.Code(err) != codes.Unauthenticated {
				t.Errorf("%s, key %q, invalid request: %v, want Unauthenticated", name, key, err)
			}
		}
	}
}

// TestUnauthenticatedMessagesNameRoutesThatExist: every route a 401 names
// answers with a key.
func TestUnauthenticatedMessagesNameRoutesThatExist(t *testing.T) {
	e := newEnv(t, Options{})
	e.run("acme", "run-1")
	routeRE := regexp.MustCompile(`(GET|POST) (/v1/[a-z_/-]+)`)
	for _, path := range []string{"/v1/runs/run-1/events?token=v1.forged.mac", "/v1/runs/run-1/ws?token=v1.forged.mac"} {
		code, body, _ := e.send(t, request{method: "GET", path: path})
		m := routeRE.FindStringSubmatch(body)
		if code != http.StatusUnauthorized || m == nil {
			t.Fatalf("%s: %d %s, want 401 naming a route", path, code, body)
		}
		code, got, _ := e.send(t, request{method: m[1], path: m[2], header: map[string]string{"Authorization": "Bearer " + keyAcme}})
		if code != http.StatusOK || !strings.Contains(got, `"token"`) {
			t.Errorf("%s %s (named by the 401 of %s): %d %s", m[1], m[2], path, code, got)
		}
	}
	if !strings.Contains(errTokenTooLong.Error(), tokenRoute) || !strings.Contains(fmt.Sprint(errBadToken), tokenRoute) {
		t.Error("token errors do not name the token route")
	}
}

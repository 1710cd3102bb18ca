package security

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/config"
	gw "github.com/baagent/baagent/services/gateway"
	"github.com/baagent/baagent/test/reliability/harness"
)

// edgeGateway is one more gateway replica in front of a running suite
// (its orchestrator, peers and JetStream), configured with opts: for the
// gateway settings that have no flag yet, or that a test sets tighter
// than their defaults. It returns its HTTP address and a gRPC client.
func edgeGateway(t *testing.T, s *harness.Suite, opts gw.Options) (string, baagentv1.GatewayServiceClient) {
	t.Helper()
	js, err := jetstream.New(s.App.NATS())
	if err != nil {
		t.Fatal(err)
	}
	httpLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts.Logger = slog.New(slog.NewJSONHandler(s.Logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("replica", "edge")
	opts.Registerer = prometheus.NewRegistry()
	opts.JetStream = js
	opts.Orchestrator = baagentv1.NewOrchestratorServiceClient(s.Dial(t, config.TargetOrchestrator))
	opts.Skills = baagentv1.NewSkillsServiceClient(s.Dial(t, config.TargetSkills))
	opts.ToolRunner = baagentv1.NewToolRunnerServiceClient(s.Dial(t, config.TargetToolRunner))
	opts.Tokens = baagentv1.NewTokensServiceClient(s.Dial(t, config.TargetTokens))
	opts.HTTPListener = httpLis
	srv := gw.New(opts)

	grpcLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	srv.Register(gs)
	served := make(chan error, 1)
	go func() { served <- gs.Serve(grpcLis) }()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx) }()
	conn, err := grpc.NewClient(grpcLis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		gs.Stop()
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("edge gateway Run: %v", err)
		}
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("edge gateway gRPC: %v", err)
		}
	})
	return httpLis.Addr().String(), baagentv1.NewGatewayServiceClient(conn)
}

// TestSlowRequestBodyIsCut: a request whose body does not arrive within
// the gateway's body read timeout is answered 408 and its connection
// closed, so slow bodies cannot hold connections and handlers (or the
// key's in-flight slots); the next request is served.
func TestSlowRequestBodyIsCut(t *testing.T) {
	const timeout = time.Second
	s := harnessStart(t, map[string]string{"BAAGENT_API_KEYS": keyAcme + "=acme"})
	addr, _ := edgeGateway(t, s, gw.Options{APIKeys: map[string]string{keyAcme: "acme"}, BodyReadTimeout: timeout, MaxInFlightPerKey: 1})

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	// Headers in full, then one byte of a 1,000-byte body, then nothing.
	if _, err := fmt.Fprintf(conn, "POST /v1/runs HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", addr, keyAcme); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body within 30 s: %v", err)
	}
	body, _ := io.ReadAll(resp.Body) // the connection closes after it
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "body read timeout") {
		t.Errorf("stalled body: %d %s, want 408", resp.StatusCode, body)
	}
	if waited := time.Since(start); waited < timeout {
		t.Errorf("cut after %v, before the %v timeout", waited, timeout)
	}
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Error("the connection stays open after its body timed out")
	}
	// Its in-flight slot (the only one) is free again.
	code, got := edgeRequest{method: http.MethodPost, path: "/v1/runs", body: `{"spec":{"input":"` + question + `"}}`,
		header: map[string]string{"Authorization": "Bearer " + keyAcme, "Content-Type": "application/json"}}.do(t, context.Background(), addr)
	if code != http.StatusOK {
		t.Errorf("a request after the cut one: %d %.300s", code, got)
	}
}

// TestStreamTokenExpiryIsCappedAndSecretShared: with a configured stream
// token secret, a token signed with it but expiring further ahead than
// the token lifetime is refused (a key holder who learnt the secret, or a
// misconfigured replica, cannot mint lasting tokens), one within it is
// accepted, and a replica with the same secret and another key list
// accepts the first replica's tokens.
func TestStreamTokenExpiryIsCappedAndSecretShared(t *testing.T) {
	const secret = "security-test shared stream token secret"
	s := harnessStart(t, map[string]string{"BAAGENT_API_KEYS": keyAcme + "=acme"})
	acme := gateway(t, s, keyAcme)
	run, _ := acme.runToEnd(t, &baagentv1.RunSpec{Input: question})
	one, _ := edgeGateway(t, s, gw.Options{APIKeys: map[string]string{keyAcme: "acme"}, StreamTokenSecret: secret, TokenTTL: 10 * time.Minute})
	two, _ := edgeGateway(t, s, gw.Options{APIKeys: map[string]string{keyAcme: "acme", keyGlobex: "globex"}, StreamTokenSecret: secret, TokenTTL: 10 * time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	events := "/v1/runs/" + url.PathEscape(run.GetRunId()) + "/events?cursor=earliest&token="

	// The signature as the gateway computes it (services/gateway/auth.go):
	// a key derived from the secret, an HMAC of "v1."+payload.
	forge := func(expires time.Time) string {
		k := hmac.New(sha256.New, []byte("baagent gateway stream tokens v2"))
		k.Write([]byte(secret))
		payload := base64.RawURLEncoding.EncodeToString([]byte("acme|" + strconv.FormatInt(expires.Unix(), 10)))
		mac := hmac.New(sha256.New, k.Sum(nil))
		mac.Write([]byte("v1." + payload))
		return url.QueryEscape("v1." + payload + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)))
	}
	if code, body := (edgeRequest{method: http.MethodGet, path: events + forge(time.Now().Add(5*time.Minute))}).do(t, ctx, one); code != http.StatusOK {
		t.Fatalf("a token expiring within the lifetime: %d %.300s (the forged signature is wrong?)", code, body)
	}
	for _, ahead := range []time.Duration{12 * time.Minute, 365 * 24 * time.Hour} {
		if code, body := (edgeRequest{method: http.MethodGet, path: events + forge(time.Now().Add(ahead))}).do(t, ctx, one); code != http.StatusUnauthorized {
			t.Errorf("a token expiring in %v (lifetime 10m): %d %.300s, want 401", ahead, code, body)
		}
	}

	// A token from replica one works on replica two.
	code, body := edgeRequest{method: http.MethodPost, path: "/v1/auth/stream-token",
		header: map[string]string{"Authorization": "Bearer " + keyAcme}}.do(t, ctx, one)
	token := between(body, `"token":"`, `"`)
	if code != http.StatusOK || token == "" {
		t.Fatalf("stream token from replica one: %d %s", code, body)
	}
	if code, body := (edgeRequest{method: http.MethodGet, path: events + url.QueryEscape(token)}).do(t, ctx, two); code != http.StatusOK || !strings.Contains(body, `"complete"`) {
		t.Errorf("replica one's token on replica two: %d %.300s, want 200", code, body)
	}
}

package security

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baagent/baagent/cmd/baagent/app"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/internal/topology"
)

// TestEmbeddedNATSIsLoopbackOnly: the embedded NATS has no authentication,
// so by default it must be reachable from this host only.
func TestEmbeddedNATSIsLoopbackOnly(t *testing.T) {
	def, err := app.LoadConfig([]string{"-data-dir=" + t.TempDir()}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	host, _, err := net.SplitHostPort(def.EmbeddedNATSAddr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		t.Fatalf("default -embedded-nats-addr %q is not a loopback address", def.EmbeddedNATSAddr)
	}

	s := harnessStart(t, nil, "-embedded-nats-addr="+def.EmbeddedNATSAddr[:strings.LastIndex(def.EmbeddedNATSAddr, ":")]+":0")
	nc := s.App.NATS()
	addr, ok := nc.ConnectedAddr(), nc.IsConnected()
	host, port, err := net.SplitHostPort(addr)
	if !ok || err != nil || !net.ParseIP(host).IsLoopback() {
		t.Fatalf("suite connected to NATS at %q (connected %v): not loopback", addr, ok)
	}
	// Every non-loopback address of this host refuses the NATS port.
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	tried := 0
	for _, a := range ifaddrs {
		ipnet, ok := a.(*net.IPNet)
		if !ok || ipnet.IP.IsLoopback() || ipnet.IP.IsLinkLocalUnicast() {
			continue
		}
		tried++
		c, err := net.DialTimeout("tcp", net.JoinHostPort(ipnet.IP.String(), port), 2*time.Second)
		if err == nil {
			c.Close()
			t.Errorf("the embedded NATS accepts connections on %s:%s", ipnet.IP, port)
		}
	}
	t.Logf("NATS at %s; %d non-loopback addresses refused it", addr, tried)
}

// TestRequestsOverTheSizeLimitAreRefused: a gRPC message over
// -max-msg-bytes is ResourceExhausted on the public and internal services,
// an HTTP body over the gateway's limit is a 4xx, and the suite serves on.
func TestRequestsOverTheSizeLimitAreRefused(t *testing.T) {
	const limit = 1 << 20
	s := harnessStart(t, map[string]string{"BAAGENT_API_KEYS": keyAcme + "=acme"}, "-max-msg-bytes=1048576")
	big := strings.Repeat("x", limit+1)

	tokens := baagentv1.NewTokensServiceClient(s.Dial(t, config.TargetTokens))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := tokens.CountTokens(ctx, &baagentv1.CountTokensRequest{Model: "gpt-4o", Text: big})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("tokens CountTokens of %d bytes: %v, want ResourceExhausted", len(big), err)
	}
	acme := gateway(t, s, keyAcme)
	_, err = acme.gw.StartRun(acme.ctx(t), &baagentv1.StartRunRequest{Spec: &baagentv1.RunSpec{Input: big}})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("gateway StartRun of %d bytes: %v, want ResourceExhausted", len(big), err)
	}
	// The limit applies before the message is decoded, so any bytes do.
	for svc, method := range map[string]string{config.TargetContext: "GetHistory", config.TargetSkills: "ListSkills", config.TargetToolRunner: "ListTools", config.TargetOrchestrator: "GetRun"} {
		err := s.Dial(t, svc).Invoke(ctx, "/"+topology.GRPCServices[svc]+"/"+method, &baagentv1.CountTokensRequest{Text: big}, &baagentv1.CountTokensResponse{})
		if status.Code(err) != codes.ResourceExhausted {
			t.Errorf("%s: a %d-byte message: %v, want ResourceExhausted", svc, len(big), err)
		}
	}

	body := []byte(`{"spec":{"input":"` + strings.Repeat("y", 5<<20) + `"}}`)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.App.GatewayHTTPAddr().String()+"/v1/runs", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+keyAcme)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("POST /v1/runs of %d bytes: %d %.200s, want 400 or 413", len(body), resp.StatusCode, msg)
	}

	// Still serving, and a request within the limit works.
	if err := s.Healthy(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := tokens.CountTokens(ctx, &baagentv1.CountTokensRequest{Model: "gpt-4o", Text: "hello"}); err != nil || r.GetCount() == 0 {
		t.Fatalf("CountTokens after the refusals: %v %v", r, err)
	}
}

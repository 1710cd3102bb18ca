package rpcfuzz

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/internal/topology"
	"github.com/baagent/baagent/test/reliability/harness"
)

const apiKey = "rpcfuzz-key-0123456789abcdef"

// callTimeout bounds one request; a handler that hangs on bad input is a
// finding (DeadlineExceeded is not an allowed answer).
const callTimeout = 20 * time.Second

type target struct {
	suite   *harness.Suite
	methods []Method
	conns   map[string]*grpc.ClientConn
	mu      sync.Mutex
	seen    map[string]int // "mode code" → answers, for the report
}

func start(t testing.TB) *target {
	t.Helper()
	s := harness.Start(t, harness.Args(t, "-api-keys="+apiKey+"=acme"), nil)
	methods, err := Methods(topology.GRPCServices)
	if err != nil {
		t.Fatal(err)
	}
	if len(methods) < 30 {
		t.Fatalf("only %d RPCs found in the descriptors", len(methods))
	}
	conns := map[string]*grpc.ClientConn{}
	for svc := range topology.GRPCServices {
		conns[svc] = s.Dial(t, svc, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	}
	return &target{suite: s, methods: methods, conns: conns, seen: map[string]int{}}
}

// send sends one generated request and fails t on an unacceptable answer.
func (tg *target) send(t testing.TB, m Method, mode Mode, seed uint64, raw []byte) {
	t.Helper()
	req := Request(m.Desc.Input(), mode, seed, raw)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-api-key", apiKey)
	err := Call(ctx, tg.conns[m.Target], m, req)
	tg.mu.Lock()
	tg.seen[mode.String()+" "+status.Code(err).String()]++
	tg.mu.Unlock()
	if v := Verdict(err, mode); v != "" {
		t.Errorf("%s %s (seed %d, %d bytes): %s", m.Path, mode, seed, len(req), v)
	}
}

// healthy checks every service still serves and still answers a valid
// request correctly.
func (tg *target) healthy(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := tg.suite.Healthy(ctx); err != nil {
		t.Fatalf("suite unhealthy after the requests: %v", err)
	}
	resp, err := baagentv1.NewTokensServiceClient(tg.conns[config.TargetTokens]).CountTokens(ctx, &baagentv1.CountTokensRequest{Model: "gpt-4o", Text: "hello world"})
	if err != nil || resp.GetCount() == 0 {
		t.Fatalf("CountTokens after the requests: %v, %v", resp, err)
	}
	ctx = metadata.AppendToOutgoingContext(ctx, "x-api-key", apiKey)
	if _, err := baagentv1.NewGatewayServiceClient(tg.conns[config.TargetGateway]).ListSkills(ctx, &baagentv1.GatewayServiceListSkillsRequest{}); err != nil {
		t.Fatalf("gateway ListSkills after the requests: %v", err)
	}
}

// TestEveryRPCRefusesHostileRequests is the table: every RPC × every mode,
// two seeds each.
func TestEveryRPCRefusesHostileRequests(t *testing.T) {
	tg := start(t)
	garbage := [][]byte{{0xff, 0xff, 0xff, 0xff}, {0x0a, 0x7f}, {0x08}, {0x12, 0x05, 'a'}}
	for _, m := range tg.methods {
		t.Run(m.Path, func(t *testing.T) {
			for mode := range modeCount {
				if mode == ModeInvalidUTF8 && !HasStringField(m.Desc.Input()) {
					continue
				}
				for seed := range uint64(2) {
					tg.send(t, m, mode, seed, garbage[int(seed)%len(garbage)])
				}
			}
		})
	}
	tg.healthy(t)
	keys := slices.Sorted(maps.Keys(tg.seen))
	for _, k := range keys {
		t.Logf("%-28s %d", k, tg.seen[k])
	}
}

// TestInvalidUTF8IsRefusedBeforeTheHandler pins the known limitation: the
// status is grpc-go's Internal with "invalid UTF-8", so a change in grpc-go
// that makes it InvalidArgument shows up here.
func TestInvalidUTF8IsRefusedBeforeTheHandler(t *testing.T) {
	tg := start(t)
	var m Method
	for _, x := range tg.methods {
		if x.Path == "/baagent.v1.TokensService/CountTokens" {
			m = x
		}
	}
	req := Request(m.Desc.Input(), ModeInvalidUTF8, 1, nil)
	err := Call(context.Background(), tg.conns[m.Target], m, req)
	st := status.Convert(err)
	if st.Code() != codes.Internal || Verdict(err, ModeInvalidUTF8) != "" {
		t.Fatalf("invalid UTF-8 request: %v; want grpc-go's Internal 'invalid UTF-8'", err)
	}
}

// FuzzRPCs picks the RPC, the mode and the seed from the fuzzer; its seed
// corpus (every RPC in every mode once) runs as part of go test.
func FuzzRPCs(f *testing.F) {
	tg := start(f)
	for i := range tg.methods {
		for mode := range modeCount {
			f.Add(uint16(i), uint8(mode), uint64(i*int(modeCount)+int(mode)), []byte{0x0a, 0x03, 'a', 'b', 'c'})
		}
	}
	f.Fuzz(func(t *testing.T, method uint16, mode uint8, seed uint64, raw []byte) {
		m := tg.methods[int(method)%len(tg.methods)]
		tg.send(t, m, Mode(mode%uint8(modeCount)), seed, raw)
	})
	tg.healthy(f)
}

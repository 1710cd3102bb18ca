package app

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/internal/testkit/natstest"
	"github.com/baagent/baagent/internal/topology"
)

// TestMemoryTargetCapturesThroughItsOwnListener runs -target=memory alone
// on an external NATS, with -memory-addr naming nothing that answers: a
// finished run queued for capture still becomes an episode, because the
// capture consumer calls the memory service of its own process (on its
// bound listener), never another replica's address.
func TestMemoryTargetCapturesThroughItsOwnListener(t *testing.T) {
	ns := natstest.StartNATS(t)
	js, _ := natstest.Connect(t, ns.ClientURL(), "test")
	cfg := mustLoad(t, []string{
		"-target=memory", "-memory-listen=127.0.0.1:0", "-metrics-addr=127.0.0.1:0",
		"-data-dir=" + t.TempDir(), "-nats-url=" + ns.ClientURL(),
		"-memory-addr=127.0.0.1:1", "-scenarios-dir=../../../examples/scenarios",
		"-memory-community-interval=0", "-log-level=warn",
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := New(ctx, cfg, testLogger())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	testkit.Run(t, ctx, a.Run)
	waitServing(ctx, t, a.Addr(config.TargetMemory).String(), topology.GRPCServices[config.TargetMemory])

	req := &baagentv1.AddEpisodeRequest{Tenant: "acme", Content: "Question: Which region grew fastest?\nAnswer: The North region.",
		Source: baagentv1.EpisodeSource_EPISODE_SOURCE_RUN, ConversationId: "conv-1", RunId: "run-1", IdempotencyKey: "run-1"}
	data, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	subject, err := natsx.MemoryCaptureSubject("acme", "conv-1")
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(subject)
	msg.Data = data
	msg.Header.Set(nats.MsgIdHdr, "run-1")
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}

	conn, err := grpc.NewClient(a.Addr(config.TargetMemory).String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mem := baagentv1.NewMemoryServiceClient(conn)
	testkit.EventuallyContext(ctx, t, "the queued run stored as an episode", func() (bool, string) {
		resp, err := mem.ListEpisodes(ctx, &baagentv1.ListEpisodesRequest{Tenant: "acme"})
		if err != nil {
			return false, err.Error()
		}
		for _, ep := range resp.GetEpisodes() {
			if ep.GetRunId() == "run-1" && ep.GetSource() == baagentv1.EpisodeSource_EPISODE_SOURCE_RUN {
				return true, ""
			}
		}
		return false, "no episode of run-1 yet"
	})
}

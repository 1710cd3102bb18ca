// Package security checks, on the whole suite over real gRPC, that tenants
// are isolated, that secrets never reach logs, events or errors, that the
// embedded NATS is loopback only and that request size limits hold.
package security

import (
	"context"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/test/reliability/harness"
)

const question = "Which product category had the highest revenue last quarter?"

// tenantClient is the public API as one tenant sees it.
type tenantClient struct {
	key string
	gw  baagentv1.GatewayServiceClient
}

func gateway(t *testing.T, s *harness.Suite, key string) *tenantClient {
	t.Helper()
	return &tenantClient{key: key, gw: baagentv1.NewGatewayServiceClient(s.Dial(t, config.TargetGateway))}
}

func (c *tenantClient) ctx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.key)
}

// runToEnd starts a run and returns its id and every event up to the
// terminal one.
func (c *tenantClient) runToEnd(t *testing.T, spec *baagentv1.RunSpec) (*baagentv1.Run, []*baagentv1.Event) {
	t.Helper()
	ctx := c.ctx(t)
	started, err := c.gw.StartRun(ctx, &baagentv1.StartRunRequest{Spec: spec})
	if err != nil {
		t.Fatalf("StartRun: %v", err)
	}
	return started.GetRun(), c.events(t, ctx, started.GetRun().GetRunId())
}

func (c *tenantClient) events(t *testing.T, ctx context.Context, runID string) []*baagentv1.Event {
	t.Helper()
	// From the first event: a run may end before a live subscription
	// would start.
	stream, err := c.gw.StreamRunEvents(ctx, &baagentv1.StreamRunEventsRequest{RunId: runID, After: "earliest"})
	if err != nil {
		t.Fatalf("StreamRunEvents: %v", err)
	}
	var events []*baagentv1.Event
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			return events
		}
		if err != nil {
			t.Fatalf("StreamRunEvents %s after %d events: %v", runID, len(events), err)
		}
		e := resp.GetEvent()
		events = append(events, e)
		switch e.GetType() {
		case "complete", "error", "cancelled":
			return events
		}
	}
}

// eventsJSON renders events as the clients see them.
func eventsJSON(t *testing.T, events []*baagentv1.Event) string {
	t.Helper()
	var out []byte
	for _, e := range events {
		b, err := protojson.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(append(out, b...), '\n')
	}
	return string(out)
}

// dialInternal connects to an internal service directly (as a peer would).
func dialInternal(t *testing.T, s *harness.Suite, svc string) *grpc.ClientConn {
	t.Helper()
	return s.Dial(t, svc)
}

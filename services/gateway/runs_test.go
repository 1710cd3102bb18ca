package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// bigRuns gives acme n runs with inputs of size bytes.
func (e *env) bigRuns(n, size int) {
	big := strings.Repeat("x", size)
	for i := range n {
		e.orch.put(&baagentv1.Run{RunId: fmt.Sprintf("run-big-%02d", i), Tenant: "acme", Input: big})
	}
}

// TestListRunsPagesRunsTooLargeForOneMessage: twenty runs of 300 KiB do
// not fit in the default page of one gRPC message (the orchestrator's
// answer is refused by the gateway's gRPC client, whose limit is 4 MiB
// here), nor in the gateway's own limit (1.5 MiB here). ListRuns still
// answers, in pages that fit, and paging reaches every run once.
func TestListRunsPagesRunsTooLargeForOneMessage(t *testing.T) {
	const limit = 3 << 19 // the gateway's own message limit
	e := newEnv(t, Options{MaxMsgBytes: limit})
	e.bigRuns(20, 300<<10)
	ctx := testCtx(t)

	seen := map[string]int{}
	token := ""
	for pages := 0; ; pages++ {
		if pages > 20 {
			t.Fatal("paging does not end")
		}
		resp, err := e.client.ListRuns(withKey(ctx, keyAcme), &baagentv1.ListRunsRequest{PageToken: token})
		if err != nil {
			t.Fatalf("gRPC ListRuns page %d: %v", pages+1, err)
		}
		if n := proto.Size(resp); n > limit || len(resp.GetRuns()) == 0 {
			t.Fatalf("page %d: %d runs in %d bytes, limit %d", pages+1, len(resp.GetRuns()), n, limit)
		}
		for _, r := range resp.GetRuns() {
			seen[r.GetRunId()]++
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(seen) != 20 {
		t.Errorf("gRPC paging saw %d distinct runs, want 20", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("run %s listed %d times", id, n)
		}
	}

	// HTTP, the request of the report (GET /v1/runs, once a 429): the
	// same first page.
	code, body, _ := e.send(t, request{method: "GET", path: "/v1/runs", header: map[string]string{"Authorization": "Bearer " + keyAcme}})
	var page struct {
		Runs []struct {
			RunID string `json:"run_id"`
		} `json:"runs"`
		Next string `json:"next_page_token"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &page) != nil || len(page.Runs) == 0 || page.Next == "" {
		t.Fatalf("GET /v1/runs: %d %.300s, want a first page and a next_page_token", code, body)
	}
}

// TestPeerMessageTooLargeIsNotRateLimited: a peer's ResourceExhausted for
// a message over the gRPC limit is a 502 naming the limit, not a 429
// "rate limited"; a peer's real ResourceExhausted stays a 429.
func TestPeerMessageTooLargeIsNotRateLimited(t *testing.T) {
	e := newEnv(t, Options{})
	e.orch.mu.Lock()
	e.orch.fail = func(method string) error {
		switch method {
		case "GetRun":
			return status.Error(codes.ResourceExhausted, "grpc: received message larger than max (20971852 vs. 16777216)")
		case "StartRun":
			return status.Error(codes.ResourceExhausted, "tenant acme has 32 runs queued or in progress, the most it may")
		}
		return nil
	}
	e.orch.mu.Unlock()
	auth := map[string]string{"Authorization": "Bearer " + keyAcme}
	code, body, _ := e.send(t, request{method: "GET", path: "/v1/runs/run-1", header: auth})
	if code != http.StatusBadGateway || !strings.Contains(body, "max-msg-bytes") || strings.Contains(body, "RESOURCE_EXHAUSTED") {
		t.Errorf("a peer's too-large answer over HTTP: %d %s, want 502 naming max-msg-bytes", code, body)
	}
	if _, err := e.client.GetRun(withKey(testCtx(t), keyAcme), &baagentv1.GetRunRequest{RunId: "run-1"}); status.Code(err) != codes.Internal {
		t.Errorf("a peer's too-large answer over gRPC: %v, want Internal", err)
	}
	if code, body, _ := e.send(t, request{method: "POST", path: "/v1/runs", body: `{"spec":{"input":"x"}}`, header: auth}); code != http.StatusTooManyRequests {
		t.Errorf("a peer's own ResourceExhausted: %d %s, want 429", code, body)
	}
}

// TestListRunsRunLargerThanTheLimit: a single run over the gateway's
// message limit is a clear error, not a loop or a 429.
func TestListRunsRunLargerThanTheLimit(t *testing.T) {
	e := newEnv(t, Options{MaxMsgBytes: 1 << 20})
	e.bigRuns(2, 1<<20)
	_, err := e.client.ListRuns(withKey(testCtx(t), keyAcme), &baagentv1.ListRunsRequest{})
	if status.Code(err) != codes.Internal || !strings.Contains(status.Convert(err).Message(), "run-big-00") {
		t.Errorf("ListRuns with a run over the limit: %v, want Internal naming it", err)
	}
}

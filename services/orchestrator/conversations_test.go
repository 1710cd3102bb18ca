package orchestrator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/testkit"
	contextsvc "github.com/baagent/baagent/services/context"
	"github.com/baagent/baagent/services/orchestrator/internal/convindex"
	"github.com/baagent/baagent/services/toolrunner"
	"github.com/baagent/baagent/services/toolrunner/idempotency"
)

// dataDirs are the toolrunner's directories of a conversation test.
type dataDirs struct{ workspaces, artifacts string }

// realPeersIn is realPeers with the toolrunner's directories under dirs.
func realPeersIn(dirs *dataDirs) func(t testing.TB, js jetstream.JetStream, tokens baagentv1.TokensServiceClient) (baagentv1.ContextServiceServer, baagentv1.ToolRunnerServiceServer) {
	return func(t testing.TB, js jetstream.JetStream, tokens baagentv1.TokensServiceClient) (baagentv1.ContextServiceServer, baagentv1.ToolRunnerServiceServer) {
		t.Helper()
		discard := slog.New(slog.DiscardHandler)
		cs := contextsvc.New(contextsvc.Options{Logger: discard, JetStream: js, Tokens: tokens})
		dir := t.TempDir()
		dirs.workspaces, dirs.artifacts = filepath.Join(dir, "workspaces"), filepath.Join(dir, "artifacts")
		records, err := idempotency.OpenKV(context.Background(), js)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := toolrunner.New(toolrunner.Options{
			Logger: discard, WorkspaceDir: dirs.workspaces, WorkspaceSeedDir: filepath.Join("..", "..", "examples", "data"),
			ArtifactDir: dirs.artifacts, Records: records,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{}, 2)
		go func() { _ = cs.Run(ctx); done <- struct{}{} }()
		go func() { _ = tr.Run(ctx); done <- struct{}{} }()
		t.Cleanup(func() { cancel(); <-done; <-done })
		return cs, tr
	}
}

// toolResultIDs are the tool_call_ids answered in req's messages.
func toolResultIDs(req ModelRequest) []string {
	var out []string
	for _, m := range req.Messages {
		if m.GetRole() == baagentv1.Role_ROLE_TOOL {
			out = append(out, m.GetToolCallId())
		}
	}
	return out
}

// userAsked says whether a user message of req contains s.
func userAsked(req ModelRequest, s string) bool {
	return slices.ContainsFunc(req.Messages, func(m *baagentv1.ChatMessage) bool {
		return m.GetRole() == baagentv1.Role_ROLE_USER && strings.Contains(m.GetContent(), s)
	})
}

// conversationModel: a request containing WORK writes a file, runs a
// large query (its output becomes an artifact), delegates to the
// data-analyst sub-agent and answers; one containing SKILL activates a
// skill and answers; anything else is answered at once.
func conversationModel(_ context.Context, _ int, req ModelRequest) (*ModelResponse, error) {
	if isChildRequest(req) {
		return delegating(context.Background(), 0, req)
	}
	ids := toolResultIDs(req)
	last := req.Messages[len(req.Messages)-1]
	switch {
	case userAsked(req, "SKILL") && !slices.Contains(ids, "s1"):
		return callTools("Use the skill.", "s1", SkillToolName, `{"name":"sales-analysis"}`), nil
	case userAsked(req, "WORK") && !slices.Contains(ids, "w1"):
		return callTools("Write the notes.", "w1", "file_write", `{"path":"notes/secret.md","content":"private notes of this conversation"}`), nil
	case userAsked(req, "WORK") && !slices.Contains(ids, "q1"):
		return callTools("Read every order.", "q1", "sql_query", `{"query":"SELECT * FROM orders","max_rows":5000}`), nil
	case userAsked(req, "WORK") && !slices.Contains(ids, "t1"):
		return callTools("Delegate.", "t1", TaskToolName, delegateArgs), nil
	case last.GetRole() == baagentv1.Role_ROLE_USER || last.GetRole() == baagentv1.Role_ROLE_TOOL:
		return answer("Done."), nil
	}
	return answer("Done."), nil
}

func convHarness(t *testing.T, dirs *dataDirs, turns turnFunc) *harness {
	if turns == nil {
		turns = conversationModel
	}
	return newHarness(t, turns, harnessOptions{real: realPeersIn(dirs), mutate: func(o *Options) {
		o.SubAgentsDir = "../../examples/agents"
	}})
}

// runIn starts a run in conversation conv (empty: a new one) and waits
// for it to end.
func (h *harness) runIn(ctx context.Context, conv, input string) *baagentv1.Run {
	h.t.Helper()
	run := h.start(ctx, &baagentv1.RunSpec{Input: input, ConversationId: conv})
	return h.waitRun(ctx, run.GetRunId())
}

func wantCode(t *testing.T, err error, code codes.Code, what string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
}

// TestConversationListGetAndMessages covers the reads: listing newest
// activity first with paging, one conversation, its history; and the
// refusals of each (bad input, unknown ids, other tenants' ids).
func TestConversationListGetAndMessages(t *testing.T) {
	ctx := testCtx(t)
	h := convHarness(t, &dataDirs{}, nil)
	a := h.runIn(ctx, "", "First question of A?\nwith a second line")
	b := h.runIn(ctx, "", "Question of B")
	c := h.runIn(ctx, "", "Question of C")
	a2 := h.runIn(ctx, a.GetConversationId(), "Follow-up in A")

	list := func(size int32, tok string) *baagentv1.ListConversationsResponse {
		t.Helper()
		resp, err := h.client.ListConversations(ctx, &baagentv1.ListConversationsRequest{Tenant: testTenant, PageSize: size, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	all := list(0, "").GetConversations()
	var order []string
	for _, cv := range all {
		order = append(order, cv.GetConversationId())
	}
	want := []string{a.GetConversationId(), c.GetConversationId(), b.GetConversationId()}
	if !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v (newest activity first)", order, want)
	}
	ca := all[0]
	if ca.GetTitle() != "First question of A? with a second line" || ca.GetRunCount() != 2 || ca.GetLastRunId() != a2.GetRunId() ||
		ca.GetState() != baagentv1.ConversationState_CONVERSATION_STATE_ACTIVE || !ca.GetLastActivityAt().AsTime().After(ca.GetCreatedAt().AsTime()) ||
		ca.GetLastActivityAt().AsTime().Before(a2.GetFinishedAt().AsTime()) {
		t.Errorf("conversation A = %v", ca)
	}
	p1 := list(2, "")
	p2 := list(2, p1.GetNextPageToken())
	if len(p1.GetConversations()) != 2 || p1.GetNextPageToken() == "" || len(p2.GetConversations()) != 1 || p2.GetNextPageToken() != "" ||
		p2.GetConversations()[0].GetConversationId() != b.GetConversationId() {
		t.Fatalf("pages %v / %v", p1, p2)
	}

	got, err := h.client.GetConversation(ctx, &baagentv1.GetConversationRequest{Tenant: testTenant, ConversationId: c.GetConversationId()})
	if err != nil || got.GetConversation().GetTitle() != "Question of C" || got.GetConversation().GetRunCount() != 1 {
		t.Fatalf("GetConversation = %v, %v", got, err)
	}
	msgs, err := h.client.GetConversationMessages(ctx, &baagentv1.GetConversationMessagesRequest{Tenant: testTenant, ConversationId: a.GetConversationId(), PageSize: 2})
	if err != nil || len(msgs.GetMessages()) != 2 || msgs.GetTotalCount() != 4 || msgs.GetNextPageToken() == "" ||
		msgs.GetMessages()[0].GetContent() != "First question of A?\nwith a second line" {
		t.Fatalf("GetConversationMessages = %v, %v", msgs, err)
	}
	rest, err := h.client.GetConversationMessages(ctx, &baagentv1.GetConversationMessagesRequest{Tenant: testTenant, ConversationId: a.GetConversationId(), PageToken: msgs.GetNextPageToken()})
	if err != nil || len(rest.GetMessages()) != 2 || rest.GetMessages()[0].GetContent() != "Follow-up in A" {
		t.Fatalf("second page = %v, %v", rest, err)
	}

	// Refusals.
	_, err = h.client.ListConversations(ctx, &baagentv1.ListConversationsRequest{Tenant: testTenant, PageSize: MaxPageSize + 1})
	wantCode(t, err, codes.InvalidArgument, "page_size 501")
	_, err = h.client.ListConversations(ctx, &baagentv1.ListConversationsRequest{Tenant: testTenant, PageSize: -1})
	wantCode(t, err, codes.InvalidArgument, "page_size -1")
	_, err = h.client.ListConversations(ctx, &baagentv1.ListConversationsRequest{Tenant: testTenant, PageToken: "not-a-token"})
	wantCode(t, err, codes.InvalidArgument, "bad page token")
	_, err = h.client.ListConversations(ctx, &baagentv1.ListConversationsRequest{Tenant: "a.b"})
	wantCode(t, err, codes.InvalidArgument, "bad tenant")
	other, err := h.client.ListConversations(ctx, &baagentv1.ListConversationsRequest{Tenant: "other-tenant"})
	if err != nil || len(other.GetConversations()) != 0 {
		t.Fatalf("another tenant's list: %v, %v", other, err)
	}
	for _, id := range []string{"conv_unknown", a.GetConversationId()} {
		_, err = h.client.GetConversation(ctx, &baagentv1.GetConversationRequest{Tenant: "other-tenant", ConversationId: id})
		wantCode(t, err, codes.NotFound, "GetConversation of another tenant "+id)
		_, err = h.client.GetConversationMessages(ctx, &baagentv1.GetConversationMessagesRequest{Tenant: "other-tenant", ConversationId: id})
		wantCode(t, err, codes.NotFound, "messages of another tenant")
		_, err = h.client.EndConversation(ctx, &baagentv1.EndConversationRequest{Tenant: "other-tenant", ConversationId: id})
		wantCode(t, err, codes.NotFound, "EndConversation of another tenant")
		_, err = h.client.DeleteConversation(ctx, &baagentv1.OrchestratorServiceDeleteConversationRequest{Tenant: "other-tenant", ConversationId: id})
		wantCode(t, err, codes.NotFound, "DeleteConversation of another tenant")
	}
	_, err = h.client.GetConversation(ctx, &baagentv1.GetConversationRequest{Tenant: testTenant, ConversationId: "conv.with.dots"})
	wantCode(t, err, codes.NotFound, "an id no conversation can have")
	_, err = h.client.GetConversation(ctx, &baagentv1.GetConversationRequest{Tenant: testTenant})
	wantCode(t, err, codes.InvalidArgument, "no conversation_id")
	_, err = h.client.GetConversationMessages(ctx, &baagentv1.GetConversationMessagesRequest{Tenant: testTenant, ConversationId: a.GetConversationId(), PageSize: MaxHistoryPageSize + 1})
	wantCode(t, err, codes.InvalidArgument, "history page_size 1001")
	_, err = h.client.GetConversationMessages(ctx, &baagentv1.GetConversationMessagesRequest{Tenant: testTenant, ConversationId: a.GetConversationId(), PageToken: "garbage"})
	wantCode(t, err, codes.InvalidArgument, "bad history page token")
	_, err = h.client.EndConversation(ctx, &baagentv1.EndConversationRequest{Tenant: testTenant, ConversationId: "../x"})
	wantCode(t, err, codes.InvalidArgument, "EndConversation bad id")
	_, err = h.client.DeleteConversation(ctx, &baagentv1.OrchestratorServiceDeleteConversationRequest{Tenant: "", ConversationId: "c"})
	wantCode(t, err, codes.InvalidArgument, "DeleteConversation no tenant")
}

// holdingModel holds every model call of a request containing HOLD until
// release is closed.
func holdingModel(release <-chan struct{}) turnFunc {
	return func(ctx context.Context, n int, req ModelRequest) (*ModelResponse, error) {
		if userAsked(req, "HOLD") {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return conversationModel(ctx, n, req)
	}
}

// End frees the workspace, keeps the history and refuses later runs;
// End and Delete are refused while a run of the conversation is active.
func TestEndConversation(t *testing.T) {
	ctx := testCtx(t)
	dirs := &dataDirs{}
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	h := convHarness(t, dirs, holdingModel(release))

	run := h.runIn(ctx, "", "WORK on the notes")
	conv := run.GetConversationId()
	if run.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED {
		t.Fatalf("run %v", run)
	}
	ws := filesNaming(t, dirs.workspaces, "secret.md")
	if len(ws) == 0 {
		t.Fatal("the run wrote no file")
	}

	held := h.start(ctx, &baagentv1.RunSpec{Input: "HOLD on", ConversationId: conv})
	_, err := h.client.EndConversation(ctx, &baagentv1.EndConversationRequest{Tenant: testTenant, ConversationId: conv})
	wantCode(t, err, codes.FailedPrecondition, "End while a run is active")
	if !strings.Contains(status.Convert(err).Message(), held.GetRunId()) {
		t.Errorf("refusal does not name the active run: %v", err)
	}
	_, err = h.client.DeleteConversation(ctx, &baagentv1.OrchestratorServiceDeleteConversationRequest{Tenant: testTenant, ConversationId: conv})
	wantCode(t, err, codes.FailedPrecondition, "Delete while a run is active")
	got, err := h.client.GetConversation(ctx, &baagentv1.GetConversationRequest{Tenant: testTenant, ConversationId: conv})
	if err != nil || got.GetConversation().GetState() != baagentv1.ConversationState_CONVERSATION_STATE_ACTIVE {
		t.Fatalf("after refused End/Delete: %v, %v; want ACTIVE", got, err)
	}
	free()
	h.waitRun(ctx, held.GetRunId())

	end, err := h.client.EndConversation(ctx, &baagentv1.EndConversationRequest{Tenant: testTenant, ConversationId: conv})
	if err != nil || end.GetConversation().GetState() != baagentv1.ConversationState_CONVERSATION_STATE_ENDED ||
		end.GetConversation().GetEndedAt() == nil || end.GetBytesFreed() <= 0 || end.GetArtifactsDeleted() < 1 {
		t.Fatalf("EndConversation = %v, %v", end, err)
	}
	if left := filesNaming(t, dirs.workspaces, "secret.md"); len(left) != 0 {
		t.Fatalf("workspace files left after End: %v", left)
	}
	_, err = h.client.StartRun(ctx, &baagentv1.OrchestratorServiceStartRunRequest{Tenant: testTenant, Spec: &baagentv1.RunSpec{Input: "more", ConversationId: conv, IdempotencyKey: "k1"}})
	wantCode(t, err, codes.FailedPrecondition, "StartRun into an ended conversation")
	msgs, err := h.client.GetConversationMessages(ctx, &baagentv1.GetConversationMessagesRequest{Tenant: testTenant, ConversationId: conv})
	if err != nil || msgs.GetTotalCount() == 0 {
		t.Fatalf("history after End: %v, %v", msgs, err)
	}
	again, err := h.client.EndConversation(ctx, &baagentv1.EndConversationRequest{Tenant: testTenant, ConversationId: conv})
	if err != nil || !again.GetConversation().GetEndedAt().AsTime().Equal(end.GetConversation().GetEndedAt().AsTime()) {
		t.Fatalf("End again = %v, %v", again, err)
	}
	// The refused run's idempotency key was released: it starts a run
	// in a new conversation.
	fresh, err := h.client.StartRun(ctx, &baagentv1.OrchestratorServiceStartRunRequest{Tenant: testTenant, Spec: &baagentv1.RunSpec{Input: "more", IdempotencyKey: "k1"}})
	if err != nil || fresh.GetRun().GetConversationId() == conv {
		t.Fatalf("StartRun with the released key: %v, %v", fresh, err)
	}
	h.waitRun(ctx, fresh.GetRun().GetRunId())
}

// A run whose terminal event is stored but whose final record is not yet
// is not taken for active: End waits for the record.
func TestEndWaitsForTheFinalRecord(t *testing.T) {
	ctx := testCtx(t)
	h := convHarness(t, &dataDirs{}, nil)
	run := h.runIn(ctx, "", "Question")
	store, err := h.srv.runStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Put the record back to RUNNING, as it is between the terminal
	// event and the final record, and store the final record shortly.
	// The run's own final record may itself come after its terminal
	// event (on a busy machine, well after): take it once it is stored.
	var final *baagentv1.Run
	testkit.Eventually(t, 30*time.Second, "the run's final record", func() bool {
		rec, _, err := store.Get(ctx, testTenant, run.GetRunId())
		if err != nil {
			t.Fatal(err)
		}
		final = rec
		return isFinished(rec.GetState())
	})
	running := &baagentv1.Run{RunId: final.GetRunId(), Tenant: testTenant, ConversationId: final.GetConversationId(), State: baagentv1.RunState_RUN_STATE_RUNNING, CreatedAt: final.GetCreatedAt()}
	if err := store.Put(ctx, running); err != nil {
		t.Fatal(err)
	}
	// Never finished: the wait is bounded and the answer says to retry.
	runs, err := h.srv.conversationRuns(ctx, store, testTenant, run.GetConversationId())
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := h.srv.refuseActive(short, store, run.GetConversationId(), runs); status.Code(err) != codes.Unavailable {
		t.Fatalf("a run whose final record never comes: %v, want Unavailable", err)
	}
	// The executor's finish, a moment later: End waits for it.
	done := make(chan error, 1)
	time.AfterFunc(200*time.Millisecond, func() { done <- store.Put(context.Background(), final) })
	if _, err := h.client.EndConversation(ctx, &baagentv1.EndConversationRequest{Tenant: testTenant, ConversationId: run.GetConversationId()}); err != nil {
		t.Fatalf("End of a conversation whose run is finishing: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A run with no terminal event is active: refused.
	if err := store.Put(ctx, &baagentv1.Run{RunId: "run_never_started", Tenant: testTenant, ConversationId: run.GetConversationId(), State: baagentv1.RunState_RUN_STATE_QUEUED, CreatedAt: timestamppb.Now()}); err != nil {
		t.Fatal(err)
	}
	runs, err = h.srv.conversationRuns(ctx, store, testTenant, run.GetConversationId())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.srv.refuseActive(ctx, store, run.GetConversationId(), runs); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "run run_never_started of conversation") {
		t.Fatalf("a queued run: %v, want FailedPrecondition naming it", err)
	}
}

// Conversations whose runs were stored before the index are backfilled
// from the run records.
func TestConversationBackfill(t *testing.T) {
	ctx := testCtx(t)
	h := convHarness(t, &dataDirs{}, nil)
	store, err := h.srv.runStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour)
	for i, r := range []struct{ id, conv, input string }{
		{"run_old_1", "conv_old", "The first old question"},
		{"run_old_2", "conv_old", "The second old question"},
		{"run_old_3", "conv_old2", "Another"},
	} {
		at := base.Add(time.Duration(i) * time.Minute)
		if err := store.Put(ctx, &baagentv1.Run{RunId: r.id, Tenant: "legacy", ConversationId: r.conv, Input: r.input,
			State: baagentv1.RunState_RUN_STATE_COMPLETED, CreatedAt: timestamppb.New(at), FinishedAt: timestamppb.New(at.Add(time.Second))}); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := h.client.ListConversations(ctx, &baagentv1.ListConversationsRequest{Tenant: "legacy"})
	if err != nil || len(resp.GetConversations()) != 2 {
		t.Fatalf("ListConversations = %v, %v", resp, err)
	}
	old := resp.GetConversations()[1]
	if resp.GetConversations()[0].GetConversationId() != "conv_old2" || old.GetConversationId() != "conv_old" || old.GetRunCount() != 2 ||
		old.GetTitle() != "The first old question" || old.GetLastRunId() != "run_old_2" {
		t.Fatalf("backfilled %v", resp.GetConversations())
	}
	// Once per tenant: a record stored later is not backfilled again.
	if err := store.Put(ctx, &baagentv1.Run{RunId: "run_old_4", Tenant: "legacy", ConversationId: "conv_old3", Input: "x", State: baagentv1.RunState_RUN_STATE_COMPLETED, CreatedAt: timestamppb.Now()}); err != nil {
		t.Fatal(err)
	}
	h2, _, stop := h.replica("replica-2")
	defer stop()
	if err := h2.ensureBackfilled(ctx, "legacy"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.GetConversation(ctx, &baagentv1.GetConversationRequest{Tenant: "legacy", ConversationId: "conv_old3"}); status.Code(err) != codes.NotFound {
		t.Fatalf("a second backfill ran: %v", err)
	}
}

// Several replicas start runs in one conversation at once: every run is
// counted (compare-and-set writes).
func TestConversationIndexAcrossReplicas(t *testing.T) {
	ctx := testCtx(t)
	h := convHarness(t, &dataDirs{}, nil)
	first := h.runIn(ctx, "", "Question")
	_, c2, stop := h.replica("replica-2")
	defer stop()
	var wg sync.WaitGroup
	ids := make(chan string, 8)
	for i := range 8 {
		c := h.client
		if i%2 == 1 {
			c = c2
		}
		wg.Go(func() {
			resp, err := c.StartRun(ctx, &baagentv1.OrchestratorServiceStartRunRequest{Tenant: testTenant, Spec: &baagentv1.RunSpec{Input: "more", ConversationId: first.GetConversationId()}})
			if err != nil {
				t.Error(err)
				return
			}
			ids <- resp.GetRun().GetRunId()
		})
	}
	wg.Wait()
	close(ids)
	for id := range ids {
		h.waitRun(ctx, id)
	}
	got, err := h.client.GetConversation(ctx, &baagentv1.GetConversationRequest{Tenant: testTenant, ConversationId: first.GetConversationId()})
	if err != nil || got.GetConversation().GetRunCount() != 9 {
		t.Fatalf("GetConversation = %v, %v; want 9 runs", got, err)
	}
}

// filesNaming lists the files under root whose path or content contains
// any of needles.
func filesNaming(t *testing.T, root string, needles ...string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, n := range needles {
			if strings.Contains(rel, n) {
				out = append(out, rel)
				return nil
			}
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, n := range needles {
			if bytes.Contains(b, []byte(n)) {
				out = append(out, rel+" (content)")
				return nil
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// jetStreamNaming reads every message of every stream (KV buckets and
// object stores are streams too) and returns those whose subject, headers
// or data contain any of needles.
func jetStreamNaming(ctx context.Context, t *testing.T, js jetstream.JetStream, needles ...string) []string {
	t.Helper()
	var out []string
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 0 {
			continue
		}
		check := func(subject string, header map[string][]string, data []byte) {
			var hdr strings.Builder
			for k, vs := range header {
				fmt.Fprintf(&hdr, "%s:%s\n", k, strings.Join(vs, ","))
			}
			for _, n := range needles {
				if strings.Contains(subject, n) || strings.Contains(hdr.String(), n) || bytes.Contains(data, []byte(n)) {
					out = append(out, fmt.Sprintf("%s %s names %s", name, subject, n))
					break
				}
			}
		}
		if info.Config.Retention == jetstream.WorkQueuePolicy {
			// A work queue takes no ordered consumer: read it by sequence.
			for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
				msg, err := st.GetMsg(ctx, seq)
				if errors.Is(err, jetstream.ErrMsgNotFound) {
					continue
				}
				if err != nil {
					t.Fatalf("stream %s seq %d: %v", name, seq, err)
				}
				check(msg.Subject, msg.Header, msg.Data)
			}
			continue
		}
		cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		for range info.State.Msgs {
			msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
			if err != nil {
				t.Fatalf("stream %s: %v", name, err)
			}
			check(msg.Subject(), msg.Headers(), msg.Data())
		}
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDeleteConversationRemovesEverything: real runs in a conversation
// write a file, produce an artifact, delegate to a sub-agent and activate
// a skill; after the deletion no message of any stream, KV bucket or
// object store, and no file of the toolrunner, names the conversation, its
// runs or its sub-agent's conversation, while a second conversation is
// untouched. A second delete is NotFound.
func TestDeleteConversationRemovesEverything(t *testing.T) {
	ctx := testCtx(t)
	dirs := &dataDirs{}
	mem := &fakeMemory{}
	memClient := mem.client(t)
	h := newHarness(t, conversationModel, harnessOptions{real: realPeersIn(dirs), mutate: func(o *Options) {
		o.SubAgentsDir = "../../examples/agents"
		o.Memory = memClient
	}})

	r1 := h.start(ctx, &baagentv1.RunSpec{Input: "WORK on the notes", IdempotencyKey: "delete-me-key"})
	r1 = h.waitRun(ctx, r1.GetRunId())
	conv := r1.GetConversationId()
	r2 := h.runIn(ctx, conv, "SKILL please")
	keep := h.runIn(ctx, "", "WORK in another conversation")
	for _, r := range []*baagentv1.Run{r1, r2, keep} {
		if r.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED {
			t.Fatalf("run %s: %v", r.GetRunId(), r)
		}
	}
	children := h.children(ctx, r1.GetRunId())
	if len(children) != 1 {
		t.Fatalf("sub-agent runs of %s: %v", r1.GetRunId(), children)
	}
	child := children[0]
	needles := []string{conv, r1.GetRunId(), r2.GetRunId(), child.GetRunId(), child.GetConversationId()}

	// Everything exists first.
	before := jetStreamNaming(ctx, t, h.js, needles...)
	if len(before) < 10 {
		t.Fatalf("before the deletion only %d messages name the conversation: %v", len(before), before)
	}
	t.Logf("before the deletion %d messages name the conversation, its runs or its sub-agent's conversation", len(before))
	if found := filesNaming(t, dirs.workspaces, conv); len(found) == 0 {
		t.Fatal("no workspace of the conversation before the deletion")
	}
	if found := filesNaming(t, dirs.artifacts, conv); len(found) == 0 {
		t.Fatal("no artifact of the conversation before the deletion")
	}
	stacks, _ := h.srv.skillStacks(ctx)
	if saved, err := stacks.Load(ctx, testTenant, conv); err != nil || saved == nil {
		t.Fatalf("no saved skill stack before the deletion: %v", err)
	}
	if n := idemRecords(ctx, t, h.js); n == 0 {
		t.Fatal("no tool idempotency record before the deletion")
	}
	// The completed top-level runs wait in the capture queue (no
	// consumer yet): one each, none for the sub-agent run.
	if n := captureCount(ctx, t, h.js, conv); n != 2 {
		t.Fatalf("%d capture requests queued for the conversation, want 2", n)
	}
	// A consumer turns the other conversation's into an episode; this
	// conversation's two are remembered too.
	stopConsumer := consumeCaptures(t, h.js, memClient)
	testkit.Eventually(t, 20*time.Second, "the runs' episodes stored", func() bool {
		return len(mem.of(conv)) == 2 && len(mem.of(keep.GetConversationId())) == 1
	})
	stopConsumer()
	// A capture still queued when the conversation is deleted goes too:
	// queue one by hand (a run completing as the deletion starts) while
	// no consumer takes it.
	subj, _ := natsx.MemoryCaptureSubject(testTenant, conv)
	if _, err := h.js.Publish(ctx, subj, []byte("late capture "+conv)); err != nil {
		t.Fatal(err)
	}

	resp, err := h.client.DeleteConversation(ctx, &baagentv1.OrchestratorServiceDeleteConversationRequest{Tenant: testTenant, ConversationId: conv})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted: %v", resp)
	if resp.GetRunsDeleted() != 3 || resp.GetEventsDeleted() < 10 || resp.GetMessagesDeleted() < 8 || resp.GetArtifactsDeleted() < 1 || resp.GetBytesFreed() <= 0 {
		t.Errorf("counts %v", resp)
	}
	if found := jetStreamNaming(ctx, t, h.js, needles...); len(found) != 0 {
		t.Errorf("left in JetStream after the deletion:\n%s", strings.Join(found, "\n"))
	}
	if eps := mem.of(conv); len(eps) != 0 {
		t.Errorf("%d episodes of the deleted conversation remain", len(eps))
	}
	if eps := mem.of(keep.GetConversationId()); len(eps) != 1 {
		t.Errorf("the other conversation's episodes: %d, want 1", len(eps))
	}
	for _, d := range []string{dirs.workspaces, dirs.artifacts} {
		if found := filesNaming(t, d, needles...); len(found) != 0 {
			t.Errorf("left under %s: %v", d, found)
		}
	}
	// The other conversation is untouched.
	if found := jetStreamNaming(ctx, t, h.js, keep.GetConversationId(), keep.GetRunId()); len(found) < 10 {
		t.Errorf("the other conversation lost data: %v", found)
	}
	if found := filesNaming(t, dirs.workspaces, keep.GetConversationId()); len(found) == 0 {
		t.Error("the other conversation's workspace is gone")
	}
	if _, err := h.client.GetRun(ctx, &baagentv1.OrchestratorServiceGetRunRequest{Tenant: testTenant, RunId: keep.GetRunId()}); err != nil {
		t.Errorf("the other conversation's run: %v", err)
	}
	if n := idemRecords(ctx, t, h.js); n == 0 {
		t.Error("the other conversation's tool idempotency records are gone")
	}
	_, err = h.client.DeleteConversation(ctx, &baagentv1.OrchestratorServiceDeleteConversationRequest{Tenant: testTenant, ConversationId: conv})
	wantCode(t, err, codes.NotFound, "second delete")
	_, err = h.client.GetRun(ctx, &baagentv1.OrchestratorServiceGetRunRequest{Tenant: testTenant, RunId: r1.GetRunId()})
	wantCode(t, err, codes.NotFound, "deleted run")
	// The client's idempotency key is free again.
	again, err := h.client.StartRun(ctx, &baagentv1.OrchestratorServiceStartRunRequest{Tenant: testTenant, Spec: &baagentv1.RunSpec{Input: "x", IdempotencyKey: "delete-me-key"}})
	if err != nil || again.GetRun().GetRunId() == r1.GetRunId() {
		t.Fatalf("StartRun with the deleted run's key: %v, %v", again, err)
	}
	h.waitRun(ctx, again.GetRun().GetRunId())
}

// A deletion interrupted after the entry was marked DELETING is resumed
// by calling delete again; runs into it are refused meanwhile.
func TestDeleteConversationResumes(t *testing.T) {
	ctx := testCtx(t)
	h := convHarness(t, &dataDirs{}, nil)
	run := h.runIn(ctx, "", "WORK resumable")
	conv := run.GetConversationId()
	// Interrupted: marked DELETING, then the events of the first run
	// purged, nothing else.
	idx, err := h.srv.convIndex(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := idx.Update(ctx, testTenant, conv, func(c *convindex.Entry) (*convindex.Entry, error) {
		c.PrevState, c.State = c.State, convindex.StateDeleting
		return c, nil
	}); err != nil {
		t.Fatal(err)
	}
	subj, _ := natsx.EventSubject(testTenant, run.GetRunId())
	if _, err := natsx.PurgeSubject(ctx, h.js, natsx.StreamEvents, subj); err != nil {
		t.Fatal(err)
	}
	_, err = h.client.StartRun(ctx, &baagentv1.OrchestratorServiceStartRunRequest{Tenant: testTenant, Spec: &baagentv1.RunSpec{Input: "x", ConversationId: conv}})
	wantCode(t, err, codes.FailedPrecondition, "StartRun into a deleting conversation")
	_, err = h.client.EndConversation(ctx, &baagentv1.EndConversationRequest{Tenant: testTenant, ConversationId: conv})
	wantCode(t, err, codes.FailedPrecondition, "End of a deleting conversation")
	got, err := h.client.GetConversation(ctx, &baagentv1.GetConversationRequest{Tenant: testTenant, ConversationId: conv})
	if err != nil || got.GetConversation().GetState() != baagentv1.ConversationState_CONVERSATION_STATE_DELETING {
		t.Fatalf("GetConversation = %v, %v", got, err)
	}
	resp, err := h.client.DeleteConversation(ctx, &baagentv1.OrchestratorServiceDeleteConversationRequest{Tenant: testTenant, ConversationId: conv})
	if err != nil || resp.GetRunsDeleted() != 2 || resp.GetMessagesDeleted() == 0 {
		t.Fatalf("resumed delete = %v, %v", resp, err)
	}
	if found := jetStreamNaming(ctx, t, h.js, conv, run.GetRunId()); len(found) != 0 {
		t.Errorf("left after the resumed deletion: %v", found)
	}
}

// idemRecords counts the toolrunner's idempotency records.
func idemRecords(ctx context.Context, t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	st, err := js.Stream(ctx, "KV_"+natsx.BucketToolIdempotency)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// BenchmarkConversationIndex is what the index adds to a run: StartRun's
// reservation of the conversation's entry (a read and a compare-and-set
// write), for a new conversation and for one continued, and the whole
// index work of a run in a continued conversation (the reservation, then
// the activity update when the run ends).
func BenchmarkConversationIndex(b *testing.B) {
	_, js := startJetStream(b)
	s := New(Options{Logger: slog.New(slog.DiscardHandler), JetStream: js, Model: &scriptedModel{}, Context: baagentv1.NewContextServiceClient(nil),
		Skills: baagentv1.NewSkillsServiceClient(nil), ToolRunner: baagentv1.NewToolRunnerServiceClient(nil), Tokens: baagentv1.NewTokensServiceClient(nil), DefaultModel: "m"})
	ctx := context.Background()
	n := 0
	rec := func(conv string) *baagentv1.Run {
		n++
		return &baagentv1.Run{RunId: fmt.Sprintf("run_%08d", n), Tenant: "bench", ConversationId: conv, Input: "Which region grew fastest last quarter?", CreatedAt: timestamppb.Now()}
	}
	ended := func(r *baagentv1.Run) {
		r.FinishedAt = timestamppb.Now()
		s.conversationActivity(ctx, r)
	}
	b.Run("StartRun/new-conversation", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.reserveConversation(ctx, rec(fmt.Sprintf("conv_new_%d", n))); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("StartRun/continued", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r := rec("conv_started")
			if _, err := s.reserveConversation(ctx, r); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			ended(r) // as the run would: the entry lists no run as starting
			b.StartTimer()
		}
	})
	b.Run("StartRun+RunEnd/continued", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r := rec("conv_ended")
			if _, err := s.reserveConversation(ctx, r); err != nil {
				b.Fatal(err)
			}
			ended(r)
		}
	})
}

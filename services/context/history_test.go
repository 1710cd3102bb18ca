package contextsvc

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
)

func appendAll(t testing.TB, c baagentv1.ContextServiceClient, tenant, conv string, msgs []*baagentv1.ChatMessage) {
	t.Helper()
	for start := 0; start < len(msgs); start += 500 {
		end := min(len(msgs), start+500)
		if _, err := c.Append(context.Background(), &baagentv1.AppendRequest{Tenant: tenant, ConversationId: conv, Messages: msgs[start:end]}); err != nil {
			t.Fatalf("Append: %v", err)
		}
	}
}

func readAll(t testing.TB, c baagentv1.ContextServiceClient, tenant, conv string, pageSize int32) []*baagentv1.ChatMessage {
	t.Helper()
	var out []*baagentv1.ChatMessage
	tok := ""
	for {
		resp, err := c.GetHistory(context.Background(), &baagentv1.GetHistoryRequest{Tenant: tenant, ConversationId: conv, PageSize: pageSize, PageToken: tok})
		if err != nil {
			t.Fatalf("GetHistory: %v", err)
		}
		out = append(out, resp.GetMessages()...)
		if int(resp.GetTotalCount()) < len(out) {
			t.Fatalf("total_count %d below messages read %d", resp.GetTotalCount(), len(out))
		}
		if resp.GetNextPageToken() == "" {
			return out
		}
		tok = resp.GetNextPageToken()
	}
}

func TestAppendIdempotentAndDefaults(t *testing.T) {
	t.Parallel()

	e := newEnv(t, Options{})
	ctx := t.Context()
	msgs := []*baagentv1.ChatMessage{
		{Id: "u1", Role: roleUser, Content: "What were sales by region?"},
		{Id: "a1", Role: roleAssistant, ToolCalls: []*baagentv1.ToolCall{{Id: "call_1", Name: "sql_query", Arguments: `{}`}}},
		{Id: "t1", Role: roleTool, ToolCallId: "call_1", Content: "north 42"},
		{Id: "t2", Role: roleTool, ToolCallId: "call_1", Content: "no such table", IsError: true},
		{Role: roleSystem, Content: "be brief"},
		{Id: "a2", Role: roleAssistant, Content: "North leads.", Importance: baagentv1.MessageImportance_MESSAGE_IMPORTANCE_LOW},
	}
	resp, err := e.client.Append(ctx, &baagentv1.AppendRequest{Tenant: "acme", ConversationId: "conv.1:x", Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetAppended() != 6 || resp.GetDuplicates() != 0 || resp.GetMessageCount() != 6 || len(resp.GetMessageIds()) != 6 {
		t.Fatalf("first append: %v", resp)
	}
	if resp.GetMessageIds()[4] == "" || resp.GetMessageIds()[0] != "u1" {
		t.Fatalf("ids: %v", resp.GetMessageIds())
	}
	// The same request again, plus one new message and one repeated within
	// the request: only the new one is stored.
	again := append(msgs[:4:4], msgs[5], //nolint:gocritic // a new slice on purpose (full slice expression)
		&baagentv1.ChatMessage{Id: "u2", Role: roleUser, Content: "and by quarter?"}, &baagentv1.ChatMessage{Id: "u2", Role: roleUser, Content: "dup"})
	resp, err = e.client.Append(ctx, &baagentv1.AppendRequest{Tenant: "acme", ConversationId: "conv.1:x", Messages: again})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetAppended() != 1 || resp.GetDuplicates() != 6 || resp.GetMessageCount() != 7 {
		t.Fatalf("second append: %v", resp)
	}

	got := readAll(t, e.client, "acme", "conv.1:x", 0)
	want := []baagentv1.MessageImportance{1, 3, 2, 1, 4, 4, 1} // user, thought, observation, error, system, explicit LOW, user
	if len(got) != len(want) {
		t.Fatalf("history has %d messages, want %d", len(got), len(want))
	}
	for i, m := range got {
		if m.GetImportance() != want[i] {
			t.Errorf("message %d (%s) importance %v, want %v", i, m.GetId(), m.GetImportance(), want[i])
		}
		if m.GetCreatedAt() == nil {
			t.Errorf("message %d has no created_at", i)
		}
	}
	if got[6].GetContent() != "and by quarter?" {
		t.Errorf("the first of two messages with one id must win, got %q", got[6].GetContent())
	}

	// Tenants and conversations are separate.
	if h := readAll(t, e.client, "other", "conv.1:x", 0); len(h) != 0 {
		t.Errorf("another tenant sees %d messages", len(h))
	}
	if h := readAll(t, e.client, "acme", "conv-1-x", 0); len(h) != 0 {
		t.Errorf("a look-alike conversation id sees %d messages", len(h))
	}
}

func TestGetHistoryPaging(t *testing.T) {
	t.Parallel()

	e := newEnv(t, Options{})
	msgs, _ := genConversation(convSpec{rounds: 40, stepsPerRnd: 2, outputWords: 5, skillAtRound: -1}, 1)
	appendAll(t, e.client, "t", "c", msgs)
	for _, size := range []int32{1, 7, 100, 1000} {
		got := readAll(t, e.client, "t", "c", size)
		if len(got) != len(msgs) {
			t.Fatalf("page size %d: %d messages, want %d", size, len(got), len(msgs))
		}
		for i := range got {
			if got[i].GetId() != msgs[i].GetId() || got[i].GetContent() != msgs[i].GetContent() {
				t.Fatalf("page size %d: message %d is %s, want %s", size, i, got[i].GetId(), msgs[i].GetId())
			}
		}
	}
	// A page token stays valid while the conversation grows.
	first, err := e.client.GetHistory(t.Context(), &baagentv1.GetHistoryRequest{Tenant: "t", ConversationId: "c", PageSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, e.client, "t", "c", []*baagentv1.ChatMessage{{Id: "late", Role: roleUser, Content: "late"}})
	rest := readAllFrom(t, e.client, first.GetNextPageToken())
	if len(rest) != len(msgs)-10+1 || rest[0].GetId() != msgs[10].GetId() || rest[len(rest)-1].GetId() != "late" {
		t.Fatalf("resumed paging read %d messages", len(rest))
	}
	_, err = e.client.GetHistory(t.Context(), &baagentv1.GetHistoryRequest{Tenant: "t", ConversationId: "c", PageToken: "bm9wZQ"})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("foreign page token: %v", err)
	}
}

func readAllFrom(t *testing.T, c baagentv1.ContextServiceClient, tok string) []*baagentv1.ChatMessage {
	var out []*baagentv1.ChatMessage
	for tok != "" {
		resp, err := c.GetHistory(t.Context(), &baagentv1.GetHistoryRequest{Tenant: "t", ConversationId: "c", PageSize: 50, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, resp.GetMessages()...)
		tok = resp.GetNextPageToken()
	}
	return out
}

func TestDeleteConversation(t *testing.T) {
	t.Parallel()

	e := newEnv(t, Options{})
	msgs, _ := genConversation(convSpec{rounds: 3, stepsPerRnd: 1, outputWords: 5, skillAtRound: -1}, 2)
	appendAll(t, e.client, "t", "gone", msgs)
	appendAll(t, e.client, "t", "kept", msgs)
	resp, err := e.client.DeleteConversation(t.Context(), &baagentv1.DeleteConversationRequest{Tenant: "t", ConversationId: "gone"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetDeletedCount() != int64(len(msgs)) {
		t.Fatalf("deleted %d, want %d", resp.GetDeletedCount(), len(msgs))
	}
	if h := readAll(t, e.client, "t", "gone", 0); len(h) != 0 {
		t.Fatalf("%d messages after delete", len(h))
	}
	if h := readAll(t, e.client, "t", "kept", 0); len(h) != len(msgs) {
		t.Fatalf("the other conversation lost messages: %d", len(h))
	}
	// The same ids may be appended again after a delete.
	appendAll(t, e.client, "t", "gone", msgs[:2])
	if h := readAll(t, e.client, "t", "gone", 0); len(h) != 2 {
		t.Fatalf("%d messages after re-append", len(h))
	}
}

// TestReplicasShareHistory runs two servers on one JetStream, as two
// replicas would: appends through either are seen by both, deletes too, and
// an id appended through one is a duplicate through the other.
func TestReplicasShareHistory(t *testing.T) {
	t.Parallel()

	a := newEnv(t, Options{})
	b := newEnvOn(t, a.nats, Options{})
	appendAll(t, a.client, "t", "c", []*baagentv1.ChatMessage{{Id: "1", Role: roleUser, Content: "one"}})
	if h := readAll(t, b.client, "t", "c", 0); len(h) != 1 {
		t.Fatalf("replica b sees %d messages", len(h))
	}
	resp, err := b.client.Append(t.Context(), &baagentv1.AppendRequest{Tenant: "t", ConversationId: "c", Messages: []*baagentv1.ChatMessage{
		{Id: "1", Role: roleUser, Content: "one"}, {Id: "2", Role: roleAssistant, Content: "two"}}})
	if err != nil || resp.GetAppended() != 1 || resp.GetDuplicates() != 1 {
		t.Fatalf("append through b: %v %v", resp, err)
	}
	// a appends next without having seen b's message: its cached copy is
	// refreshed, the order is kept.
	appendAll(t, a.client, "t", "c", []*baagentv1.ChatMessage{{Id: "3", Role: roleUser, Content: "three"}})
	for _, c := range []baagentv1.ContextServiceClient{a.client, b.client} {
		h := readAll(t, c, "t", "c", 0)
		if len(h) != 3 || h[0].GetId() != "1" || h[1].GetId() != "2" || h[2].GetId() != "3" {
			t.Fatalf("history %v", ids(h))
		}
	}
	// b appends without reading the stream first (its copy is loaded): an
	// id a stored meanwhile is found a duplicate, not stored twice.
	appendAll(t, a.client, "t", "c", []*baagentv1.ChatMessage{{Id: "5", Role: roleUser, Content: "five"}})
	resp, err = b.client.Append(t.Context(), &baagentv1.AppendRequest{Tenant: "t", ConversationId: "c", Messages: []*baagentv1.ChatMessage{
		{Id: "5", Role: roleUser, Content: "five"}, {Id: "6", Role: roleAssistant, Content: "six"}}})
	if err != nil || resp.GetAppended() != 1 || resp.GetDuplicates() != 1 {
		t.Fatalf("append through b with a stale copy: %v %v", resp, err)
	}
	if h := readAll(t, a.client, "t", "c", 0); len(h) != 5 || h[3].GetId() != "5" || h[4].GetId() != "6" {
		t.Fatalf("history %v", ids(h))
	}
	if _, err := b.client.DeleteConversation(t.Context(), &baagentv1.DeleteConversationRequest{Tenant: "t", ConversationId: "c"}); err != nil {
		t.Fatal(err)
	}
	appendAll(t, b.client, "t", "c", []*baagentv1.ChatMessage{{Id: "4", Role: roleUser, Content: "four"}})
	if h := readAll(t, a.client, "t", "c", 0); len(h) != 1 || h[0].GetId() != "4" {
		t.Fatalf("replica a after delete and append elsewhere: %v", ids(h))
	}
}

// TestConcurrentAppends appends from two replicas at once: every message is
// stored exactly once.
func TestConcurrentAppends(t *testing.T) {
	t.Parallel()

	a := newEnv(t, Options{})
	b := newEnvOn(t, a.nats, Options{})
	const n = 60
	errs := make(chan error, 2*n)
	for _, c := range []baagentv1.ContextServiceClient{a.client, b.client} {
		go func() {
			for i := range n {
				_, err := c.Append(context.Background(), &baagentv1.AppendRequest{Tenant: "t", ConversationId: "c", Messages: []*baagentv1.ChatMessage{
					{Id: "m" + itoa(i), Role: roleUser, Content: "x"}}})
				errs <- err
			}
		}()
	}
	for range 2 * n {
		if err := <-errs; err != nil && status.Code(err) != codes.Aborted {
			t.Fatal(err)
		}
	}
	h := readAll(t, a.client, "t", "c", 0)
	seen := map[string]bool{}
	for _, m := range h {
		if seen[m.GetId()] {
			t.Fatalf("id %s stored twice", m.GetId())
		}
		seen[m.GetId()] = true
	}
	if len(seen) != n {
		t.Fatalf("%d distinct messages, want %d", len(seen), n)
	}
}

// TestRestart checks that history survives a restart of the service and of
// NATS on the same store directory.
func TestRestart(t *testing.T) {
	t.Parallel()

	dir := t.TempDir()
	n := startNATS(t, dir)
	e := newEnvOn(t, n, Options{})
	msgs, _ := genConversation(convSpec{rounds: 20, stepsPerRnd: 2, outputWords: 20, skillAtRound: 3}, 3)
	appendAll(t, e.client, "t", "c", msgs)
	n.stop()

	n2 := startNATS(t, dir)
	t.Cleanup(n2.stop)
	e2 := newEnvOn(t, n2, Options{})
	got := readAll(t, e2.client, "t", "c", 0)
	if len(got) != len(msgs) {
		t.Fatalf("after restart %d messages, want %d", len(got), len(msgs))
	}
	for i := range got {
		want := proto.Clone(msgs[i]).(*baagentv1.ChatMessage)
		want.Importance, want.CreatedAt = got[i].Importance, got[i].CreatedAt
		if !proto.Equal(got[i], want) {
			t.Fatalf("message %d differs after restart:\n got %v\nwant %v", i, got[i], want)
		}
	}
	// Appends stay idempotent across the restart (beyond JetStream's
	// duplicate window, which a restart does not keep in memory anyway).
	resp, err := e2.client.Append(t.Context(), &baagentv1.AppendRequest{Tenant: "t", ConversationId: "c", Messages: msgs[:5]})
	if err != nil || resp.GetDuplicates() != 5 || resp.GetAppended() != 0 {
		t.Fatalf("re-append after restart: %v %v", resp, err)
	}
}

func ids(msgs []*baagentv1.ChatMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.GetId()
	}
	return out
}

func itoa(i int) string { return string(rune('a'+i/26)) + string(rune('a'+i%26)) }

func TestAppendRecordTooLarge(t *testing.T) {
	t.Parallel()

	e := newEnv(t, Options{MaxRecordBytes: 1000})
	_, err := e.client.Append(t.Context(), &baagentv1.AppendRequest{Tenant: "t", ConversationId: "c", Messages: []*baagentv1.ChatMessage{
		{Id: "ok", Role: roleUser, Content: "fits"},
		{Id: "big", Role: roleTool, ToolCallId: "c1", Content: string(make([]byte, 2000))},
	}})
	vt.WantInvalid(t, err, "messages[1]")
	if h := readAll(t, e.client, "t", "c", 0); len(h) != 0 {
		t.Fatalf("a refused append stored %d messages", len(h))
	}
}

func TestBuildWindowEmptyConversation(t *testing.T) {
	t.Parallel()

	e := newEnv(t, Options{})
	req := buildReqFor("gpt-4o", strategyAuto)
	resp, err := e.client.BuildWindow(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	windowCheck{model: "gpt-4o"}.check(t, e, req, resp)
	if len(resp.GetMessages()) != len(testSystem) || resp.GetStrategy() != strategyNone {
		t.Fatalf("empty conversation: %d messages, %v", len(resp.GetMessages()), resp.GetStrategy())
	}
}

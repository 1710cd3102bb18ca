// Package conversations tests the conversation API end to end: the whole
// suite in one process (-target=all), driven over the gateway's HTTP/JSON
// and gRPC APIs with two tenants' API keys.
package conversations

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/test/suite"
)

const (
	keyAcme    = "acme-key-0123456789"
	keyInitech = "initech-key-0123456789"
)

type client struct {
	t    *testing.T
	ctx  context.Context
	base string
}

// call sends an HTTP request with key and decodes the JSON answer into
// out (when not nil); it returns the status.
func (c client) call(method, key, path, body string, out any) int {
	c.t.Helper()
	req, err := http.NewRequestWithContext(c.ctx, method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, out); err != nil {
			c.t.Fatalf("%s %s: %v: %s", method, path, err, data)
		}
	}
	if resp.StatusCode != http.StatusOK {
		c.t.Logf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(data))
	}
	return resp.StatusCode
}

type run struct {
	RunID          string `json:"run_id"`
	ConversationID string `json:"conversation_id"`
	State          string `json:"state"`
}

// ask starts a run and waits for it to end.
func (c client) ask(key, conv, input string) run {
	c.t.Helper()
	body, _ := json.Marshal(map[string]any{"spec": map[string]any{"input": input, "conversation_id": conv}})
	var started struct{ Run run }
	if code := c.call(http.MethodPost, key, "/v1/runs", string(body), &started); code != http.StatusOK {
		c.t.Fatalf("POST /v1/runs: %d", code)
	}
	var got struct{ Run run }
	testkit.EventuallyContext(c.ctx, c.t, "run "+started.Run.RunID+" ended", func() (bool, string) {
		c.call(http.MethodGet, key, "/v1/runs/"+started.Run.RunID, "", &got)
		switch got.Run.State {
		case "RUN_STATE_COMPLETED", "RUN_STATE_FAILED", "RUN_STATE_CANCELLED":
			return true, got.Run.State
		}
		return false, got.Run.State
	})
	if got.Run.State != "RUN_STATE_COMPLETED" {
		c.t.Fatalf("run %s ended %s", got.Run.RunID, got.Run.State)
	}
	return got.Run
}

type conversation struct {
	ConversationID string `json:"conversation_id"`
	Title          string `json:"title"`
	State          string `json:"state"`
	RunCount       int    `json:"run_count"`
	LastRunID      string `json:"last_run_id"`
}

// filesNaming lists the files under root whose path or content names any
// of needles, skipping the files and directories in skip.
func filesNaming(t *testing.T, root string, skip []string, needles ...string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, s := range skip {
			if rel != s {
				continue
			}
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		for _, n := range needles {
			if strings.Contains(rel, n) {
				out = append(out, rel)
				return nil
			}
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, n := range needles {
			if bytes.Contains(b, []byte(n)) {
				out = append(out, rel+" (content)")
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestConversationAPIOverTheGateway(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dataDir := t.TempDir()
	a := suite.Start(ctx, t, suite.Options{
		Args: []string{"-data-dir=" + dataDir},
		Env:  map[string]string{"BAAGENT_API_KEYS": keyAcme + "=acme," + keyInitech + "=initech"},
	})
	var base string
	testkit.Eventually(t, 30*time.Second, "gateway HTTP listening", func() bool {
		if addr := a.GatewayHTTPAddr(); addr != nil {
			base = "http://" + addr.String()
			resp, err := http.Get(base + "/healthz")
			if err == nil {
				resp.Body.Close()
				return resp.StatusCode == http.StatusOK
			}
		}
		return false
	})
	c := client{t: t, ctx: ctx, base: base}

	notes := c.ask(keyAcme, "", "Conversations test: write my private notes.")
	conv := notes.ConversationID
	c.ask(keyAcme, conv, "Which product category had the highest revenue last quarter?")
	other := c.ask(keyAcme, "", "Which product category had the highest revenue last quarter?")

	// List, newest activity first; the other tenant sees nothing.
	var list struct {
		Conversations []conversation `json:"conversations"`
		NextPageToken string         `json:"next_page_token"`
	}
	if code := c.call(http.MethodGet, keyAcme, "/v1/conversations", "", &list); code != http.StatusOK || len(list.Conversations) != 2 ||
		list.Conversations[0].ConversationID != other.ConversationID || list.Conversations[1].RunCount != 2 ||
		list.Conversations[1].Title != "Conversations test: write my private notes." {
		t.Fatalf("GET /v1/conversations: %d %+v", code, list)
	}
	var page struct {
		Conversations []conversation `json:"conversations"`
		NextPageToken string         `json:"next_page_token"`
	}
	if code := c.call(http.MethodGet, keyAcme, "/v1/conversations?page_size=1", "", &page); code != http.StatusOK || len(page.Conversations) != 1 || page.NextPageToken == "" {
		t.Fatalf("page 1: %d %+v", code, page)
	}
	var page2 struct {
		Conversations []conversation `json:"conversations"`
		NextPageToken string         `json:"next_page_token"`
	}
	if code := c.call(http.MethodGet, keyAcme, "/v1/conversations?page_size=1&page_token="+page.NextPageToken, "", &page2); code != http.StatusOK ||
		len(page2.Conversations) != 1 || page2.Conversations[0].ConversationID != conv || page2.NextPageToken != "" {
		t.Fatalf("page 2: %d %+v", code, page2)
	}
	var empty struct {
		Conversations []conversation `json:"conversations"`
	}
	if code := c.call(http.MethodGet, keyInitech, "/v1/conversations", "", &empty); code != http.StatusOK || len(empty.Conversations) != 0 {
		t.Fatalf("initech's list: %d %+v", code, empty)
	}

	// Bad input and other tenants' ids.
	for _, tc := range []struct {
		method, key, path string
		want              int
	}{
		{http.MethodGet, keyAcme, "/v1/conversations?page_size=501", http.StatusBadRequest},
		{http.MethodGet, keyAcme, "/v1/conversations?page_size=x", http.StatusBadRequest},
		{http.MethodGet, keyAcme, "/v1/conversations?page_token=bogus", http.StatusBadRequest},
		{http.MethodGet, keyAcme, "/v1/conversations/" + conv + "/messages?page_size=1001", http.StatusBadRequest},
		{http.MethodGet, keyAcme, "/v1/conversations/" + conv + "/messages?page_token=bogus", http.StatusBadRequest},
		{http.MethodGet, keyAcme, "/v1/conversations/conv_unknown", http.StatusNotFound},
		{http.MethodGet, keyInitech, "/v1/conversations/" + conv, http.StatusNotFound},
		{http.MethodGet, keyInitech, "/v1/conversations/" + conv + "/messages", http.StatusNotFound},
		{http.MethodPost, keyInitech, "/v1/conversations/" + conv + "/end", http.StatusNotFound},
		{http.MethodDelete, keyInitech, "/v1/conversations/" + conv, http.StatusNotFound},
		{http.MethodGet, "wrong-key-0123456789", "/v1/conversations", http.StatusUnauthorized},
	} {
		if got := c.call(tc.method, tc.key, tc.path, "", nil); got != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, got, tc.want)
		}
	}

	// History, in the context service's message shapes.
	var msgs struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		TotalCount string `json:"total_count"`
	}
	if code := c.call(http.MethodGet, keyAcme, "/v1/conversations/"+conv+"/messages?page_size=1000", "", &msgs); code != http.StatusOK ||
		len(msgs.Messages) < 6 || msgs.Messages[0].Role != "ROLE_USER" || msgs.TotalCount != fmt.Sprint(len(msgs.Messages)) {
		t.Fatalf("messages: %d %+v", code, msgs)
	}

	// The gRPC API answers the same for the same key.
	cc, err := grpc.NewClient(a.Addr("gateway").String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	gw := baagentv1.NewGatewayServiceClient(cc)
	gctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+keyAcme)
	got, err := gw.GetConversation(gctx, &baagentv1.GatewayServiceGetConversationRequest{ConversationId: conv})
	if err != nil || got.GetConversation().GetRunCount() != 2 || got.GetConversation().GetState() != baagentv1.ConversationState_CONVERSATION_STATE_ACTIVE {
		t.Fatalf("gRPC GetConversation: %v, %v", got, err)
	}
	if _, err := gw.ListConversations(gctx, &baagentv1.GatewayServiceListConversationsRequest{PageSize: 100000}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("gRPC ListConversations with a huge page: %v", err)
	}

	// The workspace holds the notes; End frees it and refuses new runs.
	if found := filesNaming(t, dataDir, []string{"jetstream"}, conv); len(found) == 0 {
		t.Fatal("no file of the conversation before End")
	}
	var ended struct {
		Conversation     conversation `json:"conversation"`
		ArtifactsDeleted int          `json:"artifacts_deleted"`
		BytesFreed       string       `json:"bytes_freed"`
	}
	if code := c.call(http.MethodPost, keyAcme, "/v1/conversations/"+conv+"/end", "", &ended); code != http.StatusOK ||
		ended.Conversation.State != "CONVERSATION_STATE_ENDED" || ended.BytesFreed == "" {
		t.Fatalf("end: %d %+v", code, ended)
	}
	// End keeps the history, and the memory the conversation's runs left
	// (the memory service's database) is history too.
	if found := filesNaming(t, dataDir, []string{"jetstream", "memory.db", "memory.db-wal", "memory.db-shm"}, conv); len(found) != 0 {
		t.Fatalf("files left after End: %v", found)
	}
	body, _ := json.Marshal(map[string]any{"spec": map[string]any{"input": "more", "conversation_id": conv}})
	if code := c.call(http.MethodPost, keyAcme, "/v1/runs", string(body), nil); code != http.StatusBadRequest {
		t.Fatalf("a run into the ended conversation: %d, want 400", code)
	}

	// Delete removes the rest; the other conversation stays.
	var deleted struct {
		RunsDeleted     int    `json:"runs_deleted"`
		EventsDeleted   string `json:"events_deleted"`
		MessagesDeleted string `json:"messages_deleted"`
	}
	if code := c.call(http.MethodDelete, keyAcme, "/v1/conversations/"+conv, "", &deleted); code != http.StatusOK || deleted.RunsDeleted != 2 ||
		deleted.EventsDeleted == "" || deleted.MessagesDeleted == "" {
		t.Fatalf("delete: %d %+v", code, deleted)
	}
	if code := c.call(http.MethodGet, keyAcme, "/v1/conversations/"+conv, "", nil); code != http.StatusNotFound {
		t.Fatalf("the deleted conversation: %d", code)
	}
	if code := c.call(http.MethodGet, keyAcme, "/v1/runs/"+notes.RunID, "", nil); code != http.StatusNotFound {
		t.Fatalf("a run of the deleted conversation: %d", code)
	}
	if code := c.call(http.MethodGet, keyAcme, "/v1/conversations/"+other.ConversationID, "", nil); code != http.StatusOK {
		t.Fatalf("the other conversation: %d", code)
	}
	if found := filesNaming(t, dataDir, []string{"jetstream"}, conv, notes.RunID); len(found) != 0 {
		t.Fatalf("files naming the deleted conversation outside JetStream's store: %v", found)
	}
	// JetStream's file store may keep the bytes of removed messages in its
	// block files until it compacts them; reported, not asserted (the
	// orchestrator test reads every stored message through the API).
	if found := filesNaming(t, filepath.Join(dataDir, "jetstream"), nil, conv); len(found) > 0 {
		t.Logf("JetStream block files still holding removed bytes of the conversation: %d %v", len(found), found)
	}
}

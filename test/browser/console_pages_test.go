package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/baagent/baagent/cmd/baagent/app"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/internal/tracing"
	"github.com/baagent/baagent/test/suite"
)

// pagesAdminKey is the admin API key of the suite TestConsolePagesInChromium
// starts (budgets are set through the admin API).
const pagesAdminKey = "pages-admin-key-0123456789"

// pagesSuite is the running suite the console's page scripts share.
type pagesSuite struct {
	// Base is the gateway's HTTP address (http://host:port).
	Base string
}

// consolePage is one page's browser check: its script console_<name>.mjs
// prints "PASS console <name>" and leaves shots in SCREENSHOT_DIR. seed,
// when set, prepares the suite through its public API and returns more
// environment for the script (NAME=value).
type consolePage struct {
	name  string
	seed  func(ctx context.Context, t *testing.T, s *pagesSuite) []string
	shots []string
}

// TestConsolePagesInChromium drives every console page but the chat (which
// TestConsoleInChromium covers) against one suite: the whole product
// in-process with the scripted model, traced, with an admin key. Each page
// is a subtest, run in order; each leaves screenshots in the artifacts
// directory.
func TestConsolePagesInChromium(t *testing.T) {
	node := browserDeps(t)
	shots := artifactDir(t)

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	a := suite.Start(ctx, t, suite.Options{
		Args: []string{"-trace-link-template=http://localhost:16686/trace/{trace_id}"},
		Env:  map[string]string{"BAAGENT_ADMIN_API_KEYS": pagesAdminKey},
		App:  []app.Option{app.WithTracing(func(c *tracing.Config) { c.Exporter = discard{} })},
	})
	s := &pagesSuite{Base: "http://" + a.GatewayHTTPAddr().String()}
	waitReady(ctx, t, s.Base)
	// Interaction patterns stay off but on the patterns page: other pages'
	// seeds ask the same questions again and again, and a learnt pattern
	// would make a later run stop to ask whether to reuse it.
	s.setMemory(ctx, t, map[string]any{"patterns_enabled": false})

	pages := []consolePage{
		{name: "chathistory", seed: seedChatHistory, shots: chathistoryShots},
		{name: "activity", seed: seedActivity, shots: activityShots},
		{name: "overview", seed: seedOverview, shots: overviewShots},
		{name: "skills", seed: seedSkills, shots: skillsShots},
		{name: "memory", seed: seedMemory, shots: memoryShots},
		{name: "patterns", seed: seedPatterns, shots: patternsShots},
	}
	for _, p := range pages {
		t.Run(p.name, func(t *testing.T) {
			env := []string{"BAAGENT_URL=" + s.Base, "BAAGENT_ADMIN_KEY=" + pagesAdminKey, "SCREENSHOT_DIR=" + shots}
			if p.seed != nil {
				env = append(env, p.seed(ctx, t, s)...)
			}
			runScript(ctx, t, node, "console_"+p.name+".mjs", "PASS console "+p.name, env, shots, p.shots...)
		})
	}
}

// do sends one request to the suite's gateway, with body as JSON when set
// and key, when set, as the bearer key; it returns the status and body.
func (s *pagesSuite) do(ctx context.Context, t *testing.T, method, path, key string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.Base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	// JSON even without a body: the gateway's browser guard wants it on
	// every call that changes something.
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// json is do that wants 200 and decodes the answer into out (when set).
func (s *pagesSuite) json(ctx context.Context, t *testing.T, method, path, key string, body, out any) {
	t.Helper()
	code, b := s.do(ctx, t, method, path, key, body)
	if code != http.StatusOK {
		t.Fatalf("%s %s = %d %.300s", method, path, code, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %.300s", method, path, err, b)
		}
	}
}

// start starts a run of spec (POST /v1/runs); it returns the run's id and
// its conversation's.
func (s *pagesSuite) start(ctx context.Context, t *testing.T, spec map[string]any) (id, conversation string) {
	t.Helper()
	var started struct {
		Run struct {
			RunID          string `json:"run_id"`
			ConversationID string `json:"conversation_id"`
		} `json:"run"`
	}
	s.json(ctx, t, http.MethodPost, "/v1/runs", "", map[string]any{"spec": spec}, &started)
	return started.Run.RunID, started.Run.ConversationID
}

// wait waits until run id ends and returns its final state.
func (s *pagesSuite) wait(ctx context.Context, t *testing.T, id string) (state string) {
	t.Helper()
	testkit.EventuallyContext(ctx, t, "run "+id+" to end", func() (bool, string) {
		var got struct {
			Run struct {
				State string `json:"state"`
			} `json:"run"`
		}
		s.json(ctx, t, http.MethodGet, "/v1/runs/"+id, "", nil, &got)
		state = got.Run.State
		return state == "RUN_STATE_COMPLETED" || state == "RUN_STATE_FAILED" || state == "RUN_STATE_CANCELLED", state
	})
	return state
}

// run starts a run of spec and waits until it ends; it returns the run's
// id, its conversation's and its final state.
func (s *pagesSuite) run(ctx context.Context, t *testing.T, spec map[string]any) (id, conversation, state string) {
	t.Helper()
	id, conversation = s.start(ctx, t, spec)
	return id, conversation, s.wait(ctx, t, id)
}

// setMemory changes the tenant's memory settings (PATCH /v1/memory/settings).
func (s *pagesSuite) setMemory(ctx context.Context, t *testing.T, settings map[string]any) {
	t.Helper()
	s.json(ctx, t, http.MethodPatch, "/v1/memory/settings", "", settings, nil)
}

package browser

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/baagent/baagent/cmd/baagent/app"
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
	// App is the in-process suite, for gRPC addresses (App.Addr) and NATS.
	App *app.App
}

// GRPCAddr returns the address of one of the suite's gRPC services.
func (s *pagesSuite) GRPCAddr(svc string) net.Addr { return s.App.Addr(svc) }

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
	s := &pagesSuite{Base: "http://" + a.GatewayHTTPAddr().String(), App: a}
	waitReady(ctx, t, s.Base)

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

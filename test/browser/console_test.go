package browser

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/test/suite"
)

// consoleFigures is what console.mjs measures on the chat page: the time
// from navigation start to the page's first render (the
// console:chat-rendered mark), median and slowest of five loads with an
// empty HTTP cache, and of the very first load in a just-started browser;
// and the scripts the page loaded before it.
type consoleFigures struct {
	FirstRenderMs            float64  `json:"firstRenderMs"`
	FirstRenderMaxMs         float64  `json:"firstRenderMaxMs"`
	ColdBrowserFirstRenderMs float64  `json:"coldBrowserFirstRenderMs"`
	InitialScripts           []string `json:"initialScripts"`
}

// TestConsoleInChromium drives the web console's Agent chat (/console/)
// against the whole suite with the scripted model: a planned run whose
// table becomes a chart, a reload while it waits on a question, answers
// given inline with the keyboard, a follow-up in the same conversation and
// the conversation reopened from its history at a tablet's width. The
// screenshots and figures.json are kept in the artifacts directory.
func TestConsoleInChromium(t *testing.T) {
	node := browserDeps(t)
	shots := artifactDir(t)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	base := startSuite(ctx, t)

	out := runScript(ctx, t, node, "console.mjs", "PASS console", []string{
		"BAAGENT_URL=" + base,
		"SCREENSHOT_DIR=" + shots,
	}, shots, "console-plan-chart.png", "console-chat.png", "console-tablet.png")

	fig, ok := parseFigures(out)
	if !ok {
		t.Fatal("console.mjs printed no FIGURES line")
	}
	if fig.FirstRenderMs <= 0 || len(fig.InitialScripts) == 0 {
		t.Fatalf("figures: %+v", fig)
	}
	for _, s := range fig.InitialScripts {
		if !strings.HasPrefix(s, "/console/assets/") {
			t.Errorf("the chat route loaded a script from outside the console's build: %s", s)
		}
	}
	b, _ := json.MarshalIndent(fig, "", "  ")
	if err := os.WriteFile(filepath.Join(shots, "console-figures.json"), b, 0o644); err != nil {
		t.Error(err)
	}
	t.Logf("chat page first render, empty cache: median %.1f ms, slowest %.1f ms of 5; in a just-started browser %.1f ms; scripts before it: %v",
		fig.FirstRenderMs, fig.FirstRenderMaxMs, fig.ColdBrowserFirstRenderMs, fig.InitialScripts)
}

// consoleKey is the API key of tenant acme in TestConsoleWithAPIKeys.
const consoleKey = "console-key-0123456789abcdef"

// TestConsoleWithAPIKeys drives the console against a suite that requires
// API keys: the key screen, event streams opened with stream tokens, a
// reload that keeps the key, and sign-out.
func TestConsoleWithAPIKeys(t *testing.T) {
	node := browserDeps(t)
	shots := artifactDir(t)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a := suite.Start(ctx, t, suite.Options{Env: map[string]string{"BAAGENT_API_KEYS": consoleKey + "=acme"}})
	base := "http://" + a.GatewayHTTPAddr().String()
	testkit.EventuallyContext(ctx, t, "the gateway at "+base, func() (bool, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/runs?page_size=1", nil)
		req.Header.Set("Authorization", "Bearer "+consoleKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error()
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status + " " + string(b)
	})

	runScript(ctx, t, node, "console_keys.mjs", "PASS console keys", []string{
		"BAAGENT_URL=" + base,
		"BAAGENT_API_KEY=" + consoleKey,
		"SCREENSHOT_DIR=" + shots,
	}, shots, "console-key.png", "console-keys-run.png")
}

func parseFigures(out []byte) (consoleFigures, bool) {
	var fig consoleFigures
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "FIGURES ")
		if !ok {
			continue
		}
		if err := json.Unmarshal([]byte(rest), &fig); err != nil {
			return fig, false
		}
		return fig, true
	}
	return fig, false
}

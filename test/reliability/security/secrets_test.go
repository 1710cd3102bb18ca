package security

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Secrets of the suite under test; each has a middle part that no masked
// form ("sk-te…7d6c") would keep, which is what the greps look for.
const (
	modelKey     = "sk-test-SECRETMODEL-9f8e7d6c5b4a"
	modelKeyPart = "SECRETMODEL"
	apiKey       = "gw-SECRETAPI-4d3c2b1a00ffee"
	apiKeyPart   = "SECRETAPI"
	wrongKey     = "gw-WRONGKEY-0123456789abcd"
	wrongKeyPart = "WRONGKEY"
)

// leaks reports which of the secret parts text contains.
func leaks(text string) []string {
	var found []string
	for _, p := range []string{modelKeyPart, apiKeyPart, wrongKeyPart} {
		if strings.Contains(text, p) {
			found = append(found, p)
		}
	}
	return found
}

// fakeModel is an OpenAI-compatible endpoint that refuses every call the
// way providers do, quoting the key it was given in the error message.
type fakeModel struct {
	mu    sync.Mutex
	auths []string
}

func (f *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	auth := r.Header.Get("Authorization")
	f.mu.Lock()
	f.auths = append(f.auths, auth)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"message": "Incorrect API key provided: " + strings.TrimPrefix(auth, "Bearer ") + ". You can find your API key at https://example.invalid.",
		"type":    "invalid_request_error", "code": "invalid_api_key",
	}})
}

func (f *fakeModel) sawKey() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.auths {
		if a == "Bearer "+modelKey {
			return true
		}
	}
	return false
}

// TestSecretsNeverReachLogsEventsOrErrors runs the suite with a model API
// key and a gateway API key from the environment, against a model endpoint
// that echoes the key in its errors, captures every log record at debug
// level, the events of a run and the errors of bad calls, and greps them
// all for the secrets.
func TestSecretsNeverReachLogsEventsOrErrors(t *testing.T) {
	model := &fakeModel{}
	srv := httptest.NewServer(model)
	t.Cleanup(srv.Close)
	env := map[string]string{
		"BAAGENT_MODEL_API_KEY":  modelKey,
		"BAAGENT_API_KEYS":       apiKey + "=acme",
		"BAAGENT_MODEL_BASE_URL": srv.URL + "/v1",
	}
	s := harnessStart(t, env)
	c := gateway(t, s, apiKey)

	var seen strings.Builder // everything a client or operator sees
	_, events := c.runToEnd(t, &baagentv1.RunSpec{Input: question})
	seen.WriteString(eventsJSON(t, events))
	last := events[len(events)-1]
	if last.GetType() != "error" {
		t.Errorf("a run against a refusing model ended with %q, want error", last.GetType())
	}
	if !model.sawKey() {
		t.Fatal("the model endpoint never received the configured key: the test proves nothing")
	}

	bad := gateway(t, s, wrongKey)
	_, err := bad.gw.ListSkills(bad.ctx(t), &baagentv1.GatewayServiceListSkillsRequest{})
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("wrong API key: %v, want Unauthenticated", err)
	}
	seen.WriteString(status.Convert(err).Message() + "\n")

	req, _ := http.NewRequest(http.MethodGet, "http://"+s.App.GatewayHTTPAddr().String()+"/v1/runs", nil)
	req.Header.Set("Authorization", "Bearer "+wrongKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("HTTP with a wrong key: %d, want 401", resp.StatusCode)
	}
	seen.Write(body)

	if found := leaks(seen.String()); len(found) > 0 {
		t.Errorf("secrets %v in events or errors:\n%s", found, seen.String())
	}
	logs := s.Logs.String()
	if !strings.Contains(logs, `"level":"DEBUG"`) && !strings.Contains(logs, `"level":"INFO"`) {
		t.Fatalf("no logs captured (%d bytes): the grep proves nothing", len(logs))
	}
	if found := leaks(logs); len(found) > 0 {
		for _, line := range strings.Split(logs, "\n") {
			if len(leaks(line)) > 0 {
				t.Errorf("log line with a secret: %.400s", line)
			}
		}
	}
}

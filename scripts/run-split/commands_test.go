package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/test/split/splitrun"
)

const key = "dev-only-api-key-0000000000000001"

func TestTryCommandsOnDefaultPortsNameNoAddress(t *testing.T) {
	lines := tryCommands("./bin/baagentctl", splitrun.DefaultPorts(), key)
	if len(lines) < 4 {
		t.Fatalf("only %d commands: %q", len(lines), lines)
	}
	var withKey int
	for _, l := range lines {
		if strings.Contains(l, "_ADDR=") {
			t.Errorf("%q names an address, but every service is on its default port", l)
		}
		if strings.Contains(l, key) {
			withKey++
		}
	}
	// ask, runs list and the HTTP call need the key; health does not.
	if withKey < 3 {
		t.Errorf("the API key is in %d commands: %q", withKey, lines)
	}
	if !strings.HasPrefix(lines[0], "./bin/baagentctl health") {
		t.Errorf("first command %q, want ./bin/baagentctl health", lines[0])
	}
	if want := "BAAGENT_API_KEY=" + key + " ./bin/baagentctl ask 'Which product category had the highest revenue last quarter?'"; lines[1] != want {
		t.Errorf("ask line\n%q, want\n%q", lines[1], want)
	}
	if !strings.Contains(strings.Join(lines, "\n"), "http://127.0.0.1:7780/") {
		t.Errorf("no command reaches the HTTP API on 7780: %q", lines)
	}
}

func TestTryCommandsNameMovedServicesOnly(t *testing.T) {
	ports := splitrun.DefaultPorts()
	ports[splitrun.GRPCListener(config.TargetGateway)] = 17000
	ports[splitrun.GRPCListener(config.TargetTokens)] = 17005
	ports[splitrun.ListenerHTTP] = 17080
	lines := tryCommands("/opt/my tools/baagentctl", ports, key)
	health := lines[0]
	for _, want := range []string{"BAAGENT_ADDR=127.0.0.1:17000 ", "BAAGENT_TOKENS_ADDR=127.0.0.1:17005 ", "'/opt/my tools/baagentctl' health"} {
		if !strings.Contains(health, want) {
			t.Errorf("health line %q lacks %q", health, want)
		}
	}
	if strings.Contains(health, "SKILLS_ADDR") {
		t.Errorf("health line %q names skills, which is on its default port", health)
	}
	for _, l := range lines[1:3] {
		if !strings.Contains(l, "BAAGENT_ADDR=127.0.0.1:17000 ") || strings.Contains(l, "TOKENS_ADDR") {
			t.Errorf("gateway command %q: want the gateway's address only", l)
		}
	}
	if !strings.Contains(strings.Join(lines, "\n"), "http://127.0.0.1:17080/") {
		t.Errorf("no command reaches the moved HTTP port: %q", lines)
	}
}

func TestShellQuoteIsOneWordForSh(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"", "plain-key_0123456789", "it's", "a b", `$HOME`, "`id`", `"q"`, "x'y'z", "a\nb", "*?[]", "tab\there", `\`} {
		out, err := exec.Command(sh, "-c", "printf %s "+shellQuote(s)).Output()
		if err != nil {
			t.Fatalf("sh -c printf %%s %s: %v", shellQuote(s), err)
		}
		if string(out) != s {
			t.Errorf("shellQuote(%q) = %s, which sh reads as %q", s, shellQuote(s), out)
		}
	}
}

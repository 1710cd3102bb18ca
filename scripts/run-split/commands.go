package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/test/split/splitrun"
)

// question is the sample question the scripted model answers from
// examples/scenarios.
const question = "Which product category had the highest revenue last quarter?"

// tryCommands returns shell commands that reach the running suite as they
// are printed: ctl is the baagentctl path as the user types it, ports the
// suite's listeners (splitrun.Suite.Ports) and apiKey the gateway's key.
// baagentctl finds a service on its default port by itself; a service
// elsewhere is named with the BAAGENT_*_ADDR variable baagentctl reads, so
// the lines carry no more than they need.
func tryCommands(ctl string, ports map[string]int, apiKey string) []string {
	defaults := splitrun.DefaultPorts()
	// addrEnv names every service (of svcs) that is not on its default port.
	addrEnv := func(svcs ...string) string {
		var b strings.Builder
		for _, svc := range svcs {
			p := ports[splitrun.GRPCListener(svc)]
			if p == defaults[splitrun.GRPCListener(svc)] {
				continue
			}
			name := "BAAGENT_" + strings.ToUpper(svc) + "_ADDR"
			if svc == config.TargetGateway {
				name = "BAAGENT_ADDR"
			}
			fmt.Fprintf(&b, "%s=127.0.0.1:%d ", name, p)
		}
		return b.String()
	}
	ctl = shellQuote(ctl)
	key := "BAAGENT_API_KEY=" + shellQuote(apiKey) + " "
	gw := addrEnv(config.TargetGateway)
	httpURL := "http://127.0.0.1:" + strconv.Itoa(ports[splitrun.ListenerHTTP])
	metricsURL := "http://127.0.0.1:" + strconv.Itoa(ports[splitrun.MetricsListener(config.TargetGateway)]) + "/metrics"
	return []string{
		addrEnv(config.Services...) + ctl + " health",
		key + gw + ctl + " ask " + shellQuote(question),
		key + gw + ctl + " runs list",
		key + gw + ctl + " memory stats",
		"curl -fsS -H " + shellQuote("Authorization: Bearer "+apiKey) + " " + httpURL + "/v1/whoami",
		"curl -fsS " + metricsURL + " | grep '^# HELP baagent_'",
	}
}

// shellQuote returns s as one POSIX shell word: unchanged when it holds only
// characters no shell treats specially, else in single quotes.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@%+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

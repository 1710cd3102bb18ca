package splitrun

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/baagent/baagent/internal/config"
)

// APIKey returns the first API key the gateway was started with and the
// tenant it maps to: from its -api-keys-file (the dev overlay's Secret,
// materialised under Options.Dir), else from -api-keys. Every call to the
// gateway needs one, so the launcher prints it with its commands.
func (s *Suite) APIKey() (key, tenant string, err error) {
	var inline, file string
	for _, a := range s.Args[config.TargetGateway] {
		if v, ok := strings.CutPrefix(a, "-api-keys-file="); ok {
			file = v
		}
		if v, ok := strings.CutPrefix(a, "-api-keys="); ok {
			inline = v
		}
	}
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return "", "", fmt.Errorf("gateway API keys: %w", err)
		}
		if key, tenant, ok := FirstAPIKey(string(data)); ok {
			return key, tenant, nil
		}
	}
	if key, tenant, ok := FirstAPIKey(inline); ok {
		return key, tenant, nil
	}
	return "", "", errors.New("gateway API keys: the gateway was started without a usable key (-api-keys-file or -api-keys)")
}

// FirstAPIKey returns the first usable entry of a gateway API key list:
// key=tenant entries separated by commas or newlines, blank entries and
// #-comments skipped, keys of at least 16 characters, as the gateway reads
// them.
func FirstAPIKey(list string) (key, tenant string, ok bool) {
	for _, entry := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == '\n' }) {
		entry = strings.TrimSpace(entry)
		if entry == "" || strings.HasPrefix(entry, "#") {
			continue
		}
		k, t, found := strings.Cut(entry, "=")
		k, t = strings.TrimSpace(k), strings.TrimSpace(t)
		if found && len(k) >= 16 && t != "" {
			return k, t, true
		}
	}
	return "", "", false
}

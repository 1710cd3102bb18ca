package scripted

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// maxScenarioFiles bounds a scenarios directory.
const maxScenarioFiles = 1000

// loadDir reads every *.yaml, *.yml and *.json file of dir (not recursive;
// README and other files are ignored). All problems are reported together,
// each naming its file and field; names must be unique.
func loadDir(dir string) ([]*Scenario, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("scripted: scenarios dir: %w", err)
	}
	var out []*Scenario
	var errs []error
	seen := map[string]string{}
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
			continue
		}
		if len(out)+len(errs) >= maxScenarioFiles {
			errs = append(errs, fmt.Errorf("%s: more than %d scenario files", dir, maxScenarioFiles))
			break
		}
		path := filepath.Join(dir, e.Name())
		data, err := readBounded(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s, err := parseScenario(path, data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, dup := seen[s.Name]; dup {
			errs = append(errs, fmt.Errorf("%s: name: %q is already used by %s", path, s.Name, prev))
			continue
		}
		seen[s.Name] = path
		out = append(out, s)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("scripted: invalid scenarios:\n%w", errors.Join(errs...))
	}
	// Matching order: priority, highest first, then name.
	slices.SortStableFunc(out, func(a, b *Scenario) int {
		if a.Priority != b.Priority {
			return b.Priority - a.Priority
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

func readBounded(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Size() > maxScenarioFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxScenarioFileBytes)
	}
	return os.ReadFile(path)
}

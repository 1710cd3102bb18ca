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

// loadDir reads the scenarios of dir (see loadFiles).
func loadDir(dir string) ([]*Scenario, error) {
	s, _, err := loadFiles(dir)
	return s, err
}

// loadFiles reads every *.yaml, *.yml and *.json file of dir (not
// recursive; README and other files are ignored): scenarios, and at most
// one gazetteer (a file of kind memory-extraction). All problems are
// reported together, each naming its file and field; names must be unique.
func loadFiles(dir string) ([]*Scenario, *Gazetteer, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("scripted: scenarios dir: %w", err)
	}
	var gazetteer *Gazetteer
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
		if fileKind(data) == GazetteerKind {
			g, err := parseGazetteer(path, data)
			switch {
			case err != nil:
				errs = append(errs, err)
			case gazetteer != nil:
				errs = append(errs, fmt.Errorf("%s: a second gazetteer (the first is %s)", path, gazetteer.File))
			default:
				gazetteer = g
			}
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
		return nil, nil, fmt.Errorf("scripted: invalid scenarios:\n%w", errors.Join(errs...))
	}
	// Matching order: priority, highest first, then name.
	slices.SortStableFunc(out, func(a, b *Scenario) int {
		if a.Priority != b.Priority {
			return b.Priority - a.Priority
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, gazetteer, nil
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

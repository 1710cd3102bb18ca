// Package config is the plumbing of the baagent binary's configuration:
// command-line flags, each with a BAAGENT_* environment variable, and one
// optional YAML file whose keys are the flag names, with the precedence
// flag > environment > file > default (Parse); the settings every process
// has (Common); and the checks the settings share. Each service owns its
// own settings (services/<name>/config.go); cmd/baagent/app composes them
// with Common, so this package never imports a service. The whole
// configuration is validated before anything starts, and every error
// names the setting at fault.
package config

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxConfigFileBytes bounds the YAML file so a wrong path (a log, a disk
// image) fails fast instead of being read whole.
const maxConfigFileBytes = 1 << 20

// ConfigFlag names the YAML file the other settings are read from.
const ConfigFlag = "config"

// NewFlagSet returns the empty flag set of the baagent binary, whose usage
// (-h) explains the environment variables and the precedence.
func NewFlagSet(output io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("baagent", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: baagent [flags]")
		fmt.Fprintln(fs.Output(), "Each flag also reads BAAGENT_<NAME> (-skills-dir ↔ BAAGENT_SKILLS_DIR) and the -config YAML file;")
		fmt.Fprintln(fs.Output(), "precedence: flag > environment > file > default.")
		fs.PrintDefaults()
	}
	return fs
}

// EnvName is the environment variable of a flag: "skills-dir" → BAAGENT_SKILLS_DIR.
func EnvName(flagName string) string {
	return "BAAGENT_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// ErrHelp is returned by Parse when -h or -help was given; the usage has
// been printed.
var ErrHelp = flag.ErrHelp

// Parse sets the flags of fs from args (without the program name), the
// environment (getenv) and the YAML file named by the ConfigFlag flag, if
// fs has one: flag > environment > file > default. Usage and flag errors
// are printed to the flag set's output. Checking the values is left to
// the settings' Validate methods.
func Parse(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (settings are flags, e.g. -target=all)", fs.Arg(0))
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })

	if cf := fs.Lookup(ConfigFlag); cf != nil {
		if !onCommandLine[ConfigFlag] {
			if v := getenv(EnvName(ConfigFlag)); v != "" {
				if err := cf.Value.Set(v); err != nil {
					return fmt.Errorf("environment %s: %w", EnvName(ConfigFlag), err)
				}
			}
		}
		if err := applyFile(fs, cf.Value.String(), onCommandLine); err != nil {
			return err
		}
	}
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if envErr != nil || onCommandLine[f.Name] || f.Name == ConfigFlag {
			return
		}
		if v, ok := lookupEnv(getenv, EnvName(f.Name)); ok {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("environment %s: %w", EnvName(f.Name), err)
			}
		}
	})
	return envErr
}

// applyFile sets the flags the YAML file at path names, except those given
// on the command line; an empty path is no file.
func applyFile(fs *flag.FlagSet, path string, onCommandLine map[string]bool) error {
	if path == "" {
		return nil
	}
	settings, err := readFile(path)
	if err != nil {
		return err
	}
	for _, name := range sortedKeys(settings) {
		if name == ConfigFlag {
			return fmt.Errorf("config file %s: setting %q cannot be set in a config file", path, name)
		}
		if fs.Lookup(name) == nil {
			return fmt.Errorf("config file %s: unknown setting %q", path, name)
		}
		if onCommandLine[name] {
			continue
		}
		if err := fs.Set(name, settings[name]); err != nil {
			return fmt.Errorf("config file %s: setting %q: %w", path, name, err)
		}
	}
	return nil
}

// lookupEnv treats an empty variable as unset, as most deployment tools
// cannot tell the two apart.
func lookupEnv(getenv func(string) string, name string) (string, bool) {
	v := getenv(name)
	return v, v != ""
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// readFile reads a YAML mapping of flag names to scalar values.
func readFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	if len(data) > maxConfigFileBytes {
		return nil, fmt.Errorf("config file %s: larger than %d bytes", path, maxConfigFileBytes)
	}
	return parseYAML(path, data)
}

// parseYAML decodes a flat mapping of setting names to scalars. An empty
// document is an empty configuration.
func parseYAML(path string, data []byte) (map[string]string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	out := map[string]string{}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return out, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("config file %s: line %d: want a mapping of setting names to values", path, root.Line)
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("config file %s: line %d: setting names must be plain strings", path, k.Line)
		}
		if v.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("config file %s: line %d: setting %q must be a single value", path, v.Line, k.Value)
		}
		if _, dup := out[k.Value]; dup {
			return nil, fmt.Errorf("config file %s: line %d: setting %q given twice", path, k.Line, k.Value)
		}
		out[k.Value] = v.Value
	}
	return out, nil
}

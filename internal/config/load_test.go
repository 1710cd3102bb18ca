package config

import (
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestEnvNames(t *testing.T) {
	if got := EnvName("skills-dir"); got != "BAAGENT_SKILLS_DIR" {
		t.Errorf("EnvName = %q", got)
	}
	if got := EnvName("gateway-http-listen"); got != "BAAGENT_GATEWAY_HTTP_LISTEN" {
		t.Errorf("EnvName = %q", got)
	}
}

// Parse applies flag > environment > file > default to any flag set, and
// finds the file through -config or BAAGENT_CONFIG.
func TestParsePrecedence(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte("a: file\nb: file\nc: file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, viaEnv := range []bool{false, true} {
		fs := NewFlagSet(io.Discard)
		var configFile, a, b, c, d string
		fs.StringVar(&configFile, ConfigFlag, "", "")
		fs.StringVar(&a, "a", "default", "")
		fs.StringVar(&b, "b", "default", "")
		fs.StringVar(&c, "c", "default", "")
		fs.StringVar(&d, "d", "default", "")
		env := map[string]string{"BAAGENT_A": "env", "BAAGENT_B": "env"}
		args := []string{"-a=flag"}
		if viaEnv {
			env["BAAGENT_CONFIG"] = file
		} else {
			args = append(args, "-config="+file)
		}
		if err := Parse(fs, args, func(k string) string { return env[k] }); err != nil {
			t.Fatal(err)
		}
		if a != "flag" || b != "env" || c != "file" || d != "default" || configFile != file {
			t.Errorf("via env %v: a=%q b=%q c=%q d=%q config=%q", viaEnv, a, b, c, d, configFile)
		}
	}
}

func TestParseRefusesUnknownFileSettings(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte("nope: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := NewFlagSet(io.Discard)
	fs.String(ConfigFlag, "", "")
	err := Parse(fs, []string{"-config=" + file}, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), `unknown setting "nope"`) {
		t.Fatalf("err = %v", err)
	}
	if err := Parse(NewFlagSet(io.Discard), []string{"-h"}, func(string) string { return "" }); !errors.Is(err, ErrHelp) {
		t.Fatalf("-h: err = %v, want ErrHelp", err)
	}
}

func FuzzParseYAML(f *testing.F) {
	f.Add([]byte("target: all\nmodel: gpt-4o\n"))
	f.Add([]byte("a: &x [1]\nb: *x\n"))
	f.Add([]byte("- 1\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseYAML("fuzz.yaml", data)
		if err != nil {
			return
		}
		// Whatever was accepted must survive a round trip through YAML:
		// the parser keeps every setting and its exact scalar text.
		out, err := yaml.Marshal(m)
		if err != nil {
			t.Fatalf("marshal %v: %v", m, err)
		}
		again, err := parseYAML("again.yaml", out)
		if err != nil {
			t.Fatalf("re-parse of %q: %v", out, err)
		}
		if !maps.Equal(m, again) {
			t.Fatalf("round trip changed settings: %v → %v", m, again)
		}
	})
}

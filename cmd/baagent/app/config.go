package app

import (
	"flag"
	"io"

	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/services/gateway"
	"github.com/baagent/baagent/services/orchestrator"
	"github.com/baagent/baagent/services/skills"
	"github.com/baagent/baagent/services/tokens"
	"github.com/baagent/baagent/services/toolrunner"
)

// Config is the validated configuration of one baagent process: the
// settings every process has and each service's own. Every process reads
// and checks all of them, whichever services it runs (bar the skills
// root), so one deployment's settings mean the same in every process. The
// context service has no settings of its own; it uses the common model
// endpoint.
type Config struct {
	config.Common
	Tokens       tokens.Settings
	Skills       skills.Settings
	ToolRunner   toolrunner.Settings
	Orchestrator orchestrator.Settings
	Gateway      gateway.Settings
	Memory       MemorySettings
}

// RegisterFlags registers every setting on fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.Common.RegisterFlags(fs)
	c.Tokens.RegisterFlags(fs)
	c.Skills.RegisterFlags(fs)
	c.ToolRunner.RegisterFlags(fs)
	c.Orchestrator.RegisterFlags(fs)
	c.Gateway.RegisterFlags(fs)
	c.Memory.RegisterFlags(fs)
}

// Validate checks every setting, the common ones first, and fills in the
// defaults that depend on them.
func (c *Config) Validate() error {
	if err := c.Common.Validate(); err != nil {
		return err
	}
	c.ToolRunner.ApplyDataDir(c.DataDir)
	c.Memory.ApplyDataDir(c.DataDir)
	checks := []func() error{c.Tokens.Validate, c.ToolRunner.Validate, c.Orchestrator.Validate, c.Gateway.Validate, c.Memory.Validate}
	// The skills root is required only where the skills service runs.
	if c.Runs(config.TargetSkills) {
		checks = append(checks, c.Skills.Validate)
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// LoadConfig parses args (without the program name), the environment
// (getenv) and the optional YAML file (flag > environment > file >
// default) and validates the result. Usage and flag errors are printed to
// output; -h returns config.ErrHelp.
func LoadConfig(args []string, getenv func(string) string, output io.Writer) (*Config, error) {
	c := &Config{}
	fs := config.NewFlagSet(output)
	c.RegisterFlags(fs)
	if err := config.Parse(fs, args, getenv); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

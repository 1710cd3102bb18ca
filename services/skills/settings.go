package skills

import (
	"errors"
	"flag"
)

// Settings holds the skills service's settings.
type Settings struct {
	// Dir is the skills root: system skills at the top, tenant and
	// project layers under tenants/.
	Dir string
}

// RegisterFlags registers the settings on fs.
func (s *Settings) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&s.Dir, "skills-dir", "examples/skills", "skills root: system skills at the top, tenants/<tenant>/... below")
}

// Validate checks the settings of a process that runs the service.
func (s *Settings) Validate() error {
	if s.Dir == "" {
		return errors.New("setting skills-dir: must not be empty")
	}
	return nil
}

// Options returns the service options the settings select; the caller
// adds the runtime dependencies (logger, registerer, token counter).
func (s *Settings) Options() Options {
	return Options{Root: s.Dir}
}

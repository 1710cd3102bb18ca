package skills

import (
	"errors"
	"flag"
	"fmt"
)

// Values of Settings.Store.
const (
	StoreJetStream = "jetstream"
	StoreOff       = "off"
)

// Settings holds the skills service's settings.
type Settings struct {
	// Dir is the skills root: system skills at the top, tenant and
	// project layers under tenants/.
	Dir string
	// Store is where skills uploaded through the API live: "jetstream"
	// (shared by every replica) or "off" (files only; PutSkill,
	// DeleteSkill and SetSystemSkillState answer Unimplemented).
	Store string
}

// RegisterFlags registers the settings on fs.
func (s *Settings) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&s.Dir, "skills-dir", "examples/skills", "skills root: system skills at the top, tenants/<tenant>/... below")
	fs.StringVar(&s.Store, "skills-store", StoreJetStream, "store of skills uploaded through the API: jetstream or off")
}

// Validate checks the settings of a process that runs the service.
func (s *Settings) Validate() error {
	if s.Dir == "" {
		return errors.New("setting skills-dir: must not be empty")
	}
	if s.Store != StoreJetStream && s.Store != StoreOff {
		return fmt.Errorf("setting skills-store: must be %s or %s, got %q", StoreJetStream, StoreOff, s.Store)
	}
	return nil
}

// StoreEnabled reports whether uploaded skills are kept in JetStream.
func (s *Settings) StoreEnabled() bool { return s.Store == StoreJetStream }

// Options returns the service options the settings select; the caller
// adds the runtime dependencies (logger, registerer, token counter).
func (s *Settings) Options() Options {
	return Options{Root: s.Dir}
}

package tokens

import "flag"

// Settings holds the tokens service's settings.
type Settings struct {
	// EncodersFile overrides the built-in model registry (token_encoders.yaml,
	// docs/concepts/tokens.md); empty keeps the default.
	EncodersFile string
}

// RegisterFlags registers the settings on fs.
func (s *Settings) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&s.EncodersFile, "token-encoders-file", "", "token_encoders.yaml overriding the built-in model registry")
}

// Validate checks the settings. There is nothing to check before start:
// New reads the encoders file and fails on a bad one.
func (s *Settings) Validate() error { return nil }

// Options returns the service options the settings select; the caller
// adds the runtime dependencies (logger, registerer).
func (s *Settings) Options() Options {
	return Options{EncodersFile: s.EncodersFile}
}

// Package buildinfo reports what binary is running: the release version
// stamped at link time and the VCS revision the Go toolchain recorded.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is stamped by the Makefile with
// -ldflags "-X github.com/baagent/baagent/internal/buildinfo.version=...".
// It is written only by the linker, never at run time.
var version = "dev"

// Info describes the running binary.
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
}

// Read returns the build information of the running binary.
func Read() Info {
	info := Info{
		Version:   version,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	return info
}

// String renders the information on one line, e.g.
// "dev (rev 1a2b3c4d5e6f, modified) go1.26.0 linux/amd64".
func (i Info) String() string {
	s := i.Version
	if i.Revision != "" {
		rev := i.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if i.Modified {
			rev += ", modified"
		}
		s += " (rev " + rev + ")"
	}
	return fmt.Sprintf("%s %s %s", s, i.GoVersion, i.Platform)
}

package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

func TestReadReportsToolchainAndPlatform(t *testing.T) {
	info := Read()
	if info.Version == "" {
		t.Fatal("Version is empty")
	}
	if info.GoVersion != runtime.Version() {
		t.Errorf("GoVersion = %q, want %q", info.GoVersion, runtime.Version())
	}
	s := info.String()
	for _, want := range []string{info.Version, runtime.GOOS + "/" + runtime.GOARCH} {
		if !strings.Contains(s, want) {
			t.Errorf("String() = %q, missing %q", s, want)
		}
	}
}

func TestStringShortensRevision(t *testing.T) {
	i := Info{Version: "v1.2.3", Revision: "0123456789abcdef0123", Modified: true, GoVersion: "go1.26.0", Platform: "linux/amd64"}
	want := "v1.2.3 (rev 0123456789ab, modified) go1.26.0 linux/amd64"
	if got := i.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

package app

import (
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMemorySettingsDefaults(t *testing.T) {
	t.Parallel()
	c := mustLoad(t, []string{"-data-dir=/var/lib/baagent", "-skills-dir=../../../examples/skills"})
	m := c.Memory
	if m.DB != filepath.Join("/var/lib/baagent", DefaultMemoryDBName) || m.Backend() != "sqlite" {
		t.Errorf("db %q backend %q", m.DB, m.Backend())
	}
	if m.EmbeddingBaseURL != "" || m.EmbeddingModel != DefaultEmbeddingModel || m.ExtractionModel != "" || m.Reflexion {
		t.Errorf("embedding %q %q extraction %q reflexion %v", m.EmbeddingBaseURL, m.EmbeddingModel, m.ExtractionModel, m.Reflexion)
	}
	if m.CommunityInterval != DefaultMemoryCommunityInterval || m.CommunityTokensPerHour != DefaultMemoryCommunityTokensPerHour {
		t.Errorf("community %s %d", m.CommunityInterval, m.CommunityTokensPerHour)
	}
}

func TestMemorySettingsFromEnvironment(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"BAAGENT_MEMORY_POSTGRES_URL":       "postgres://baagent:s3cret@db:5432/baagent?sslmode=require",
		"BAAGENT_EMBEDDING_BASE_URL":        "https://api.openai.com/v1",
		"BAAGENT_EMBEDDING_API_KEY":         "sk-embed",
		"BAAGENT_MEMORY_REFLEXION":          "true",
		"BAAGENT_MEMORY_COMMUNITY_INTERVAL": "0",
	}
	c, err := LoadConfig([]string{"-skills-dir=../../../examples/skills", "-memory-extraction-model=gpt-4o-mini"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := c.Memory
	if m.Backend() != "postgres" || m.EmbeddingAPIKey != "sk-embed" || !m.Reflexion || m.CommunityInterval != 0 || m.ExtractionModel != "gpt-4o-mini" {
		t.Errorf("%+v", m)
	}
}

func TestMemorySettingsErrors(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-password"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-memory-postgres-url=mysql://u:" + secret + "@h/db"}, "setting memory-postgres-url: want postgres://"},
		{[]string{"-memory-postgres-url=postgres://u:" + secret + "@/db"}, "setting memory-postgres-url"},
		{[]string{"-memory-postgres-url=host=db " + secret}, "setting memory-postgres-url"},
		{[]string{"-memory-db= "}, "setting memory-db: must not be empty"},
		{[]string{"-embedding-base-url=ftp://x"}, "setting embedding-base-url"},
		{[]string{"-embedding-base-url=https://x/v1", "-embedding-model= "}, "setting embedding-model"},
		{[]string{"-memory-extraction-model=a\nb"}, "setting memory-extraction-model"},
		{[]string{"-memory-community-interval=10s"}, "setting memory-community-interval: want 0 (never) or at least 1m0s"},
		{[]string{"-memory-community-interval=-1m"}, "setting memory-community-interval"},
		{[]string{"-memory-community-tokens-per-hour=-1"}, "setting memory-community-tokens-per-hour"},
		{[]string{"-embedding-dims=0"}, "setting embedding-dims"},
		{[]string{"-memory-workers=0"}, "setting memory-workers"},
		{[]string{"-memory-dedupe-threshold=NaN"}, "setting memory-dedupe-threshold"},
		{[]string{"-memory-dedupe-threshold=1.5"}, "setting memory-dedupe-threshold"},
	} {
		_, err := LoadConfig(append([]string{"-skills-dir=../../../examples/skills"}, tc.args...), func(string) string { return "" }, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.args, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%v: the error shows the secret: %v", tc.args, err)
		}
	}
	for _, ok := range []string{"postgresql://db/baagent", "host=db port=5432 dbname=baagent user=baagent", "postgres://u:p@db:5432/baagent?sslmode=disable"} {
		if err := checkPostgresURL(ok); err != nil {
			t.Errorf("checkPostgresURL(%q): %v", ok, err)
		}
	}
	if _, err := LoadConfig([]string{"-skills-dir=../../../examples/skills", "-memory-community-interval=" + time.Minute.String()}, func(string) string { return "" }, io.Discard); err != nil {
		t.Errorf("one minute: %v", err)
	}
}

func FuzzCheckPostgresURL(f *testing.F) {
	for _, s := range []string{"postgres://u:p@h:5432/db", "host=h dbname=d", "x", "postgresql://", "a=b c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		// The one error never depends on (so never quotes) the value.
		if err := checkPostgresURL(v); err != nil && err.Error() != memoryPostgresURLWant {
			t.Fatalf("unexpected error: %v", err)
		}
	})
}

package skills

import (
	"slices"
	"testing"
)

// toolrunnerTools are the tools the toolrunner defines; a sample skill that
// allowed another name would restrict a run to a tool that does not exist.
var toolrunnerTools = []string{"file_read", "file_write", "file_edit", "glob", "grep", "sql_query", "artifact_read"}

// TestExamples keeps the sample skills valid and shows what each layer of
// the sample tenant sees.
func TestExamples(t *testing.T) {
	t.Parallel()

	s := newTestServer(t, examplesDir)
	cases := []struct {
		tenant, project string
		want            []listed
	}{
		{"default", "", []listed{{"data-quality-check", "system", ""}, {"executive-summary", "system", ""}, {"sales-analysis", "system", ""}}},
		// acme disables data-quality-check and overrides executive-summary.
		{"acme", "", []listed{{"data-governance-check", "tenant", ""}, {"executive-summary", "tenant", ""}, {"sales-analysis", "system", ""}}},
		{"acme", "north-review", []listed{{"data-governance-check", "tenant", ""}, {"executive-summary", "tenant", ""}, {"north-region-focus", "project", ""}, {"sales-analysis", "system", ""}}},
	}
	for _, c := range cases {
		got, inv := list(t, s, c.tenant, c.project)
		if len(inv) != 0 {
			t.Errorf("%s/%s: invalid samples: %v", c.tenant, c.project, inv)
		}
		for i := range got {
			got[i].description = ""
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s/%s:\n got  %v\n want %v", c.tenant, c.project, got, c.want)
		}
	}
	var withResources, withTools int
	for _, tl := range s.snap.Load().tenants {
		for _, sk := range tl.sorted {
			checkSampleTools(t, sk)
		}
		for _, p := range tl.projects {
			for _, sk := range p.sorted {
				checkSampleTools(t, sk)
			}
		}
	}
	for _, sk := range s.snap.Load().system.sorted {
		checkSampleTools(t, sk)
		if len(sk.resources) > 0 {
			withResources++
		}
		if sk.restrictsTools {
			withTools++
		}
		if sk.body == "" || len(sk.triggers) == 0 || sk.version == "" {
			t.Errorf("%s: sample lacks a body, triggers or version", sk.name)
		}
	}
	if withResources == 0 || withTools == 0 {
		t.Errorf("samples: %d with resources, %d with allowed-tools; want at least one each", withResources, withTools)
	}
}

func checkSampleTools(t *testing.T, sk *skill) {
	t.Helper()
	for _, tool := range sk.allowedTools {
		if !slices.Contains(toolrunnerTools, tool) {
			t.Errorf("%s allows %q, which the toolrunner does not define", sk.name, tool)
		}
	}
}

package main

import (
	"context"
	"encoding/json"
	"fmt"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/skills/skillmd"
)

// runSkillsValidate is `baagentctl skills validate DIR...`: the strict
// check of skill folders against the Agent Skills format, offline (no
// service is contacted). Every violation is reported, including those the
// skills service loads a skill despite (it shows them as warnings); the exit
// status is 1 when any folder has one. --json prints one report per folder
// per line: {"dir", "name", "violations": [{"field", "message", "lenient"}]}.
func runSkillsValidate(_ context.Context, c *cli, args []string) error {
	fs := c.flagSet("skills validate", "DIR...")
	dirs, err := c.parsePositional(fs, args)
	if err != nil {
		return err
	}
	if len(dirs) == 0 {
		return fmt.Errorf("%w: want at least one skill folder", errUsage)
	}
	failed := false
	for _, dir := range dirs {
		r := skillmd.ValidateDir(dir)
		failed = failed || !r.Valid()
		if c.json {
			b, err := json.Marshal(r)
			if err != nil {
				return fmt.Errorf("encode JSON: %w", err)
			}
			fmt.Fprintf(c.stdout, "%s\n", b)
			continue
		}
		if r.Valid() {
			fmt.Fprintf(c.stdout, "%s: valid\n", dir)
			continue
		}
		fmt.Fprintf(c.stdout, "%s: %d %s\n", dir, len(r.Violations), plural(len(r.Violations), "violation", "violations"))
		for _, v := range r.Violations {
			note := ""
			if v.Lenient {
				note = " (the service loads the skill with a warning)"
			}
			fmt.Fprintf(c.stdout, "  %s%s\n", v, note)
		}
	}
	if failed {
		return exitError{1}
	}
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// printSkillWarnings lists the skills loaded despite violations, after the
// `skills list` table.
func printSkillWarnings(c *cli, list []*baagentv1.SkillMetadata) {
	header := false
	for _, s := range list {
		for _, w := range s.GetWarnings() {
			if !header {
				fmt.Fprintln(c.stdout, "\nloaded with warnings:")
				header = true
			}
			fmt.Fprintf(c.stdout, "  %s: %s\n", s.GetName(), oneLine(w, 200))
		}
	}
}

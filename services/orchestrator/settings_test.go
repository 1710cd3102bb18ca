package orchestrator

import (
	"flag"
	"strings"
	"testing"
)

func TestSkillTriggersSetting(t *testing.T) {
	t.Parallel()
	parse := func(args ...string) (*Settings, error) {
		var s Settings
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		s.RegisterFlags(fs)
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		return &s, s.Validate()
	}
	s, err := parse()
	if err != nil || s.SkillTriggers != SkillTriggersActivate || s.Options().SkillTriggers != SkillTriggersActivate {
		t.Fatalf("default: %v, %v", s, err)
	}
	for _, v := range []string{SkillTriggersSuggest, SkillTriggersOff} {
		if s, err := parse("-skill-triggers=" + v); err != nil || s.Options().SkillTriggers != v {
			t.Errorf("%s: %v", v, err)
		}
	}
	if _, err := parse("-skill-triggers=maybe"); err == nil || !strings.Contains(err.Error(), "skill-triggers") {
		t.Errorf("bad value: %v", err)
	}
	if err := (Options{SkillTriggers: "maybe"}).missing(); err == nil || !strings.Contains(err.Error(), "Options.SkillTriggers") {
		t.Errorf("bad option: %v", err)
	}
	if (Options{}).withDefaults().SkillTriggers != SkillTriggersActivate {
		t.Error("the default option is not activate")
	}
}

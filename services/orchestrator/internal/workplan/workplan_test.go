package workplan

import (
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func adopted(t *testing.T, n int) *State {
	t.Helper()
	var drafts []StepDraft
	for i := range n {
		drafts = append(drafts, StepDraft{Description: "step " + string(rune('a'+i)), ExpectedOutput: "out"})
	}
	s := &State{Phase: PhaseRequired}
	s.Adopt(s.Propose("p1", drafts))
	s.StepStarted = true // as the orchestrator does once it publishes plan_step_start
	return s
}

func TestParsePlan(t *testing.T) {
	t.Parallel()
	steps, err := ParsePlan(`{"steps":[{"description":" Revenue by region ","expected_output":"a table"}]}`)
	if err != nil || len(steps) != 1 || steps[0].Description != "Revenue by region" {
		t.Fatalf("steps %+v err %v", steps, err)
	}
	for _, bad := range []string{``, `[]`, `{}`, `{"steps":[]}`, `{"steps":[{"description":""}]}`,
		`{"steps":[{"description":"` + strings.Repeat("x", MaxStepText+1) + `"}]}`,
		`{"steps":[` + strings.Repeat(`{"description":"x"},`, MaxSteps) + `{"description":"x"}]}`} {
		if _, err := ParsePlan(bad); err == nil {
			t.Errorf("ParsePlan(%.60q) accepted", bad)
		}
	}
}

func TestParseUpdate(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{`{}`, `{"reason":"x"}`, `{"reason":"","mark":{"step_number":1,"status":"completed"}}`,
		`{"reason":"x","mark":{"step_number":0,"status":"completed"}}`, `{"reason":"x","mark":{"step_number":1,"status":"done"}}`} {
		if _, err := ParseUpdate(bad); err == nil {
			t.Errorf("ParseUpdate(%s) accepted", bad)
		}
	}
	u, err := ParseUpdate(`{"reason":"done","mark":{"step_number":1,"status":"completed","summary":"found it"}}`)
	if err != nil || u.Mark.Summary != "found it" {
		t.Fatalf("%+v %v", u, err)
	}
}

func TestStepsRunInOrderThenSynthesis(t *testing.T) {
	t.Parallel()
	s := adopted(t, 2)
	if s.Phase != PhaseExecuting || s.CurrentNumber() != 1 || s.Current().GetStatus() != baagentv1.PlanStepStatus_PLAN_STEP_STATUS_IN_PROGRESS {
		t.Fatalf("after adopt: phase %q step %d", s.Phase, s.CurrentNumber())
	}
	if n := s.Iterated(); n != 1 {
		t.Fatalf("iterations %d", n)
	}
	ended := s.End(baagentv1.PlanStepStatus_PLAN_STEP_STATUS_COMPLETED, "r1", 5)
	if ended.GetStepNumber() != 1 || ended.GetSummary() != "r1" || ended.GetIterations() != 1 || s.WorkPlan().GetCurrentStep() != 2 || s.StepStarted {
		t.Fatalf("ended %v, now %d", ended, s.WorkPlan().GetCurrentStep())
	}
	s.End(baagentv1.PlanStepStatus_PLAN_STEP_STATUS_FAILED, "budget", 1)
	if s.Phase != PhaseSynthesis || s.CurrentNumber() != 0 || s.WorkPlan().GetCurrentStep() != 0 {
		t.Fatalf("after the last step: phase %q", s.Phase)
	}
}

func TestApplyMarkAndRevise(t *testing.T) {
	t.Parallel()
	s := adopted(t, 2)
	u, _ := ParseUpdate(`{"reason":"more to do","mark":{"step_number":1,"status":"completed","summary":"s1"},"steps":[{"description":"x"},{"description":"y"}]}`)
	if err := s.Apply(u); err != nil {
		t.Fatal(err)
	}
	wp := s.WorkPlan()
	if wp.GetRevision() != 2 || wp.GetTotalSteps() != 3 || wp.GetReason() != "more to do" || !s.CurrentEnded() {
		t.Fatalf("plan %v", wp)
	}
	if wp.GetSteps()[1].GetDescription() != "x" || wp.GetSteps()[1].GetStepNumber() != 2 || wp.GetSteps()[0].GetSummary() != "s1" {
		t.Fatalf("steps %v", wp.GetSteps())
	}
	s.End(baagentv1.PlanStepStatus_PLAN_STEP_STATUS_COMPLETED, "", 1)
	if s.CurrentNumber() != 0 || s.WorkPlan().GetCurrentStep() != 2 {
		t.Fatalf("current %d", s.CurrentNumber())
	}
	s.StepStarted = true
	if s.CurrentNumber() != 2 {
		t.Fatalf("current %d", s.CurrentNumber())
	}
	// A revision while the step goes on: it continues as the first new step.
	s.Iterated()
	u, _ = ParseUpdate(`{"reason":"narrower","steps":[{"description":"z"}]}`)
	if err := s.Apply(u); err != nil {
		t.Fatal(err)
	}
	if wp.GetTotalSteps() != 2 || s.Current().GetDescription() != "z" || s.Current().GetIterations() != 1 || s.CurrentEnded() {
		t.Fatalf("plan %v", wp)
	}
	for _, bad := range []string{
		`{"reason":"x","mark":{"step_number":1,"status":"completed"}}`, // ended
		`{"reason":"x","mark":{"step_number":9,"status":"completed"}}`, // no such step
	} {
		u, _ := ParseUpdate(bad)
		if err := s.Apply(u); err == nil {
			t.Errorf("Apply(%s) accepted", bad)
		}
	}
}

func TestSkipRestAndEncode(t *testing.T) {
	t.Parallel()
	s := adopted(t, 3)
	s.StepStarted = true
	s.SkipRest("out of steps")
	for _, st := range s.WorkPlan().GetSteps() {
		if st.GetStatus() != baagentv1.PlanStepStatus_PLAN_STEP_STATUS_SKIPPED {
			t.Fatalf("step %v", st)
		}
	}
	s.Encode()
	back := State{Phase: s.Phase, Plan: s.Plan}
	if err := back.Decode(); err != nil || back.WorkPlan().GetTotalSteps() != 3 {
		t.Fatalf("decode %v %v", back.WorkPlan(), err)
	}
	bad := State{Plan: []byte{0xff}}
	if err := bad.Decode(); err == nil {
		t.Fatal("bad plan decoded")
	}
}

func TestRejectNumbersTheNextProposal(t *testing.T) {
	t.Parallel()
	s := &State{Phase: PhaseRequired}
	p := s.Propose("p", []StepDraft{{Description: "a"}})
	if p.GetRevision() != 1 {
		t.Fatalf("revision %d", p.GetRevision())
	}
	s.Reject("add a step")
	p = s.Propose("p", []StepDraft{{Description: "a"}, {Description: "b"}})
	if p.GetRevision() != 2 || !strings.Contains(p.GetReason(), "add a step") {
		t.Fatalf("%v", p)
	}
	if r := Render(p); !strings.Contains(r, "2. b") {
		t.Fatalf("render %q", r)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(`{"steps":[{"description":"a","expected_output":"b"}]}`)
	f.Add(`{"reason":"r","mark":{"step_number":1,"status":"completed"},"steps":[{"description":"x"}]}`)
	f.Fuzz(func(t *testing.T, raw string) {
		s := adopted(t, 3)
		if steps, err := ParsePlan(raw); err == nil && (len(steps) == 0 || len(steps) > MaxSteps) {
			t.Fatalf("accepted %d steps", len(steps))
		}
		u, err := ParseUpdate(raw)
		if err != nil {
			return
		}
		_ = s.Apply(u)
		wp := s.WorkPlan()
		if int(wp.GetTotalSteps()) != len(wp.GetSteps()) || len(wp.GetSteps()) > MaxSteps {
			t.Fatalf("plan %v", wp)
		}
		for i, st := range wp.GetSteps() {
			if st.GetStepNumber() != int32(i+1) {
				t.Fatalf("numbering %v", wp)
			}
		}
	})
}

package orchestrator

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
)

type (
	startReq  = baagentv1.OrchestratorServiceStartRunRequest
	getReq    = baagentv1.OrchestratorServiceGetRunRequest
	listReq   = baagentv1.OrchestratorServiceListRunsRequest
	cancelReq = baagentv1.OrchestratorServiceCancelRunRequest
	submitReq = baagentv1.OrchestratorServiceSubmitInputRequest
)

var (
	validStart = &startReq{
		Tenant: "acme",
		Spec: &baagentv1.RunSpec{
			Input:          "Summarise sales.csv by region",
			ConversationId: "conv-1",
			Model:          "gpt-4o",
			MaxSteps:       20,
			AllowedTools:   []string{"file_read", "mcp__github__*"},
			Project:        "q3.report",
			IdempotencyKey: "req-42",
			Labels:         map[string]string{"team": "finance", "app.kubernetes.io/name": "ba"},
		},
		ParentRunId: "run_parent-1",
	}
	validGet    = &getReq{Tenant: "acme", RunId: "run-1"}
	validList   = &listReq{Tenant: "acme", ConversationId: "conv-1", States: []baagentv1.RunState{baagentv1.RunState_RUN_STATE_RUNNING}, PageSize: 500, PageToken: encodePageToken("run_0190aa_1")}
	validCancel = &cancelReq{Tenant: "acme", RunId: "run-1", Reason: "user pressed stop"}
	validSubmit = &submitReq{Tenant: "acme", RunId: "run-1", Input: &baagentv1.RunInput{InputId: "q1", Answer: "Include Europe"}}
)

func TestServiceName(t *testing.T) {
	if ServiceName != baagentv1.OrchestratorService_ServiceDesc.ServiceName {
		t.Fatalf("ServiceName = %q, generated %q", ServiceName, baagentv1.OrchestratorService_ServiceDesc.ServiceName)
	}
}

// TestValidRequestsUnconfigured: a server built without its dependencies
// refuses valid requests with Unavailable naming what is missing.
func TestValidRequestsUnconfigured(t *testing.T) {
	srv := New(Options{Logger: slog.New(slog.DiscardHandler)})
	c := baagentv1.NewOrchestratorServiceClient(vt.Serve(t, func(gs grpc.ServiceRegistrar) { srv.Register(gs) }))
	for name, call := range map[string]func(context.Context) error{
		"StartRun/valid":                 vt.Call(c.StartRun, validStart),
		"StartRun/minimal":               vt.Call(c.StartRun, &startReq{Tenant: "t", Spec: &baagentv1.RunSpec{Input: "hi"}}),
		"GetRun/valid":                   vt.Call(c.GetRun, validGet),
		"ListRuns/valid":                 vt.Call(c.ListRuns, validList),
		"ListRuns/minimal":               vt.Call(c.ListRuns, &listReq{Tenant: "acme"}),
		"CancelRun/valid":                vt.Call(c.CancelRun, validCancel),
		"SubmitInput/valid answer":       vt.Call(c.SubmitInput, validSubmit),
		"SubmitInput/valid intervention": vt.Call(c.SubmitInput, &submitReq{Tenant: "acme", RunId: "run-1", Input: &baagentv1.RunInput{InputId: "d1", Intervention: baagentv1.DoomLoopIntervention_DOOM_LOOP_INTERVENTION_STOP}}),
	} {
		err := call(t.Context())
		if st, _ := status.FromError(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "Options.JetStream is not set") {
			t.Errorf("%s: want Unavailable naming Options.JetStream, got %v", name, err)
		}
	}
}

func TestRPCs(t *testing.T) {
	srv := New(Options{Logger: slog.New(slog.DiscardHandler)})
	c := baagentv1.NewOrchestratorServiceClient(vt.Serve(t, func(gs grpc.ServiceRegistrar) { srv.Register(gs) }))
	spec := func(f func(*baagentv1.RunSpec)) *startReq {
		return vt.With(validStart, func(r *startReq) { f(r.Spec) })
	}

	vt.Run(t, []vt.Case{
		{Name: "StartRun/no tenant", Call: vt.Call(c.StartRun, vt.With(validStart, func(r *startReq) { r.Tenant = "" })), Field: "tenant"},
		{Name: "StartRun/tenant with dot", Call: vt.Call(c.StartRun, vt.With(validStart, func(r *startReq) { r.Tenant = "a.b" })), Field: "tenant"},
		{Name: "StartRun/tenant too long", Call: vt.Call(c.StartRun, vt.With(validStart, func(r *startReq) { r.Tenant = strings.Repeat("t", 65) })), Field: "tenant"},
		{Name: "StartRun/no spec", Call: vt.Call(c.StartRun, &startReq{Tenant: "acme"}), Field: "spec"},
		{Name: "StartRun/no input", Call: vt.Call(c.StartRun, spec(func(s *baagentv1.RunSpec) { s.Input = "" })), Field: "spec.input"},
		{Name: "StartRun/blank input", Call: vt.Call(c.StartRun, spec(func(s *baagentv1.RunSpec) { s.Input = " \n\t" })), Field: "spec.input"},
		{Name: "StartRun/input over 1 MiB", Call: vt.Call(c.StartRun, spec(func(s *baagentv1.RunSpec) { s.Input = strings.Repeat("x", 1<<20+1) })), Field: "spec.input"},
		{Name: "StartRun/bad conversation_id", Call: vt.Call(c.StartRun, spec(func(s *baagentv1.RunSpec) { s.ConversationId = "../etc" })), Field: "spec.conversation_id"},
		{Name: "StartRun/bad model", Call: vt.Call(c.StartRun, spec(func(s *baagentv1.RunSpec) { s.Model = "gpt 4" })), Field: "spec.model"},
		{Name: "StartRun/max_steps over 500", Call: vt.Call(c.StartRun, spec(func(s *baagentv1.RunSpec) { s.MaxSteps = 501 })), Field: "spec.max_steps"},
		{Name: "StartRun/negative max_steps", Call: vt.Call(c.StartRun, spec(func(s *baagentv1.RunSpec) { s.MaxSteps = -1 })), Field: "spec.max_steps"},
		{Name: "StartRun/bad allowed tool", Call: vt.Call(c.StartRun, spec(func(s *baagentv1.RunSpec) { s.AllowedTools = []string{"ok", "rm -rf"} })), Field: "spec.allowed_tools[1]"},
		{Name: "StartRun/bad project", Call: vt.Call(c.StartRun, spec(func(s *baagentv1.RunSpec) { s.Project = ".hidden" })), Field: "spec.project"},
		{Name: "StartRun/bad idempotency key", Call: vt.Call(c.StartRun, spec(func(s *baagentv1.RunSpec) { s.IdempotencyKey = "a b" })), Field: "spec.idempotency_key"},
		{Name: "StartRun/bad label key", Call: vt.Call(c.StartRun, spec(func(s *baagentv1.RunSpec) { s.Labels = map[string]string{"bad key": "v"} })), Field: `spec.labels["bad key"]`},
		{Name: "StartRun/bad parent_run_id", Call: vt.Call(c.StartRun, vt.With(validStart, func(r *startReq) { r.ParentRunId = "run.1" })), Field: "parent_run_id"},

		{Name: "GetRun/no tenant", Call: vt.Call(c.GetRun, vt.With(validGet, func(r *getReq) { r.Tenant = "" })), Field: "tenant"},
		{Name: "GetRun/no run_id", Call: vt.Call(c.GetRun, vt.With(validGet, func(r *getReq) { r.RunId = "" })), Field: "run_id"},
		{Name: "GetRun/run_id with wildcard", Call: vt.Call(c.GetRun, vt.With(validGet, func(r *getReq) { r.RunId = "run.>" })), Field: "run_id"},

		{Name: "ListRuns/no tenant", Call: vt.Call(c.ListRuns, vt.With(validList, func(r *listReq) { r.Tenant = "" })), Field: "tenant"},
		{Name: "ListRuns/bad conversation_id", Call: vt.Call(c.ListRuns, vt.With(validList, func(r *listReq) { r.ConversationId = "a/b" })), Field: "conversation_id"},
		{Name: "ListRuns/unspecified state", Call: vt.Call(c.ListRuns, vt.With(validList, func(r *listReq) { r.States = append(r.States, 0) })), Field: "states[1]"},
		{Name: "ListRuns/unknown state", Call: vt.Call(c.ListRuns, vt.With(validList, func(r *listReq) { r.States = []baagentv1.RunState{99} })), Field: "states[0]"},
		{Name: "ListRuns/page_size over 500", Call: vt.Call(c.ListRuns, vt.With(validList, func(r *listReq) { r.PageSize = 501 })), Field: "page_size"},
		{Name: "ListRuns/negative page_size", Call: vt.Call(c.ListRuns, vt.With(validList, func(r *listReq) { r.PageSize = -1 })), Field: "page_size"},
		{Name: "ListRuns/bad page_token", Call: vt.Call(c.ListRuns, vt.With(validList, func(r *listReq) { r.PageToken = "a\nb" })), Field: "page_token"},

		{Name: "CancelRun/no tenant", Call: vt.Call(c.CancelRun, vt.With(validCancel, func(r *cancelReq) { r.Tenant = "" })), Field: "tenant"},
		{Name: "CancelRun/no run_id", Call: vt.Call(c.CancelRun, vt.With(validCancel, func(r *cancelReq) { r.RunId = "" })), Field: "run_id"},
		{Name: "CancelRun/reason too long", Call: vt.Call(c.CancelRun, vt.With(validCancel, func(r *cancelReq) { r.Reason = strings.Repeat("r", 4097) })), Field: "reason"},

		{Name: "ListRuns/foreign page_token", Call: vt.Call(c.ListRuns, vt.With(validList, func(r *listReq) { r.PageToken = "eyJvIjoxMH0" })), Field: "page_token"},
		{Name: "SubmitInput/no tenant", Call: vt.Call(c.SubmitInput, vt.With(validSubmit, func(r *submitReq) { r.Tenant = "" })), Field: "tenant"},
		{Name: "SubmitInput/no run_id", Call: vt.Call(c.SubmitInput, vt.With(validSubmit, func(r *submitReq) { r.RunId = "" })), Field: "run_id"},
		{Name: "SubmitInput/no input", Call: vt.Call(c.SubmitInput, vt.With(validSubmit, func(r *submitReq) { r.Input = nil })), Field: "input"},
		{Name: "SubmitInput/no input_id", Call: vt.Call(c.SubmitInput, vt.With(validSubmit, func(r *submitReq) { r.Input.InputId = "" })), Field: "input.input_id"},
		{Name: "SubmitInput/empty answer", Call: vt.Call(c.SubmitInput, vt.With(validSubmit, func(r *submitReq) { r.Input.Answer = "" })), Field: "input.answer"},
		{Name: "SubmitInput/blank option", Call: vt.Call(c.SubmitInput, vt.With(validSubmit, func(r *submitReq) { r.Input.SelectedOptions = []string{"A", " "} })), Field: "input.selected_options[1]"},
		{Name: "SubmitInput/unknown intervention", Call: vt.Call(c.SubmitInput, vt.With(validSubmit, func(r *submitReq) { r.Input.Intervention = 9 })), Field: "input.intervention"},
	})
}

func TestNilRequests(t *testing.T) {
	s := New(Options{Logger: slog.New(slog.DiscardHandler)})
	ctx := t.Context()
	_, err := s.StartRun(ctx, nil)
	vt.WantInvalid(t, err, "spec")
	_, err = s.GetRun(ctx, nil)
	vt.WantInvalid(t, err, "run_id")
	_, err = s.ListRuns(ctx, nil)
	vt.WantInvalid(t, err, "tenant")
	_, err = s.CancelRun(ctx, nil)
	vt.WantInvalid(t, err, "run_id")
	_, err = s.SubmitInput(ctx, nil)
	vt.WantInvalid(t, err, "input")
}

// FuzzHandlers feeds arbitrary bytes, decoded as each request type, to the
// handlers: never a panic; always InvalidArgument with a BadRequest detail,
// or (valid requests, unconfigured server) Unavailable or Unimplemented.
func FuzzHandlers(f *testing.F) {
	s := New(Options{Logger: slog.New(slog.DiscardHandler)})
	handlers := []func(context.Context, []byte) (bool, error){
		vt.Handler(s.StartRun),
		vt.Handler(s.GetRun),
		vt.Handler(s.ListRuns),
		vt.Handler(s.CancelRun),
		vt.Handler(s.SubmitInput),
	}
	f.Add(uint8(0), vt.Marshal(f, validStart))
	f.Add(uint8(1), vt.Marshal(f, validGet))
	f.Add(uint8(2), vt.Marshal(f, validList))
	f.Add(uint8(3), vt.Marshal(f, validCancel))
	f.Add(uint8(4), vt.Marshal(f, validSubmit))
	f.Add(uint8(0), []byte{})
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		ok, err := handlers[int(which)%len(handlers)](t.Context(), data)
		if !ok || status.Code(err) == codes.Unavailable {
			return
		}
		if cerr := vt.CheckEdge(err); cerr != nil {
			t.Fatal(cerr)
		}
	})
}

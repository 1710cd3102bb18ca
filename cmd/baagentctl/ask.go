package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/services/orchestrator"
)

// Defaults of the run commands. The embedded NATS of `baagent -target=all`
// listens on 127.0.0.1:4222 and serves the single tenant `default`.
const (
	defaultNATSURL = "nats://127.0.0.1:4222"
	defaultTenant  = "default"
	// cancelGrace bounds the wait for the `cancelled` event after Ctrl-C.
	cancelGrace = 10 * time.Second
	// observationPreview is how much of an observation the live view shows.
	observationPreview = 240
)

// Exit statuses of ask: 0 complete, 1 error, 3 cancelled (2 is usage).
const exitCancelled = 3

// runFlags are the flags shared by ask and runs.
type runFlags struct {
	tenant  string
	natsURL string
}

func (c *cli) addRunFlags(fs *flag.FlagSet, rf *runFlags) {
	rf.tenant = defaultTenant
	if v := c.getenv("BAAGENT_TENANT"); v != "" {
		rf.tenant = v
	}
	rf.natsURL = defaultNATSURL
	if v := c.getenv("BAAGENT_NATS_URL"); v != "" {
		rf.natsURL = v
	}
	fs.StringVar(&rf.tenant, "tenant", rf.tenant, "tenant of the run (env BAAGENT_TENANT)")
	fs.StringVar(&rf.natsURL, "nats-url", rf.natsURL, "NATS server carrying the run events (env BAAGENT_NATS_URL)")
}

func runAsk(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("ask", `"QUESTION"`)
	var rf runFlags
	c.addRunFlags(fs, &rf)
	model := fs.String("model", "", "model to use (default: the orchestrator's)")
	conversation := fs.String("conversation", "", "conversation to continue (default: a new one)")
	maxSteps := fs.Int("max-steps", 0, "step limit (default 50)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 || strings.TrimSpace(fs.Arg(0)) == "" {
		return fmt.Errorf("%w: want exactly one QUESTION argument (quote it)", errUsage)
	}

	// Connect to NATS before starting the run, so a wrong URL fails
	// without leaving a run nobody watches.
	connectCtx, cancelConnect := context.WithTimeout(ctx, c.timeout)
	nc, err := natsx.Connect(connectCtx, rf.natsURL, "baagentctl", nil)
	cancelConnect()
	if err != nil {
		return fmt.Errorf("%w (set --nats-url or BAAGENT_NATS_URL)", err)
	}
	defer nc.Close()

	conn, err := c.dial("orchestrator")
	if err != nil {
		return err
	}
	defer conn.Close()
	orch := baagentv1.NewOrchestratorServiceClient(conn)
	// Not cancelled by Ctrl-C: a run that is being created must be known,
	// so that followRun can cancel it.
	startCtx, cancelStart := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
	resp, err := orch.StartRun(startCtx, &baagentv1.OrchestratorServiceStartRunRequest{
		Tenant: rf.tenant,
		Spec: &baagentv1.RunSpec{
			Input:          fs.Arg(0),
			Model:          *model,
			ConversationId: *conversation,
			MaxSteps:       int32(*maxSteps),
		},
	})
	cancelStart()
	if err != nil {
		return fmt.Errorf("start run at %s: %s", c.addrs["orchestrator"], status.Convert(err).Message())
	}
	run := resp.GetRun()

	live := &liveView{w: c.stdout}
	stdin := bufio.NewReader(c.stdin)
	live.prompt = func(id string) {
		// The run is paused on the question: no event comes until it is
		// answered or times out, so reading here blocks nothing.
		fmt.Fprint(c.stdout, "your answer (empty: let it time out) > ")
		line, err := stdin.ReadString('\n')
		line = strings.TrimSpace(line)
		if line == "" {
			if err != nil {
				fmt.Fprintln(c.stdout)
			}
			fmt.Fprintln(c.stdout, "no answer given; the run goes on at the question's deadline (or answer with baagentctl input "+run.GetRunId()+" ANSWER)")
			return
		}
		sctx, cancel := context.WithTimeout(ctx, c.timeout)
		defer cancel()
		if _, err := orch.SubmitInput(sctx, &baagentv1.OrchestratorServiceSubmitInputRequest{Tenant: rf.tenant, RunId: run.GetRunId(), Input: inputFor(id, line)}); err != nil {
			fmt.Fprintf(c.stdout, "answer refused: %s\n(answer with baagentctl input %s ANSWER)\n", status.Convert(err).Message(), run.GetRunId())
		}
	}
	var view eventView = live
	if c.json {
		view = &jsonView{w: c.stdout}
	}
	last, err := followRun(ctx, c, nc, orch, run, view)
	if err != nil {
		return err
	}
	switch last.GetPayload().(type) {
	case *baagentv1.Event_Complete:
		return nil
	case *baagentv1.Event_Cancelled:
		return exitError{exitCancelled}
	default:
		return exitError{1}
	}
}

// followRun shows run's events from the first until the terminal one and
// returns it. When ctx ends (Ctrl-C) it cancels the run and keeps reading,
// for a bounded time, to show how it ended.
func followRun(ctx context.Context, c *cli, nc *nats.Conn, orch baagentv1.OrchestratorServiceClient, run *baagentv1.Run, view eventView) (*baagentv1.Event, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	subject, err := natsx.EventSubject(run.GetTenant(), run.GetRunId())
	if err != nil {
		return nil, err
	}
	// Events are read with a context independent of ctx, so that after
	// Ctrl-C the `cancelled` event can still be shown.
	readCtx, stopReading := context.WithCancel(context.WithoutCancel(ctx))
	defer stopReading()
	setup, cancelSetup := context.WithTimeout(readCtx, c.timeout)
	cons, err := js.OrderedConsumer(setup, natsx.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	cancelSetup()
	if err != nil {
		return nil, fmt.Errorf("subscribe to the events of run %s: %w", run.GetRunId(), err)
	}

	go func() {
		select {
		case <-ctx.Done():
		case <-readCtx.Done():
			return
		}
		cctx, cancel := context.WithTimeout(readCtx, c.timeout)
		_, err := orch.CancelRun(cctx, &baagentv1.OrchestratorServiceCancelRunRequest{Tenant: run.GetTenant(), RunId: run.GetRunId(), Reason: "interrupted in baagentctl"})
		cancel()
		if err != nil {
			fmt.Fprintf(c.stderr, "baagentctl ask: cancel run %s: %s\n", run.GetRunId(), status.Convert(err).Message())
		}
		select {
		case <-readCtx.Done():
		case <-time.After(cancelGrace):
			stopReading()
		}
	}()

	for {
		msg, err := cons.Next(jetstream.FetchContext(readCtx))
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("interrupted; run %s was asked to cancel but did not confirm in %s", run.GetRunId(), cancelGrace)
			}
			return nil, fmt.Errorf("read the events of run %s: %w", run.GetRunId(), err)
		}
		ev := &baagentv1.Event{}
		if err := proto.Unmarshal(msg.Data(), ev); err != nil {
			return nil, fmt.Errorf("run %s: undecodable event on %s: %w", run.GetRunId(), msg.Subject(), err)
		}
		if err := view.show(ev); err != nil {
			return nil, err
		}
		if orchestrator.IsTerminal(ev) {
			return ev, nil
		}
	}
}

// eventView renders events.
type eventView interface {
	show(*baagentv1.Event) error
}

// jsonView prints one event envelope per line in protobuf JSON with the
// .proto field names.
type jsonView struct{ w io.Writer }

func (v *jsonView) show(ev *baagentv1.Event) error {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(v.w, "%s\n", b)
	return err
}

// liveView prints a readable transcript: thoughts, tool calls with their
// arguments, observations shortened with timings, costs and the answer.
type liveView struct {
	w io.Writer
	// text and thought hold what was streamed in the current step, so the
	// complete thought or answer is not printed twice.
	text, thought strings.Builder
	midLine       bool
	// prompt, when set, asks the user to answer the question id.
	prompt func(id string)
}

func (v *liveView) printf(format string, args ...any) {
	if v.midLine {
		fmt.Fprintln(v.w)
		v.midLine = false
	}
	fmt.Fprintf(v.w, format, args...)
}

func (v *liveView) show(ev *baagentv1.Event) error {
	switch p := ev.GetPayload().(type) {
	case *baagentv1.Event_Start:
		s := p.Start
		model := s.GetModel()
		if s.GetScriptedModel() {
			model += " (scripted model, not a real LLM)"
		}
		v.printf("run %s  conversation %s\nmodel %s, at most %d steps\n", ev.GetRunId(), ev.GetConversationId(), model, s.GetMaxSteps())
	case *baagentv1.Event_StepStart:
		v.text.Reset()
		v.thought.Reset()
		v.printf("\n── step %d\n", p.StepStart.GetStepNumber())
	case *baagentv1.Event_ThoughtDelta:
		if v.thought.Len() == 0 {
			v.printf("thinking: ")
		}
		v.thought.WriteString(p.ThoughtDelta.GetDelta())
		fmt.Fprint(v.w, p.ThoughtDelta.GetDelta())
		v.midLine = true
	case *baagentv1.Event_TextDelta:
		if v.text.Len() == 0 {
			v.printf("")
		}
		v.text.WriteString(p.TextDelta.GetDelta())
		fmt.Fprint(v.w, p.TextDelta.GetDelta())
		v.midLine = true
	case *baagentv1.Event_Thought:
		t := p.Thought.GetThought()
		if t != v.text.String() && t != v.thought.String() {
			v.printf("thought: %s\n", t)
		} else {
			v.printf("") // the streamed text was this thought
		}
	case *baagentv1.Event_Act:
		a := p.Act
		args := a.GetRawArguments() + " (not valid JSON)"
		if a.GetToolInput() != nil {
			b, _ := protojson.Marshal(a.GetToolInput())
			args = string(b)
		}
		v.printf("→ %s %s  [%s]\n", a.GetToolName(), shorten(args, observationPreview), a.GetToolCallId())
	case *baagentv1.Event_Observe:
		o := p.Observe
		mark := "ok"
		if !o.GetSuccess() {
			mark = "FAILED"
			if o.GetErrorCode() != "" {
				mark += " " + o.GetErrorCode()
			}
		}
		extra := ""
		if lvl := o.GetOutputLevel(); lvl != baagentv1.OutputLevel_OUTPUT_LEVEL_UNSPECIFIED {
			extra += ", " + strings.ToLower(strings.TrimPrefix(lvl.String(), "OUTPUT_LEVEL_"))
		}
		if o.GetArtifactId() != "" {
			extra += ", " + o.GetArtifactId()
		}
		if o.GetRetryCount() > 0 {
			extra += fmt.Sprintf(", %d retries", o.GetRetryCount())
		}
		if o.GetCached() {
			extra += ", cached"
		}
		v.printf("← %s %s in %.1f ms%s  [%s]\n  %s\n", o.GetToolName(), mark, o.GetDurationMs(), extra, o.GetToolCallId(), shorten(o.GetObservation(), observationPreview))
	case *baagentv1.Event_SkillActivated:
		s := p.SkillActivated
		v.printf("skill %s activated (chain %s)\n", s.GetSkillName(), strings.Join(s.GetActivationChain(), " → "))
	case *baagentv1.Event_ContextCompressed:
		c := p.ContextCompressed
		v.printf("context compressed (%s): %d → %d messages, %d tokens, %.0f%% of the budget\n",
			c.GetCompressionStrategy(), c.GetOriginalMessageCount(), c.GetFinalMessageCount(), c.GetEstimatedTokens(), c.GetBudgetUtilizationPct())
	case *baagentv1.Event_CostUpdate:
		c := p.CostUpdate
		cost := "cost unknown"
		if c.GetTotalCostUsd() > 0 {
			cost = fmt.Sprintf("$%.6f so far", c.GetTotalCostUsd())
		}
		v.printf("  (%s: %d tokens in, %d out; %s)\n", c.GetModel(), c.GetUsage().GetPromptTokens(), c.GetUsage().GetCompletionTokens(), cost)
	case *baagentv1.Event_StepEnd:
		v.printf("") // end a streamed line
	case *baagentv1.Event_Complete:
		m := p.Complete.GetMetrics()
		if strings.TrimSpace(p.Complete.GetContent()) != strings.TrimSpace(v.text.String()) {
			v.printf("\n%s\n", p.Complete.GetContent())
		}
		v.printf("\ncompleted in %d steps, %.1f s, %d tool calls, %d tokens\n", ev.GetStep(), m.GetTotalDurationMs()/1000, len(m.GetToolCalls()), m.GetTotalTokens())
	case *baagentv1.Event_Error:
		v.printf("\nrun failed: %s (%s)\n", p.Error.GetMessage(), p.Error.GetCode())
	case *baagentv1.Event_Cancelled:
		v.printf("\nrun cancelled: %s\n", p.Cancelled.GetReason())
	case *baagentv1.Event_DoomLoopDetected:
		d := p.DoomLoopDetected
		v.printf("! possible loop: %s called %d times with the same arguments within %d s\n", d.GetToolName(), d.GetRepeatCount(), d.GetTimeWindowMs()/1000)
	case *baagentv1.Event_ClarificationAsked:
		q := p.ClarificationAsked
		v.printf("\n? %s\n", q.GetQuestion())
		for _, o := range q.GetOptions() {
			v.printf("  - %s%s%s\n", o.GetLabel(), recommendedMark(o.GetIsRecommended()), describe(o.GetDescription()))
		}
		v.printf("  (or answer in your own words; %d s to answer)\n", q.GetTimeoutSeconds())
		if v.prompt != nil {
			v.prompt(q.GetQuestionId())
		}
	case *baagentv1.Event_DecisionAsked:
		d := p.DecisionAsked
		v.printf("\n? %s\n", d.GetContext())
		for _, o := range d.GetOptions() {
			v.printf("  - %s%s%s\n", o.GetLabel(), recommendedMark(o.GetIsRecommended()), describe(o.GetDescription()))
		}
		v.printf("  (%d s to answer)\n", d.GetTimeoutSeconds())
		if v.prompt != nil {
			v.prompt(d.GetDecisionId())
		}
	case *baagentv1.Event_ClarificationAnswered:
		a := p.ClarificationAnswered
		v.printf("  answer: %s%s\n", a.GetAnswer(), timedOutMark(a.GetTimedOut()))
	case *baagentv1.Event_DecisionAnswered:
		a := p.DecisionAnswered
		v.printf("  decision: %s%s\n", a.GetAnswer(), timedOutMark(a.GetTimedOut()))
	default:
		v.printf("%s\n", ev.GetType())
	}
	return nil
}

// shorten puts s on one line and cuts it to at most n runes.
func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + fmt.Sprintf("… (%d more characters)", len(r)-n)
}

// errNoRun marks a missing RUN_ID argument.
var errNoRun = errors.New("missing RUN_ID")

func recommendedMark(ok bool) string {
	if ok {
		return " (recommended)"
	}
	return ""
}

func describe(d string) string {
	if d == "" {
		return ""
	}
	return ": " + d
}

func timedOutMark(ok bool) string {
	if ok {
		return " (no answer in time; the recommended option was used)"
	}
	return ""
}

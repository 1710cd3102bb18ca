package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/baagent/baagent/core/runevent"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

const (
	// cancelGrace bounds the wait for the `cancelled` event after Ctrl-C.
	cancelGrace = 10 * time.Second
	// observationPreview is how much of an observation the live view shows.
	observationPreview = 240
	// maxResumes bounds consecutive stream reconnections without a new
	// event in between, so a gateway that keeps failing is reported.
	maxResumes = 5
	// maxResumeDelay caps the wait the gateway asks for before resuming.
	maxResumeDelay = 5 * time.Second
	// answerRetry bounds the retries of an answer sent before the run
	// recorded that it waits (see submitWhenWaiting).
	answerRetry = 5 * time.Second
)

// Exit statuses of ask: 0 complete, 1 error, 3 cancelled (2 is usage).
const exitCancelled = 3

func runAsk(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("ask", `"QUESTION"`)
	var rf runFlags
	c.addRunFlags(fs, &rf)
	model := fs.String("model", "", "model to use (default: the orchestrator's)")
	conversation := fs.String("conversation", "", "conversation to continue (default: a new one)")
	maxSteps := fs.Int("max-steps", 0, "step limit (default 50)")
	planFlag := fs.String("plan", "auto", "work plan: auto (by the question's complexity), always, never")
	approvalFlag := fs.String("plan-approval", "", "approve the work plan before it runs: ask, off (default: the orchestrator's setting)")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	planMode, planApproval, err := parsePlanFlags(*planFlag, *approvalFlag)
	if err != nil {
		return err
	}
	if fs.NArg() != 1 || strings.TrimSpace(fs.Arg(0)) == "" {
		return fmt.Errorf("%w: want exactly one QUESTION argument (quote it)", errUsage)
	}

	gw, done, err := c.gateway(rf)
	if err != nil {
		return err
	}
	defer done()
	// One call starts the run and streams it from its first event. Not
	// cancelled by Ctrl-C: a run that is being created must be known, so
	// that followRun can cancel it (and its stream outlives Ctrl-C to show
	// the `cancelled` event); the start is bounded by c.timeout.
	streamCtx, cancelStream := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelStream()
	startTimer := time.AfterFunc(c.timeout, cancelStream)
	spec := &baagentv1.RunSpec{
		Input:          fs.Arg(0),
		Model:          *model,
		ConversationId: *conversation,
		MaxSteps:       int32(*maxSteps),
		Plan:           planMode,
		PlanApproval:   planApproval,
	}
	stream, err := gw.StartRunStream(gw.auth(streamCtx), &baagentv1.StartRunStreamRequest{Spec: spec})
	var first *baagentv1.StartRunStreamResponse
	if err == nil {
		first, err = stream.Recv()
	}
	noStream := !startTimer.Stop() // the stream is cancelled: follow the run afresh
	switch {
	case noStream && err != nil:
		err = status.Errorf(codes.DeadlineExceeded, "no answer within %s", c.timeout)
	case status.Code(err) == codes.Unimplemented:
		// A gateway older than StartRunStream (no run was started): start
		// the run, then follow it from its first event.
		noStream = true
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
		var resp *baagentv1.StartRunResponse
		resp, err = gw.StartRun(gw.auth(sctx), &baagentv1.StartRunRequest{Spec: spec})
		cancel()
		first = &baagentv1.StartRunStreamResponse{Payload: &baagentv1.StartRunStreamResponse_Run{Run: resp.GetRun()}}
	}
	if err == nil && first.GetRun() == nil {
		err = status.Error(codes.Internal, "the gateway's stream did not start with the run")
	}
	if err != nil {
		return c.rpcError("start run", err)
	}
	run := first.GetRun()

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
		if err := submitWhenWaiting(sctx, gw, run.GetRunId(), inputFor(id, line)); err != nil {
			fmt.Fprintf(c.stdout, "answer refused: %s\n(answer with baagentctl input %s ANSWER)\n", status.Convert(err).Message(), run.GetRunId())
		}
	}
	var view eventView = live
	if c.json {
		view = &jsonView{w: c.stdout}
	}
	var started *startedStream
	if !noStream {
		started = &startedStream{
			recv: func() (*baagentv1.Event, error) {
				m, err := stream.Recv()
				return m.GetEvent(), err
			},
			cancel: cancelStream,
		}
	}
	last, err := followStarted(ctx, c, gw, run.GetRunId(), view, started)
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

// submitWhenWaiting answers the run's question. The question event is
// published just before the run records that it waits, so an answer typed
// at once may be refused as FailedPrecondition (the run is still
// running): it is retried for up to answerRetry while the run is not over.
func submitWhenWaiting(ctx context.Context, gw *gatewayClient, runID string, in *baagentv1.RunInput) error {
	ctx, cancel := context.WithTimeout(ctx, answerRetry)
	defer cancel()
	for {
		_, err := gw.SubmitInput(gw.auth(ctx), &baagentv1.SubmitInputRequest{RunId: runID, Input: in})
		if status.Code(err) != codes.FailedPrecondition {
			return err
		}
		resp, gerr := gw.GetRun(gw.auth(ctx), &baagentv1.GetRunRequest{RunId: runID})
		if gerr != nil || runOver(resp.GetRun().GetState()) {
			return err
		}
		if sleepCtx(ctx, 20*time.Millisecond) != nil {
			return err
		}
	}
}

func runOver(s baagentv1.RunState) bool {
	switch s {
	case baagentv1.RunState_RUN_STATE_COMPLETED, baagentv1.RunState_RUN_STATE_FAILED, baagentv1.RunState_RUN_STATE_CANCELLED:
		return true
	}
	return false
}

// followRun shows the run's events from the first until the terminal one
// and returns it. The gateway stream starts at `earliest`, because the run
// may publish before the stream opens; when the gateway cuts the stream
// (slow consumer, restart) it resumes after the last cursor seen and skips
// events already shown. When ctx ends (Ctrl-C) it cancels the run and keeps
// reading, for a bounded time, to show how it ended.
func followRun(ctx context.Context, c *cli, gw *gatewayClient, runID string, view eventView) (*baagentv1.Event, error) {
	return followStarted(ctx, c, gw, runID, view, nil)
}

// followStarted is followRun that first reads first, the StartRunStream
// that created the run, if not nil.
func followStarted(ctx context.Context, c *cli, gw *gatewayClient, runID string, view eventView, first *startedStream) (*baagentv1.Event, error) {
	// Events are read with a context independent of ctx, so that after
	// Ctrl-C the `cancelled` event can still be shown.
	readCtx, stopReading := context.WithCancel(context.WithoutCancel(ctx))
	cancelDone := make(chan struct{})
	defer func() {
		stopReading()
		<-cancelDone // the canceller writes to stderr; it must not outlive the command
	}()
	go func() {
		defer close(cancelDone)
		select {
		case <-ctx.Done():
		case <-readCtx.Done():
			return
		}
		cctx, cancel := context.WithTimeout(readCtx, c.timeout)
		_, err := gw.CancelRun(gw.auth(cctx), &baagentv1.CancelRunRequest{RunId: runID, Reason: "interrupted in baagentctl"})
		cancel()
		if err != nil && readCtx.Err() == nil {
			fmt.Fprintf(c.stderr, "baagentctl ask: cancel run %s: %s\n", runID, status.Convert(err).Message())
		}
		t := time.NewTimer(cancelGrace)
		defer t.Stop()
		select {
		case <-readCtx.Done():
		case <-t.C:
			stopReading()
		}
	}()

	f := &follower{after: "earliest", first: first}
	failures := 0 // consecutive attempts that brought no new event
	for {
		last, got, err := f.read(readCtx, gw, runID, view)
		if last != nil || (err != nil && !resumable(err)) {
			if err != nil && ctx.Err() != nil {
				return nil, fmt.Errorf("interrupted; run %s was asked to cancel but did not confirm in %s", runID, cancelGrace)
			}
			if err != nil {
				return nil, c.rpcError("read the events of run "+runID, err)
			}
			return last, nil
		}
		if got {
			failures = 0
		}
		if failures++; failures > maxResumes {
			return nil, c.rpcError(fmt.Sprintf("read the events of run %s (gave up after %d attempts)", runID, maxResumes), err)
		}
		if err := sleepCtx(readCtx, resumeDelay(err)); err != nil {
			return nil, fmt.Errorf("interrupted; run %s was asked to cancel but did not confirm in %s", runID, cancelGrace)
		}
	}
}

// follower remembers where a run's event stream got to across
// reconnections.
type follower struct {
	after   string // cursor to resume after
	lastSeq uint64 // highest seq shown
	// first, when set, is the StartRunStream that created the run: the
	// first read takes its events instead of opening StreamRunEvents.
	first *startedStream
}

// startedStream is the rest of a StartRunStream after its run message.
type startedStream struct {
	recv   func() (*baagentv1.Event, error)
	cancel context.CancelFunc // ends the stream
}

// read streams events after f.after to view until the terminal event
// (returned) or an error. got reports whether any new event arrived. A
// stream that ends before the terminal event is reported as Unavailable,
// so that it is resumed.
func (f *follower) read(ctx context.Context, gw *gatewayClient, runID string, view eventView) (last *baagentv1.Event, got bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var recv func() (*baagentv1.Event, error)
	if s := f.first; s != nil {
		f.first = nil
		defer s.cancel()
		defer context.AfterFunc(ctx, s.cancel)()
		recv = s.recv
	} else {
		stream, err := gw.StreamRunEvents(gw.auth(ctx), &baagentv1.StreamRunEventsRequest{RunId: runID, After: f.after})
		if err != nil {
			return nil, false, err
		}
		recv = func() (*baagentv1.Event, error) {
			m, err := stream.Recv()
			return m.GetEvent(), err
		}
	}
	for {
		ev, err := recv()
		if errors.Is(err, io.EOF) {
			return nil, got, status.Error(codes.Unavailable, "the event stream ended before the run did")
		}
		if err != nil {
			return nil, got, err
		}
		if ev == nil {
			continue
		}
		if ev.GetCursor() != "" {
			f.after = ev.GetCursor()
		}
		if ev.GetStreamReset() != nil {
			// Transport only: replay restarts at the earliest retained
			// event; the seq check below drops what was already shown.
			continue
		}
		if ev.GetSeq() != 0 && ev.GetSeq() <= f.lastSeq {
			continue
		}
		f.lastSeq = max(f.lastSeq, ev.GetSeq())
		got = true
		if err := view.show(ev); err != nil {
			return nil, got, err
		}
		if runevent.IsTerminal(ev) {
			return ev, got, nil
		}
	}
}

// resumable reports whether a stream error is worth resuming after: the
// gateway cut a slow consumer or went away.
func resumable(err error) bool {
	if _, ok := status.FromError(err); !ok {
		return false
	}
	switch status.Code(err) {
	case codes.ResourceExhausted:
		return slowConsumer(err)
	case codes.Unavailable:
		return true
	}
	return false
}

// slowConsumer reports the gateway's SLOW_CONSUMER cut (as opposed to
// another exhausted resource, such as too many streams).
func slowConsumer(err error) bool {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == "SLOW_CONSUMER" {
			return true
		}
	}
	return strings.HasPrefix(status.Convert(err).Message(), "slow_consumer")
}

// resumeDelay is the wait the gateway asked for (RetryInfo), capped, or a
// short default.
func resumeDelay(err error) time.Duration {
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			return min(max(ri.GetRetryDelay().AsDuration(), 0), maxResumeDelay)
		}
	}
	return 200 * time.Millisecond
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
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
	plan          planView
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

// innerIndent indents the calls a tool composition made under it.
func innerIndent(parentToolCallID string) string {
	if parentToolCallID == "" {
		return ""
	}
	return "    ┆ "
}

func (v *liveView) show(ev *baagentv1.Event) error {
	if child := ev.GetSubagentRunId(); child != "" {
		return v.showMirrored(ev, child)
	}
	switch p := ev.GetPayload().(type) {
	case *baagentv1.Event_SubagentAssigned:
		v.showAssigned(p.SubagentAssigned)
	case *baagentv1.Event_MemoryRecalled:
		v.printf("%s\n", recalledLine(p.MemoryRecalled))
	case *baagentv1.Event_PatternMatched:
		v.printf("%s\n", patternMatchedLine(p.PatternMatched))
	case *baagentv1.Event_DoomLoopIntervened:
		v.showIntervened(p.DoomLoopIntervened)
	case *baagentv1.Event_Start:
		s := p.Start
		model := s.GetModel()
		if s.GetScriptedModel() {
			model += " (scripted model, not a real LLM)"
		}
		v.printf("run %s  conversation %s\nmodel %s, at most %d steps\n", ev.GetRunId(), ev.GetConversationId(), model, s.GetMaxSteps())
		if c := complexityLine(s.GetQueryComplexity(), s.GetComplexitySignals()); c != "" {
			v.printf("complexity %s\n", c)
		}
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
		v.printf("%s→ %s %s  [%s]\n", innerIndent(a.GetParentToolCallId()), a.GetToolName(), shorten(args, observationPreview), a.GetToolCallId())
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
		in := innerIndent(o.GetParentToolCallId())
		v.printf("%s← %s %s in %.1f ms%s  [%s]\n%s  %s\n", in, o.GetToolName(), mark, o.GetDurationMs(), extra, o.GetToolCallId(), in, shorten(o.GetObservation(), observationPreview))
	case *baagentv1.Event_SkillActivated:
		s := p.SkillActivated
		v.printf("skill %s activated (chain %s)\n", s.GetSkillName(), strings.Join(s.GetActivationChain(), " → "))
	case *baagentv1.Event_ContextCompressed:
		c := p.ContextCompressed
		v.printf("context compressed (%s): %d → %d messages, %d tokens, %.0f%% of the budget\n",
			c.GetCompressionStrategy(), c.GetOriginalMessageCount(), c.GetFinalMessageCount(), c.GetEstimatedTokens(), c.GetBudgetUtilizationPct())
	case *baagentv1.Event_CostUpdate:
		c := p.CostUpdate
		v.printf("  (%s: %s)\n", c.GetModel(), costUpdateLine(c))
	case *baagentv1.Event_StepEnd:
		v.printf("") // end a streamed line
	case *baagentv1.Event_WorkPlan:
		v.showPlan(p.WorkPlan)
	case *baagentv1.Event_PlanStepStart:
		v.showPlanStepStart(p.PlanStepStart)
	case *baagentv1.Event_PlanStepEnd:
		v.showPlanStepEnd(p.PlanStepEnd)
	case *baagentv1.Event_Warning:
		v.showWarning(p.Warning)
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
	case *baagentv1.Event_PermissionAsked:
		a := p.PermissionAsked
		d := a.GetDecision()
		v.printf("\n? %s wants to run with %s; it needs your approval.\n", a.GetToolName(), shorten(a.GetArguments(), 300))
		for _, o := range d.GetOptions() {
			v.printf("  - %s%s%s\n", o.GetLabel(), recommendedMark(o.GetIsRecommended()), describe(o.GetDescription()))
		}
		v.printf("  (%d s to answer)\n", d.GetTimeoutSeconds())
		if v.prompt != nil {
			v.prompt(d.GetDecisionId())
		}
	case *baagentv1.Event_PermissionReplied:
		r := p.PermissionReplied
		v.printf("  %s: %s%s\n", r.GetToolName(), r.GetReply(), timedOutMark(r.GetTimedOut()))
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

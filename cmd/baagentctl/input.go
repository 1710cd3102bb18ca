package main

import (
	"context"
	"fmt"
	"strings"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// runInput answers the question a WAITING_INPUT run waits on:
// `baagentctl input RUN_ID ANSWER` (an option label or, for clarifications,
// free text; `stop`, `continue` or `correct` for a doom-loop decision).
func runInput(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("input", "RUN_ID ANSWER")
	var rf runFlags
	c.addRunFlags(fs, &rf)
	inputID := fs.String("input-id", "", "question or decision id (default: the one the run waits on)")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() < 2 {
		return fmt.Errorf("%w: want RUN_ID and ANSWER", errUsage)
	}
	runID, answer := fs.Arg(0), strings.Join(fs.Args()[1:], " ")
	ctx, gw, release, err := c.gatewayCall(ctx, rf)
	if err != nil {
		return err
	}
	defer release()
	id := *inputID
	if id == "" {
		resp, err := gw.GetRun(ctx, &baagentv1.GetRunRequest{RunId: runID})
		if err != nil {
			return c.rpcError("read run", err)
		}
		if id = pendingID(resp.GetRun().GetPendingInput()); id == "" {
			return fmt.Errorf("run %s is %s and waits on no question", runID, stateName(resp.GetRun().GetState()))
		}
	}
	resp, err := gw.SubmitInput(ctx, &baagentv1.SubmitInputRequest{RunId: runID, Input: inputFor(id, answer)})
	if err != nil {
		return c.rpcError("submit input", err)
	}
	if c.json {
		return c.printProto(resp.GetRun())
	}
	fmt.Fprintf(c.stdout, "answered %s of run %s: %s\n", id, runID, answer)
	return nil
}

// pendingID is the id of the question p asks ("" for none).
func pendingID(p *baagentv1.PendingInput) string {
	if q := p.GetClarification(); q != nil {
		return q.GetQuestionId()
	}
	return p.GetDecision().GetDecisionId()
}

// inputFor builds the answer; a comma-separated answer of a multiple-choice
// decision is sent as selected options by the server's own parsing of
// answer text, so only the text is set here.
func inputFor(id, answer string) *baagentv1.RunInput {
	return &baagentv1.RunInput{InputId: id, Answer: strings.TrimSpace(answer)}
}

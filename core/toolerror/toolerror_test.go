package toolerror

import (
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func TestObservation(t *testing.T) {
	t.Parallel()
	got := Observation("call_1", baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT, "DEADLINE", "took too long")
	want := "Operation failed.\n\nError Type: timeout\nError Code: DEADLINE\nError Message: took too long\n\nTool Call ID: call_1"
	if got != want {
		t.Errorf("Observation =\n%q\nwant\n%q", got, want)
	}
	got = Observation("call_2", baagentv1.ToolErrorType_TOOL_ERROR_TYPE_UNSPECIFIED, "", "")
	want = "Operation failed.\n\nError Type: Unknown\nError Code: UNKNOWN\nError Message: An unknown error occurred\n\nTool Call ID: call_2"
	if got != want {
		t.Errorf("Observation with defaults =\n%q\nwant\n%q", got, want)
	}
}

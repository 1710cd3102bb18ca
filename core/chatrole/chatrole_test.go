package chatrole

import (
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func TestName(t *testing.T) {
	t.Parallel()
	want := map[baagentv1.Role]string{
		baagentv1.Role_ROLE_SYSTEM:    "system",
		baagentv1.Role_ROLE_USER:      "user",
		baagentv1.Role_ROLE_ASSISTANT: "assistant",
		baagentv1.Role_ROLE_TOOL:      "tool",
	}
	for r := range baagentv1.Role_name {
		name, ok := Name(baagentv1.Role(r))
		if w, known := want[baagentv1.Role(r)]; known {
			if !ok || name != w {
				t.Errorf("Name(%v) = %q, %v; want %q, true", baagentv1.Role(r), name, ok, w)
			}
		} else if ok {
			t.Errorf("Name(%v) = %q, true; want not ok", baagentv1.Role(r), name)
		}
	}
	if _, ok := Name(baagentv1.Role(999)); ok {
		t.Error("an out-of-range role must not be named")
	}
}

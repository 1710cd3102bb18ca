package external

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/baagent/baagent/services/toolrunner/tool"
)

type namedTool string

func (n namedTool) Spec() tool.Spec { return tool.Spec{Name: string(n)} }
func (namedTool) Execute(context.Context, tool.Call) (tool.Result, error) {
	return tool.Result{}, nil
}

func names(ts []tool.Tool) string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Spec().Name)
	}
	return strings.Join(out, ",")
}

func TestNameRegistry(t *testing.T) {
	t.Parallel()

	r := newNameRegistry(DefaultReservedNames)
	acc, ref := r.claim("a", []tool.Tool{namedTool("x"), namedTool("file_read"), namedTool("y"), namedTool("x")})
	if names(acc) != "x,y" || len(ref) != 2 {
		t.Fatalf("a: accepted %s, refused %v", names(acc), ref)
	}
	acc, ref = r.claim("b", []tool.Tool{namedTool("y"), namedTool("z")})
	if names(acc) != "z" || len(ref) != 1 || !strings.Contains(ref[0].reason, "already offered by a") {
		t.Fatalf("b: accepted %s, refused %v", names(acc), ref)
	}
	// a no longer lists y: b gets it on its next listing.
	r.claim("a", []tool.Tool{namedTool("x")})
	if acc, _ = r.claim("b", []tool.Tool{namedTool("y"), namedTool("z")}); names(acc) != "y,z" {
		t.Fatalf("b after a dropped y: %s", names(acc))
	}
	r.release("a")
	if acc, _ = r.claim("b", []tool.Tool{namedTool("x")}); names(acc) != "x" {
		t.Fatalf("b after a released: %s", names(acc))
	}
}

func TestSourceStateUpDown(t *testing.T) {
	t.Parallel()

	m, _ := newMetrics(nil)
	var logs bytes.Buffer
	s := newSourceState("provider:p", slog.New(slog.NewTextHandler(&logs, nil)), m, newNameRegistry(nil))
	if s.Tools() != nil || s.Up() {
		t.Fatal("a new source offers tools")
	}
	if !s.setTools([]tool.Tool{namedTool("a")}, []refusal{{"bad name!", "invalid"}}) || len(s.Tools()) != 1 {
		t.Fatal("setTools did not bring the source up")
	}
	s.setTools([]tool.Tool{namedTool("a")}, []refusal{{"bad name!", "invalid"}})
	if n := strings.Count(logs.String(), "external tool refused"); n != 1 {
		t.Fatalf("a repeated refusal was logged %d times, want once", n)
	}
	if !s.setDown(context.DeadlineExceeded) || s.Tools() != nil || s.setDown(nil) {
		t.Fatal("setDown")
	}
	s.setTools([]tool.Tool{namedTool("a")}, nil)
	if got := testutil.ToFloat64(m.restarts.WithLabelValues("provider:p")); got != 1 {
		t.Fatalf("restarts = %v after coming back once, want 1", got)
	}
	if got := testutil.ToFloat64(m.refused.WithLabelValues("provider:p")); got != 0 {
		t.Fatalf("refused = %v, want 0", got)
	}
}

func TestLineLogger(t *testing.T) {
	t.Parallel()

	var logs bytes.Buffer
	l := newLineLogger(slog.New(slog.NewTextHandler(&logs, nil)), "stderr")
	l.Write([]byte("first\r\nsec"))
	l.Write([]byte("ond\n\n" + strings.Repeat("x", 3*maxLogLine) + "\nlast\n"))
	out := logs.String()
	for _, want := range []string{"line=first ", "line=second ", "line=last "} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n"); n != 4 {
		t.Errorf("%d lines logged, want 4 (an over-long line once, truncated):\n%s", n, out)
	}
	if !strings.Contains(out, "truncated=true") || strings.Contains(out, strings.Repeat("x", maxLogLine+1)) {
		t.Error("the over-long line is not cut")
	}
}

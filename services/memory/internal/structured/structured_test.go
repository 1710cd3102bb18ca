package structured

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

func TestNewChecksConfig(t *testing.T) {
	ok := Config{BaseURL: " http://model/v1/ ", Model: "m", Timeout: time.Second, MaxTokens: 10}
	c, err := New(ok)
	if err != nil || c.cfg.BaseURL != "http://model/v1" || c.Model() != "m" {
		t.Fatalf("New(%+v) = %+v, %v", ok, c, err)
	}
	for _, bad := range []struct {
		edit func(*Config)
		want error
	}{
		{func(c *Config) { c.BaseURL = " / " }, ErrNoBaseURL},
		{func(c *Config) { c.Model = "" }, ErrNoModel},
		{func(c *Config) { c.Timeout = 0 }, nil},
		{func(c *Config) { c.MaxTokens = 0 }, nil},
	} {
		cfg := ok
		bad.edit(&cfg)
		_, err := New(cfg)
		if err == nil || (bad.want != nil && !errors.Is(err, bad.want)) {
			t.Errorf("New(%+v) = %v, want %v", cfg, err, bad.want)
		}
	}
}

func TestClassify(t *testing.T) {
	api := func(status int) error { return &openai.APIError{HTTPStatusCode: status, Message: "x"} }
	for _, c := range []struct {
		err       error
		retryable bool
	}{
		{api(http.StatusTooManyRequests), true},
		{api(http.StatusServiceUnavailable), true},
		{api(http.StatusRequestTimeout), true},
		{api(http.StatusUnauthorized), true},
		{api(http.StatusNotFound), true},
		{api(http.StatusBadRequest), false},
		{api(http.StatusUnprocessableEntity), false},
		{&openai.RequestError{HTTPStatusCode: http.StatusBadGateway, Err: errors.New("bad gateway")}, true},
		{fmt.Errorf("dial: %w", errors.New("connection refused")), true},
		{context.DeadlineExceeded, true},
		{errors.New("invalid character '<' looking for beginning of value"), false},
	} {
		f := Classify(context.Background(), c.err)
		if f.Retryable != c.retryable || !errors.Is(f, c.err) {
			t.Errorf("Classify(%v) = %+v, want retryable %v", c.err, f, c.retryable)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if f := Classify(ctx, errors.New("whatever")); !f.Retryable || !errors.Is(f, context.Canceled) {
		t.Errorf("a cancelled call: %+v", f)
	}
}

func TestWantsMaxCompletionTokens(t *testing.T) {
	param := "max_tokens"
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&openai.APIError{HTTPStatusCode: 400, Param: &param, Message: "unsupported"}, true},
		{&openai.APIError{HTTPStatusCode: 400, Message: "use max_completion_tokens instead"}, true},
		{&openai.APIError{HTTPStatusCode: 400, Message: "bad schema"}, false},
		{&openai.APIError{HTTPStatusCode: 500, Param: &param}, false},
		{errors.New("max_completion_tokens"), false},
	} {
		if got := wantsMaxCompletionTokens(c.err); got != c.want {
			t.Errorf("wantsMaxCompletionTokens(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestCut(t *testing.T) {
	if got := cut("héllo", 3); got != "hél…" {
		t.Fatalf("cut = %q", got)
	}
	if got := cut("hé", 3); got != "hé" {
		t.Fatalf("cut = %q", got)
	}
}

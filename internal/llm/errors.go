package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Kind classifies a failed model call.
type Kind int

// Kinds of failure. The string form (Kind.String) is the metrics outcome.
const (
	KindUnknown Kind = iota
	// KindRateLimited: 429 or a provider rate-limit error; retried.
	KindRateLimited
	// KindAuth: 401/403, a missing or wrong API key; not retried.
	KindAuth
	// KindBadRequest: the request was refused as invalid (400, 422) or was
	// invalid before sending; not retried.
	KindBadRequest
	// KindContextLength: the prompt does not fit the model's context window;
	// the caller should compress and try again.
	KindContextLength
	// KindModelUnavailable: the model does not exist on the endpoint (404,
	// not retried) or is overloaded (503, 529, "overloaded"; retried).
	KindModelUnavailable
	// KindServer: another 5xx or a server error inside the stream; retried.
	KindServer
	// KindTimeout: no response headers or no stream progress in time; retried.
	KindTimeout
	// KindConnection: the endpoint could not be reached or the connection
	// broke; retried.
	KindConnection
	// KindProtocol: the endpoint answered with something that is not a valid
	// chat-completions response or stream (malformed chunk, bounds exceeded).
	KindProtocol
	// KindInterrupted: the stream failed after deltas had been delivered, so
	// it cannot be retried transparently. Err holds the cause.
	KindInterrupted
	// KindCanceled: the caller's context ended; Err wraps its error.
	KindCanceled
)

var kindNames = [...]string{"unknown", "rate_limited", "auth", "bad_request", "context_length",
	"model_unavailable", "server_error", "timeout", "connection", "protocol", "interrupted", "canceled"}

func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return "unknown"
	}
	return kindNames[k]
}

// Sentinels for errors.Is; an *Error matches the sentinel of its Kind.
var (
	ErrRateLimited      = &Error{Kind: KindRateLimited}
	ErrAuth             = &Error{Kind: KindAuth}
	ErrBadRequest       = &Error{Kind: KindBadRequest}
	ErrContextLength    = &Error{Kind: KindContextLength}
	ErrModelUnavailable = &Error{Kind: KindModelUnavailable}
	ErrServer           = &Error{Kind: KindServer}
	ErrTimeout          = &Error{Kind: KindTimeout}
	ErrConnection       = &Error{Kind: KindConnection}
	ErrProtocol         = &Error{Kind: KindProtocol}
	ErrInterrupted      = &Error{Kind: KindInterrupted}
	ErrCanceled         = &Error{Kind: KindCanceled}
)

// Error is a failed model call.
type Error struct {
	Kind Kind
	// Model is the model the call was for.
	Model string
	// StatusCode is the HTTP status, when there was one.
	StatusCode int
	// Code is the provider's error code (`context_length_exceeded`), if any.
	Code string
	// Message is the provider's message or a description of the failure.
	Message string
	// RetryAfter is what the endpoint asked to wait (429/503), if it said.
	RetryAfter time.Duration
	// Attempts is how many requests were made.
	Attempts int
	// Err is the underlying error.
	Err error
	// secret is removed from what Error says (see redact).
	secret string
}

// redacted replaces the API key wherever an error would say it.
const redacted = "[redacted]"

// minSecretLen keeps a key so short that it may be an ordinary word from
// mangling messages; real keys are far longer.
const minSecretLen = 8

// redact removes key from the message and from everything Error says:
// providers quote the key they were given ("Incorrect API key provided:
// sk-…"), and model errors travel into logs and run error events.
func (e *Error) redact(key string) {
	if len(key) < minSecretLen {
		return
	}
	e.secret = key
	e.Message = strings.ReplaceAll(e.Message, key, redacted)
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("model")
	if e.Model != "" {
		fmt.Fprintf(&b, " %q", e.Model)
	}
	b.WriteString(": ")
	b.WriteString(e.Kind.String())
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.StatusCode)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	} else if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " after %d attempts", e.Attempts)
	}
	if e.secret != "" {
		return strings.ReplaceAll(b.String(), e.secret, redacted)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches the sentinel of the same Kind.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Kind == e.Kind && t.Err == nil && t.Message == "" && t.StatusCode == 0
}

// Retryable reports whether a fresh attempt may succeed.
func (e *Error) Retryable() bool {
	switch e.Kind {
	case KindRateLimited, KindServer, KindTimeout, KindConnection:
		return true
	case KindModelUnavailable:
		// Overloaded is worth another try; a model that does not exist is not.
		return e.StatusCode != http.StatusNotFound && e.Code != "model_not_found"
	}
	return false
}

// errStalled is the cancellation cause when the endpoint made no progress in
// time (no headers, or no chunk within the idle timeout).
var errStalled = errors.New("no progress from the endpoint in time")

// classify turns an error from go-openai or the transport into an *Error.
// attemptCtx is the per-attempt context, whose cause tells a stall from the
// caller's cancellation.
func classify(ctx, attemptCtx context.Context, err error, retryAfter time.Duration) *Error {
	var le *Error
	if errors.As(err, &le) {
		return le
	}
	if ctx.Err() != nil {
		return &Error{Kind: KindCanceled, Message: "the call was cancelled", Err: context.Cause(ctx)}
	}
	if attemptCtx != nil && errors.Is(context.Cause(attemptCtx), errStalled) {
		return &Error{Kind: KindTimeout, Message: errStalled.Error(), Err: err}
	}
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) {
		e := &Error{StatusCode: apiErr.HTTPStatusCode, Message: apiErr.Message, Code: codeString(apiErr.Code), RetryAfter: retryAfter, Err: err}
		e.Kind = kindOf(apiErr.HTTPStatusCode, e.Code, apiErr.Type, apiErr.Message)
		return e
	}
	var reqErr *openai.RequestError
	if errors.As(err, &reqErr) {
		msg := strings.TrimSpace(string(reqErr.Body))
		if len(msg) > 512 {
			msg = msg[:512] + "…"
		}
		if msg == "" {
			msg = reqErr.HTTPStatus
		}
		e := &Error{StatusCode: reqErr.HTTPStatusCode, Message: msg, RetryAfter: retryAfter, Err: err}
		e.Kind = kindOf(reqErr.HTTPStatusCode, "", "", msg)
		return e
	}
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		return &Error{Kind: KindTimeout, Err: err}
	}
	if errors.Is(err, openai.ErrTooManyEmptyStreamMessages) {
		return &Error{Kind: KindProtocol, Message: "the stream sent too many non-data lines", Err: err}
	}
	var netErr net.Error
	var opErr *net.OpError
	if errors.As(err, &opErr) || errors.As(err, &netErr) || isConnectionError(err) {
		return &Error{Kind: KindConnection, Err: err}
	}
	return &Error{Kind: KindUnknown, Err: err}
}

// kindOf maps an HTTP status (0 for an error inside a stream) and the
// provider's code and type to a Kind.
func kindOf(status int, code, typ, msg string) Kind {
	lc := strings.ToLower(code + " " + typ + " " + msg)
	switch {
	case strings.Contains(lc, "context_length_exceeded") || strings.Contains(lc, "maximum context length") ||
		strings.Contains(lc, "context window"):
		return KindContextLength
	case status == http.StatusTooManyRequests || strings.Contains(lc, "rate_limit") || strings.Contains(lc, "rate limit"):
		return KindRateLimited
	case status == http.StatusUnauthorized || status == http.StatusForbidden ||
		strings.Contains(lc, "invalid_api_key") || strings.Contains(lc, "authentication"):
		return KindAuth
	case status == http.StatusNotFound || strings.Contains(lc, "model_not_found"):
		return KindModelUnavailable
	case status == http.StatusServiceUnavailable || status == 529 || strings.Contains(lc, "overloaded"):
		return KindModelUnavailable
	case status == http.StatusRequestTimeout || status == http.StatusGatewayTimeout:
		return KindTimeout
	case status >= 500 || (status == 0 && (strings.Contains(lc, "server_error") || strings.Contains(lc, "internal"))):
		return KindServer
	case status >= 400:
		return KindBadRequest
	}
	return KindServer
}

func codeString(c any) string {
	switch v := c.(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		return fmt.Sprint(v)
	}
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// isConnectionError recognises a connection that broke mid-body, which the
// transport reports as plain errors.
func isConnectionError(err error) bool {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "connection reset") || strings.Contains(s, "broken pipe") ||
		strings.Contains(s, "unexpected EOF") || strings.Contains(s, "connection refused") ||
		errors.Is(err, net.ErrClosed)
}

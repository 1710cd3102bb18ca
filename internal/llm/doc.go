// Package llm is the model client: one OpenAI-compatible chat-completions
// endpoint (OpenAI, vLLM, Ollama, LiteLLM, the built-in scripted model)
// reached through github.com/sashabaranov/go-openai.
//
// The orchestrator depends on the [Model] interface; [Client] implements it.
// A call streams: [Client.Chat] delivers text, reasoning and tool-call
// fragments to a callback as they arrive and returns the assembled assistant
// [Message] (tool calls complete, with the model's ids and argument JSON
// verbatim), the finish reason and the token usage the endpoint reported
// (requested with stream_options.include_usage). [Client.Complete] is the
// non-streaming form.
//
// Messages are this package's own small types ([Message], [ToolCall],
// [Tool], [Usage]) so that the wire mapping lives in one place;
// [MessagesFromProto], [Message.Proto], [ToolsFromProto] and [Usage.Proto]
// convert to and from the shared baagent.v1 messages.
//
// # Failures and retries
//
// Every failure is an [*Error] with a [Kind] the orchestrator can show and
// test with errors.Is against the Err* sentinels ([ErrRateLimited],
// [ErrAuth], [ErrBadRequest], [ErrContextLength], [ErrModelUnavailable],
// ...). Rate limits (429), server errors (5xx), timeouts and connection
// errors are retried with exponential backoff and jitter, honouring
// Retry-After (and retry-after-ms), but only while nothing has been delivered
// to the callback: a stream that fails half way is never replayed, the call
// fails with [ErrInterrupted] instead and the caller decides. Cancelling the
// context closes the stream at once; the call then returns an error that
// wraps context.Canceled (or DeadlineExceeded).
//
// # Metrics
//
// The client owns the model-call metrics (per attempt and per call), so the
// orchestrator must not count them again; it keeps run- and step-level
// metrics and uses [Response.Usage] for cost. Registered on
// Config.Registerer (nil = none):
//
//	baagent_llm_requests_total{model,outcome}            counter, one per Chat/Complete call
//	baagent_llm_request_duration_seconds{model,outcome}  histogram, whole call, retries included
//	baagent_llm_time_to_first_delta_seconds{model}       histogram, streaming calls
//	baagent_llm_retries_total{model,reason}              counter
//	baagent_llm_tokens_total{model,direction}            counter, direction = prompt | completion
//
// The model label is the model name sent to the endpoint when the
// configuration names it (Config.Model, the keys of Config.Models,
// Config.MetricModels), and "other" for any other name: a run's model comes
// from the client's run spec as well as from configuration and skill context
// modifiers, and every label value is a series kept for the life of the
// process, so a label fed by requests must stay within a set fixed at start.
package llm

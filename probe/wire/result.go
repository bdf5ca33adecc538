// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"strconv"
	"time"

	"github.com/llmprobe/llmprobe/slo"
)

// API selects the OpenAI endpoint a target is probed through.
type API string

const (
	APIChat        API = "chat"        // POST {base}/chat/completions
	APICompletions API = "completions" // POST {base}/completions
	APIResponses   API = "responses"   // POST {base}/responses (OpenAI Responses API)
	APIMessages    API = "messages"    // POST {base}/messages (Anthropic Messages API)
	APIEmbeddings  API = "embeddings"  // POST {base}/embeddings
)

// Outcome classifies how a request ended. The values are the `outcome`
// label of llmprobe_requests_total.
type Outcome string

const (
	OutcomeSuccess         Outcome = "success"          // 2xx, well-formed stream, ended with [DONE] (or a final usage/finish event)
	OutcomeHTTPError       Outcome = "http_error"       // a non-2xx status
	OutcomeTimeout         Outcome = "timeout"          // request_timeout (or a stall past it) elapsed
	OutcomeStreamError     Outcome = "stream_error"     // the stream broke: reset, EOF without [DONE], read error
	OutcomeConnectError    Outcome = "connect_error"    // no connection: DNS, refused, TLS handshake
	OutcomeInvalidResponse Outcome = "invalid_response" // 2xx but unparseable: malformed event, wrong content type, no tokens
)

// Outcomes lists every outcome, in a stable order (used to initialise series).
var Outcomes = [...]Outcome{OutcomeSuccess, OutcomeHTTPError, OutcomeTimeout, OutcomeStreamError, OutcomeConnectError, OutcomeInvalidResponse}

// Anomaly is a set of server anomalies (see AnomalyKinds).
type Anomaly uint8

const (
	// AnomalyCachedExceedsPrompt: usage reported more cached prompt tokens
	// than prompt tokens (CachedTokens is clamped to PromptTokens).
	AnomalyCachedExceedsPrompt Anomaly = 1 << iota
	// AnomalyOutputExceedsMaxTokens: the server generated more tokens
	// than max_tokens allowed (a server that ignores it; see too_many_tokens).
	AnomalyOutputExceedsMaxTokens
	// AnomalyInvalidUsage: a usage count was not a count (negative,
	// fractional, above 1e9: it is ignored), or a per-chunk
	// completion_tokens jumped by more than the chunk can carry (the
	// chunk counts as one ITL gap).
	AnomalyInvalidUsage
)

// AnomalyKinds names every anomaly, in a stable order: the values of the
// `kind` label of llmprobe_server_anomalies_total.
var AnomalyKinds = [...]struct {
	Anomaly Anomaly
	Name    string
}{
	{AnomalyCachedExceedsPrompt, "cached_exceeds_prompt"},
	{AnomalyOutputExceedsMaxTokens, "output_exceeds_max_tokens"},
	{AnomalyInvalidUsage, "invalid_usage"},
}

// Has reports whether a is in the set.
func (s Anomaly) Has(a Anomaly) bool { return s&a != 0 }

// FinishReasons are the bounded values a server's finish_reason is
// exported as (the `reason` label of llmprobe_finish_reasons_total): the
// OpenAI values, "other" for any other string (llm-d's cache_threshold,
// a gateway's own), "none" when the stream carried none.
var FinishReasons = [...]string{"stop", "length", "tool_calls", "content_filter", "function_call", "other", "none"}

// FinishReasonLabel maps a server's finish_reason to one of FinishReasons.
func FinishReasonLabel(s string) string {
	switch s {
	case "":
		return "none"
	case "stop", "length", "tool_calls", "content_filter", "function_call":
		return s
	}
	return "other"
}

// StatusCodes are the bounded values an HTTP response's status is
// exported as (the `code` label of llmprobe_http_responses_total): every
// success is 2xx, every redirect 3xx; the status codes an LLM endpoint's
// on-call tells apart by their own; other client and server errors as 4xx
// and 5xx; anything else (1xx, a code out of range) other.
var StatusCodes = [...]string{"2xx", "3xx", "400", "401", "403", "404", "408", "413", "422", "429", "4xx", "500", "502", "503", "504", "5xx", "other"}

// StatusCodeLabel maps an HTTP status code to one of StatusCodes.
func StatusCodeLabel(code int) string {
	switch {
	case code >= 200 && code <= 299:
		return "2xx"
	case code >= 300 && code <= 399:
		return "3xx"
	}
	switch code {
	case 400, 401, 403, 404, 408, 413, 422, 429, 500, 502, 503, 504:
		return strconv.Itoa(code)
	}
	switch {
	case code >= 400 && code <= 499:
		return "4xx"
	case code >= 500 && code <= 599:
		return "5xx"
	}
	return "other"
}

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// Images go with the text as image parts (vision models).
	Images []Image `json:"-"`
}

// Image is one encoded image of a message.
type Image struct {
	MediaType string // image/png or image/jpeg
	Data      string // base64 of the encoded bytes
}

// DataURL is the image as a data: URL.
func (im Image) DataURL() string { return "data:" + im.MediaType + ";base64," + im.Data }

// Sampling holds the sampling parameters sent with a request. They are
// always explicit: hidden defaults make numbers incomparable.
type Sampling struct {
	Temperature float64
	TopP        float64 // 0 means "not sent"
	TopK        int     // 0 means "not sent"
	Seed        *int64  // nil means "not sent"
}

// Request is one request as the client sends it.
type Request struct {
	API   API
	Model string

	Messages  []Message // APIChat
	Prompt    string    // APICompletions, text mode (and a single embeddings input)
	PromptIDs []int     // APICompletions, token-id mode (vLLM accepts a list of ints)
	Inputs    []string  // APIEmbeddings: a batch of inputs (Prompt when empty)
	// KeepText keeps the completion text in Result.Completion for this
	// request (conversation history) even when the client does not.
	KeepText bool

	MaxTokens int
	Sampling  Sampling
	// ExtraBody is merged into the JSON body last (e.g. ignore_eos).
	ExtraBody map[string]any
}

// Result is everything measured about one request. It flows one way from
// the client to the observers (metrics, traces, logs, bench collector); it
// never holds secrets, and holds prompt text only when the user opted in.
type Result struct {
	Target string
	// Replica is the discovered replica the request went to (its
	// `replica` label); empty for a target without discovery.
	Replica string
	Model   string // the configured model (label); ResponseModel is what the server said
	Class   string

	// Multi-turn conversations: ConversationID is empty for single requests.
	ConversationID string
	Turn           int // 1-based

	// Planned is the instant on the arrival timeline; Dispatched is when the
	// harness handed the request to the HTTP client; Start is the instant
	// just before the request was written on a connection (docs/design.md
	// "start"). ScheduleLag = Dispatched - Planned; ClientWait = Start -
	// Dispatched (connection acquisition: dial + TLS when not reused).
	Planned     time.Time
	Dispatched  time.Time
	Start       time.Time
	ScheduleLag time.Duration
	ClientWait  time.Duration
	ConnReused  bool
	// Retries counts re-sends of this request on a new connection because
	// the server closed or reset a reused kept-alive connection before a
	// byte of the response arrived (the keep-alive race): once by the
	// client, plus any by Go's transport itself; never after a byte of the
	// response arrived, never for a fresh connection.
	Retries int
	DNS     time.Duration // 0 when no lookup happened
	Connect time.Duration // TCP connect, 0 when reused
	TLS     time.Duration // TLS handshake, 0 when reused or plain

	// Warmup is true for requests started during the warm-up period; they
	// are counted but not mixed into latency histograms.
	Warmup bool

	Outcome    Outcome
	ErrorType  string // short, low-cardinality reason when not success (e.g. "http_429", "connection_reset", "malformed_event")
	Error      string // human message, sanitised (never a secret, never prompt text)
	StatusCode int    // 0 when no response
	RetryAfter time.Duration
	// Proto is the protocol of the response: "HTTP/1.1", "HTTP/2.0" or
	// "HTTP/1.0" (anything else is "other"); empty when none came.
	Proto string

	// Timing per docs/design.md. FirstToken is false when no token-bearing event arrived.
	FirstToken bool
	TTFT       time.Duration // Start -> first token-bearing event
	E2E        time.Duration // Start -> last token-bearing event (Start -> end when no token)
	TPOT       time.Duration // (E2E-TTFT)/(OutputTokens-1), 0 when OutputTokens < 2
	// ITLs are the gaps between consecutive token-bearing events; where
	// the server reports usage in every chunk (continuous_usage_stats), a
	// chunk that carries k tokens gives k gaps of gap/k (k bounded by the
	// chunk's text, see chunkTokenSlack).
	ITLs   []time.Duration
	Chunks int // token-bearing events received
	// FirstAnswer is true when a token of the answer arrived: content or
	// completion text, or a tool call, as opposed to reasoning. TTFA is
	// Start -> that event; with no reasoning it equals TTFT.
	FirstAnswer bool
	TTFA        time.Duration
	// ReasoningChunks are token-bearing events that carried only
	// reasoning (reasoning_content or reasoning).
	ReasoningChunks int
	// ToolCall is true when the answer held a tool call (delta.tool_calls).
	ToolCall bool
	// Images and ImagePixels are the synthetic images the prompt carried
	// (their tokens are in the server's prompt count, not in the plan).
	Images      int
	ImagePixels int
	// CoalescedChunks are token-bearing events that arrived in the same
	// read as the previous one (so their ITL is 0): the bytes had queued
	// up. Alone that may be the server or a proxy batching; with a high
	// harness inflation it means the client reads late.
	CoalescedChunks int

	// Token counts. *Reported say whether the server's usage provided the
	// number; otherwise it was estimated (prompt: planned; output: chunks).
	PromptTokens int
	OutputTokens int
	// ReasoningTokens are the reasoning tokens among OutputTokens, from
	// usage.completion_tokens_details.reasoning_tokens (ReasoningReported);
	// otherwise 0.
	ReasoningTokens      int
	ReasoningReported    bool
	CachedTokens         int
	UsageReported        bool
	CachedTokensReported bool
	// Anomalies are things the server reported that cannot be right
	// (cached tokens above the prompt, more output than max_tokens, negative
	// counts); what could be corrected was (cached tokens are clamped).
	Anomalies Anomaly

	// What the workload planned.
	PlannedPromptTokens int
	PlannedOutputTokens int
	PrefixGroup         int // -1: no shared prefix
	PrefixTokens        int
	// TraceLine is the line of the trace record the request replays
	// (bench --replay); 0 otherwise.
	TraceLine int

	// Sent parameters (recorded on spans and reports).
	MaxTokens int
	Sampling  Sampling

	FinishReason  string
	ResponseModel string
	ResponseID    string
	// What the response said of the serving stack (identity.go): the
	// chunks' system_fingerprint (chat and completions) and the HTTP
	// Server header, of any response. Each is cut to MaxIdentityValue
	// bytes, control characters replaced, the target's secrets and any
	// echo of the prompt removed; empty when the response carried none.
	SystemFingerprint string
	Server            string

	// TraceID is the hex trace id when the request's span was sampled
	// (used for exemplars); empty otherwise.
	TraceID string

	// Completion holds the generated text; kept only when a later turn
	// needs it (conversation history) or the user opted in to recording.
	Completion string
}

// ErrorTypeCancelled is the error type of a request llmprobe itself
// cancelled (shutdown, a target removed by a reload): outcome timeout.
const ErrorTypeCancelled = "cancelled"

// SLORequest is what an SLO judges of r; ok is false for a request
// llmprobe cancelled itself, which no SLO judges (the server had no chance
// to be good or bad).
func (r *Result) SLORequest() (req slo.Request, ok bool) {
	if r.ErrorType == ErrorTypeCancelled {
		return slo.Request{}, false
	}
	return slo.Request{
		Succeeded:    r.Outcome == OutcomeSuccess,
		TTFT:         r.TTFT,
		TPOT:         r.TPOT,
		OutputTokens: r.OutputTokens,
		E2E:          r.E2E,
	}, true
}

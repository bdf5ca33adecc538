// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package sim is llmprobe's built-in OpenAI-compatible LLM serving
// simulator: an HTTP server that behaves like a continuous-batching
// inference engine (vLLM-like) without a GPU, for the demo, the end-to-end
// tests and the harness benchmarks. docs/simulator.md is the user guide.
//
// sim is the server the rest of llmprobe is tested against, so it must
// not share their code: it imports no other llmprobe package (not probe,
// exporter, bench, fit or cmd; internal/layout's TestLayering checks it,
// its tests included) but internal/bounded, the size bound on reading its
// configuration file, which knows nothing of LLMs; otherwise only the
// standard library, client_golang, OpenTelemetry's API and yaml. Those packages import sim, never the other way round.
//
// # Endpoints
//
//	POST /v1/chat/completions   chat, streaming (SSE) or not
//	POST /v1/completions        text completions, streaming or not
//	POST /v1/responses          OpenAI's Responses API (responses.go)
//	POST /v1/messages           Anthropic's Messages API (messages.go)
//	POST /v1/embeddings         embeddings, prefill only (embeddings.go)
//	GET  /v1/models             the served model names
//	POST /tokenize              vLLM's tokenizer endpoint
//	GET  /health                200 while serving
//	GET  /metrics               vLLM's metric names (vllm:...), own registry
//	GET  /dcgm/metrics          dcgm-exporter's view of the GPU (dcgm.go)
//
// # Engine and timing model
//
// One engine goroutine per server runs vLLM's scheduling loop. Each step
// it admits waiting requests in arrival order while fewer than
// max_num_seqs run and the KV cache can hold their prompt + max_tokens
// (kv_allocation reserve; on_demand, vLLM's way, their prompt, and a
// sequence that finds no block for its next token preempts the most
// recently admitted one);
// gives each running decode one token of the step's token budget
// (max_num_batched_tokens) and the rest to prefill chunks (chunked
// prefill, in admission order); sleeps until the step's absolute deadline;
// then every sequence whose prefill is complete produces one token. A step
// lasts
//
//	(prefill_base + prefill_per_token × prefill tokens, if any) +
//	decode_base + decode_per_seq × sequences in the step
//
// so TTFT grows with the uncached prompt tokens and with the queue, and
// inter-token latency grows with the batch. In zero-latency mode steps
// take no time and everything else works as usual. Timing steps
// (Config.TimingSteps, timing.go) multiply step durations by a factor
// from known instants after the start on, to reproduce a latency
// regression.
//
// # Prefix cache
//
// Prompt tokens are grouped into blocks of block_size tokens; each full
// block is identified by a chain hash (its token ids and the previous
// block's hash). Blocks found in the cache are reused and not prefilled,
// and are reported as usage.prompt_tokens_details.cached_tokens (at least
// one prompt token is always computed, as in vLLM). Generated tokens fill
// blocks too, so a multi-turn conversation that sends the previous answer
// back hits the cache for it. Capacity is num_kv_blocks, shared with
// running sequences; unreferenced cached blocks are evicted least recently
// used first.
//
// # Tokenisation
//
// The tokeniser is deterministic and documented so that a client can
// predict prompt_tokens:
//
//   - Each maximal run of ASCII letters is split into pieces of at most 8
//     letters (a word of up to 8 letters is exactly one token).
//   - Each maximal run of ASCII digits is split into pieces of at most 3
//     digits.
//   - Every other rune that is not whitespace is one token (each byte of
//     invalid UTF-8 too).
//   - Whitespace (Go's unicode.IsSpace) is never a token.
//   - A token's id is the FNV-1a 32-bit hash of its text, modulo 32000.
//
// Completions also accept a prompt given as a list of token ids in [0,
// 32000); each counts as one token.
//
// A chat prompt is templated as, for each message, <start> <role> <sep>
// content <end>, then <start> <assistant> <sep> (the generation prompt),
// with fixed ids for the template tokens. So
//
//	prompt_tokens = Σ over messages (tokens(content) + 4) + 3
//
// A message's content is a string, null, or an array of {"type":"text",
// "text":...} parts (each part tokenised separately). /tokenize answers
// the same count for the same input.
//
// Each generated token is one lowercase word of at most 8 letters from a
// fixed 256-word vocabulary, emitted with a leading space (" word"), so the
// completion text re-tokenises to exactly completion_tokens tokens. Early
// stops (EOS) are not counted in completion_tokens: usage always equals the
// number of streamed tokens. Output is reproducible for temperature 0 or
// an explicit seed (derived from the prompt), random otherwise.
//
// # Reasoning and tool calls
//
// Chat completions may reason first (Config.ReasoningTokens or
// ReasoningFraction, scaled by the request's reasoning_effort: none 0,
// minimal 0.25, low 0.5, medium 1, high 2): those tokens go out in
// delta.reasoning_content (or delta.reasoning, Config.ReasoningField) and
// are reported in usage.completion_tokens_details.reasoning_tokens. A
// request offering tools is answered with a tool call when tool_choice
// requires it (or names a function), or under "auto" with probability
// Config.ToolCallProbability: a header event (id, type, name, empty
// arguments; no token), then one delta.tool_calls arguments fragment per
// token up to max_tokens, concatenating to {"q": "w1 … wN"}, and
// finish_reason "tool_calls". Every reasoning or argument token costs a
// decode step like any other.
//
// # Request handling
//
// Every generating API goes through one shape (exchange.go): read the
// body, have the API parse it into the common description of what to
// generate (a templated prompt, max tokens, seed, reasoning and tool
// plan), apply the fault (chat and completions), submit it to the engine,
// then write the stream or the body as the engine produces tokens. An
// API's file (completion.go for chat and completions, responses.go,
// messages.go, embeddings.go) holds only its own part: its request
// parsing, its ids, its stream events, its unary body and its error body
// (apiSpec). Metrics and the request log see every API alike.
//
// # Other APIs, images, adapters
//
// The Responses, Messages and Embeddings requests template their prompt
// like chat messages and go to the same engine; an embedding is a
// sequence with no token to generate, done once prefilled. Images (data URLs or base64 sources, PNG or JPEG, header
// decoded only) add ceil(width×height / image_token_pixels) prompt tokens
// (images.go). LoRA adapters are further model names served by the engine
// with their base's requests, their share of each step multiplied by
// their time factors (adapters.go).
//
// # Faults
//
// Faults are injected at random with configured probabilities
// (FaultConfig) or on demand with the X-Sim-Fault header (FaultHeader).
//
// # Request log
//
// With Config.RequestLog set, every completion request appends one JSON
// line (RequestLogEntry: ids, instants, token counts, status, fault) to
// that file once it is over, for tests that compare a client's view of
// each request with the server's (requestlog.go).
//
// # Use in tests
//
// Several servers can run in one process; each has its own Prometheus
// registry. Listen("127.0.0.1:0", cfg, logger) serves on a free port and
// returns the base URL; Shutdown stops it.
package sim

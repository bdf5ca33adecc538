// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package wire is how one request goes over the wire and what came back.
//
// It holds the values a request is made of and a result is filled with
// (Request, Message, Image, Sampling, API; Result with its Outcome,
// error type, finish reason, status-code class and server anomalies,
// result.go), the Client that sends a Request and measures it (client.go:
// Do and the stream loop; conntrace.go: the httptrace hooks; failures.go:
// how a request that did not end well is classified; servertext.go:
// cleaning what a server writes), the server-sent-events reader (sse.go),
// the zero-allocation JSON scanner and the chunk decoder (json.go,
// chunk.go), the body encoder (body.go), one file per wire protocol behind
// the protocol interface (protocol.go; openai.go, responses.go,
// messages.go, embeddings.go) with each API's tool format (tools.go), the
// request's span (span.go), the Redactor of a target's secrets
// (redact.go), and NewHTTPClient, the thin wrapper over internal/httpclient
// (httpclient.go).
//
// It knows nothing of workloads, schedules or metrics: what to send is
// the caller's (probe/workload), when and how often the engine's (probe).
// It must not import any llmprobe package but slo (Result.SLORequest) and
// internal/httpclient; never config, probe, probe/workload, probe/harness,
// exporter, bench, fit, sim or cmd.
package wire

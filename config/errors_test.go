// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"regexp"
	"strings"
	"testing"
)

// withTarget appends lines to validBase's target (from line 13).
func withTarget(lines string) string { return validBase + lines }

// replaced replaces the first old in validBase with new.
func replaced(old, new string) string { return strings.Replace(validBase, old, new, 1) }

// targetsPart is validBase from its targets key (line 7) on.
var targetsPart = validBase[strings.Index(validBase, "targets:"):]

// goTypeName matches what a Go type name looks like in a message: the
// config author never wrote it and cannot act on it.
var goTypeName = regexp.MustCompile(`\b(config|model|commoncfg|yaml)\.[A-Za-z]|\bplain\b|interface \{|map\[|\[\]|\b(float|u?int)(8|16|32|64)\b|!!`)

// unquoted drops the quoted parts of a message (values the author wrote).
func unquoted(msg string) string {
	return regexp.MustCompile(`"(?:[^"\\]|\\.)*"`).ReplaceAllString(msg, `""`)
}

const durationHint = "(a number and a unit, e.g. 500ms, 30s, 5m, 1h)"

// TestDecodeErrorMessages: bad snippets and the exact message each gives:
// the field the author wrote, at its key's line and column, in the
// author's words (never a Go type).
func TestDecodeErrorMessages(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		// Flow mappings: the key holding the offending value, not the
		// first key on the line.
		{"flow mapping", replaced("{rate: 1}", `{process: poisson, rate: "fast"}`),
			`x.yml:12:33: targets[0].arrival.rate: cannot use string "fast" as a number`},
		{"long value", replaced("{rate: 1}", `{process: poisson, rate: fastandfurious}`),
			`x.yml:12:33: targets[0].arrival.rate: cannot use string "fastandfurious" as a number`},
		{"same value twice", replaced("{rate: 1}", `{process: fast, rate: fast}`), strings.Join([]string{
			`x.yml:12:15: targets[0].arrival.process: must be one of poisson, gamma, constant, trace_shape; got "fast"`,
			`x.yml:12:30: targets[0].arrival.rate: cannot use string "fast" as a number`,
		}, "\n")},
		{"two on a line", replaced("{rate: 1}", `{rate: fast, burstiness: slow}`), strings.Join([]string{
			`x.yml:12:15: targets[0].arrival.rate: cannot use string "fast" as a number`,
			`x.yml:12:27: targets[0].arrival.burstiness: cannot use string "slow" as a number`,
		}, "\n")},

		// Durations.
		{"bare number as duration", withTarget("    request_timeout: 10\n"),
			`x.yml:13:5: targets[0].request_timeout: not a valid duration "10" ` + durationHint},
		{"list as duration", withTarget("    request_timeout: [1]\n"),
			`x.yml:13:5: targets[0].request_timeout: cannot use a list as a duration (e.g. 30s, 5m)`},
		{"mapping as duration", "global:\n  warmup: {a: 1}\n" + validBase,
			`x.yml:2:3: global.warmup: cannot use a mapping as a duration (e.g. 30s, 5m)`},
		{"duration in a nested section", "global:\n  saturation: {window: soon, max_lag: 1s}\n" + validBase,
			`x.yml:2:16: global.saturation.window: not a valid duration "soon" ` + durationHint},
		{"duration in workload_from", withTarget(`    workload_from: {prometheus: {url: "http://p:9090", range: 1}}` + "\n"),
			`x.yml:13:56: targets[0].workload_from.prometheus.range: not a valid duration "1" ` + durationHint},
		{"think_time list", replaced("output_tokens: 10\n", "output_tokens: 10\n        turns: {count: 2, think_time: [1]}\n"),
			`x.yml:7:27: workloads.w.classes[0].turns.think_time: cannot use a list as a duration (e.g. 5s) or a distribution (a mapping with "dist")`},
		{"think_time value", replaced("output_tokens: 10\n", "output_tokens: 10\n        turns: {count: 2, think_time: {dist: fixed, value: soon}}\n"),
			`x.yml:7:53: workloads.w.classes[0].turns.think_time.value: not a valid duration "soon" ` + durationHint},

		// Shapes: list, mapping and scalar where another is expected.
		{"scalar as mapping", replaced("arrival: {rate: 1}", "arrival: 5"),
			`x.yml:12:5: targets[0].arrival: cannot use number "5" as a mapping`},
		{"list as string", replaced("url: http://127.0.0.1:8000/v1", "url: [1]"),
			`x.yml:9:5: targets[0].url: cannot use a list as a string`},
		{"list as integer", withTarget("    max_inflight: [1]\n"),
			`x.yml:13:5: targets[0].max_inflight: cannot use a list as an integer`},
		{"fraction as integer", withTarget("    max_inflight: 1.5\n"),
			`x.yml:13:5: targets[0].max_inflight: must be a whole number, got "1.5"`},
		{"string as integer", withTarget("    max_inflight: many\n"),
			`x.yml:13:5: targets[0].max_inflight: cannot use string "many" as an integer`},
		{"list as extra_body", withTarget("    extra_body: [1]\n"),
			`x.yml:13:5: targets[0].extra_body: cannot use a list as a mapping`},
		{"list as global", "global: [1]\n" + validBase,
			`x.yml:1:1: global: cannot use a list as a mapping`},
		{"list as workloads", "workloads: [1]\n" + targetsPart,
			`x.yml:1:1: workloads: cannot use a list as a mapping`},
		{"list as workload", "workloads:\n  w: [1]\n" + targetsPart,
			`x.yml:2:3: workloads.w: cannot use a list as a mapping`},
		{"mapping as classes", "workloads:\n  w:\n    classes: {a: 1}\n" + targetsPart,
			`x.yml:3:5: workloads.w.classes: cannot use a mapping as a list`},
		{"scalar as classes", "workloads:\n  w:\n    classes: 5\n" + targetsPart,
			`x.yml:3:5: workloads.w.classes: cannot use number "5" as a list`},
		{"scalar as class", "workloads:\n  w:\n    classes:\n      - 5\n" + targetsPart,
			`x.yml:4:9: workloads.w.classes[0]: cannot use number "5" as a mapping`},
		{"list as turns", replaced("output_tokens: 10\n", "output_tokens: 10\n        turns: [1]\n"),
			`x.yml:7:9: workloads.w.classes[0].turns: cannot use a list as a mapping`},
		{"mapping as targets", validBase[:strings.Index(validBase, "targets:")] + "targets: {a: 1}\n",
			`x.yml:7:1: targets: cannot use a mapping as a list`},
		{"scalar as target", validBase[:strings.Index(validBase, "targets:")] + "targets:\n  - 5\n",
			`x.yml:8:5: targets[0]: cannot use number "5" as a mapping`},
		{"list as target", validBase[:strings.Index(validBase, "targets:")] + "targets:\n  - [1]\n",
			`x.yml:8:5: targets[0]: cannot use a list as a mapping`},
		{"scalar as file", "5\n", `x.yml:1:1: cannot use number "5" as a mapping`},
		{"list as file", "[1, 2]\n", `x.yml:1:1: cannot use a list as a mapping`},
		{"multi-line value", "0\n\n00", `x.yml:1:1: cannot use string "0\n00" as a mapping`},
		{"odd tag", "!%20", `x.yml:1:1: cannot use value "" as a mapping`},
		{"empty key", `"": 1` + "\n" + validBase, `x.yml:1:1: unknown field ""`},
		{"null file", "~\n", `x.yml: empty configuration`},
		{"document marker only", "---\n", `x.yml: empty configuration`},

		// Distributions.
		{"list as dist", replaced("prompt_tokens: 10", "prompt_tokens: [1]"),
			`x.yml:5:9: workloads.w.classes[0].prompt_tokens: cannot use a list as a number or a distribution (a mapping with "dist")`},
		{"string as dist", replaced("prompt_tokens: 10", "prompt_tokens: fast"),
			`x.yml:5:9: workloads.w.classes[0].prompt_tokens: cannot use string "fast" as a number or a distribution (a mapping with "dist")`},
		{"dist parameter", replaced("prompt_tokens: 10", "prompt_tokens: {dist: fixed, value: x}"),
			`x.yml:5:38: workloads.w.classes[0].prompt_tokens.value: cannot use string "x" as a number`},
		{"quantile key", replaced("prompt_tokens: 10", "prompt_tokens: {dist: empirical, quantiles: {a: 1, 0.9: 2}}"),
			`x.yml:5:54: workloads.w.classes[0].prompt_tokens.quantiles.a: key "a" must be a number`},

		// http_client_config (prometheus/common's own checks).
		{"list as http_client_config", withTarget("    http_client_config: [1]\n"),
			`x.yml:13:5: targets[0].http_client_config: cannot use a list as a mapping`},
		{"proxy_url", withTarget(`    http_client_config: {proxy_url: "::"}` + "\n"),
			`x.yml:13:26: targets[0].http_client_config.proxy_url: not a valid URL: missing protocol scheme`},
		{"tls version", withTarget("    http_client_config: {tls_config: {min_version: TLS99}}\n"),
			`x.yml:13:39: targets[0].http_client_config.tls_config.min_version: unknown TLS version: TLS99`},
		{"two auths", withTarget("    http_client_config: {bearer_token: a, basic_auth: {username: u}}\n"),
			`x.yml:13:5: targets[0].http_client_config: at most one of basic_auth, oauth2, bearer_token & bearer_token_file must be configured`},
		{"list as secret", withTarget("    http_client_config: {basic_auth: {username: u, password: [1]}}\n"),
			`x.yml:13:52: targets[0].http_client_config.basic_auth.password: cannot use a list as a string`},
		{"bool", withTarget("    http_client_config: {follow_redirects: maybe}\n"),
			`x.yml:13:26: targets[0].http_client_config.follow_redirects: cannot use string "maybe" as a boolean (true or false)`},

		// tracing.
		{"list as headers", validBase + "tracing: {headers: [1]}\n",
			`x.yml:13:11: tracing.headers: cannot use a list as a mapping`},
		{"tracing bool", validBase + "tracing: {insecure: maybe}\n",
			`x.yml:13:11: tracing.insecure: cannot use string "maybe" as a boolean (true or false)`},

		// Keys.
		{"duplicate key", "global:\n  warmup: 1s\n  warmup: 2s\n" + validBase,
			`x.yml:3:3: global.warmup: mapping key "warmup" already defined at line 2`},
		{"bad merge", "global:\n  <<: 5\n" + validBase,
			`x.yml:2:3: global.<<: a merge (<<) needs a mapping or a list of mappings`},
		// A misspelt key: the suggestion, and not the unset field's
		// consequence ("arrival.rate ... got 0").
		{"unknown field without its consequence", replaced("arrival: {rate: 1}", "arival: {rate: 1}"),
			`x.yml:12:5: targets[0].arival: unknown field "arival" (did you mean "arrival"?)`},

		// identity.poll_interval bounds.
		{"poll_interval too short", withTarget("    identity: {poll_interval: 500ms}\n"),
			`x.yml:13:16: targets[0].identity.poll_interval: must be 0s (no polling) or between 1s and 1d, got 500ms`},
		{"poll_interval negative", withTarget("    identity:\n      poll_interval: -1s\n"),
			`x.yml:14:7: targets[0].identity.poll_interval: not a valid duration "-1s" (a number and a unit, e.g. 500ms, 30s, 5m, 1h)`},
		{"identity unknown key", withTarget("    identity: {poll: 1m}\n"),
			`x.yml:13:16: targets[0].identity.poll: unknown field "poll"`},

		// idle_conn_timeout bounds.
		{"idle_conn_timeout zero", withTarget("    idle_conn_timeout: 0s\n"),
			`x.yml:13:5: targets[0].idle_conn_timeout: must be more than 0s and at most 10m, got 0s`},
		{"idle_conn_timeout large", withTarget("    idle_conn_timeout: 11m\n"),
			`x.yml:13:5: targets[0].idle_conn_timeout: must be more than 0s and at most 10m, got 11m`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load([]byte(tt.doc), "x.yml")
			if err == nil {
				t.Fatal("expected an error")
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
			if m := goTypeName.FindString(unquoted(err.Error())); m != "" {
				t.Errorf("message shows a Go type (%q): %s", m, err)
			}
		})
	}
}

// TestDecodeAndValidationErrorsTogether: a type error does not hide the
// file's other problems, and the field whose type was wrong gets no
// second, spurious complaint ("required", "must be positive").
func TestDecodeAndValidationErrorsTogether(t *testing.T) {
	doc := `global:
  late_after: soon
workloads:
  w:
    classes:
      - name: c
        weight: 0
        prompt_tokens: 10
        output_tokens: [1]
targets:
  - name: t
    url: ftp://x
    model: m
    workload: w
    arrival: {rate: fast}
    request_timeout: 10
    api: rerank
  - name: t
    url: http://x/v1
    model: m
    workload: w
    arrival: {rate: 1}
`
	want := strings.Join([]string{
		`x.yml:2:3: global.late_after: not a valid duration "soon" ` + durationHint,
		`x.yml:7:9: workloads.w.classes[0].weight: must be a positive number, got 0`,
		`x.yml:9:9: workloads.w.classes[0].output_tokens: cannot use a list as a number or a distribution (a mapping with "dist")`,
		`x.yml:12:5: targets[0].url: scheme must be http or https, got "ftp"`,
		`x.yml:15:15: targets[0].arrival.rate: cannot use string "fast" as a number`,
		`x.yml:16:5: targets[0].request_timeout: not a valid duration "10" ` + durationHint,
		`x.yml:17:5: targets[0].api: must be one of chat, completions, responses, messages, embeddings, got "rerank"`,
		`x.yml:18:5: targets[1].name: duplicate target name "t" (also targets[0])`,
	}, "\n")
	_, err := Load([]byte(doc), "x.yml")
	if err == nil || err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}
}

// TestErrorsReferToWorkloadsThatFailed: a target naming a workload that
// failed to decode is not also told the workload does not exist.
func TestErrorsReferToWorkloadsThatFailed(t *testing.T) {
	doc := "workloads:\n  w:\n    classes: 5\n" + targetsPart
	want := `x.yml:3:5: workloads.w.classes: cannot use number "5" as a list`
	if _, err := Load([]byte(doc), "x.yml"); err == nil || err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}
}

// TestTooManyErrors: a file with thousands of problems gets a bounded
// report.
func TestTooManyErrors(t *testing.T) {
	var b strings.Builder
	b.WriteString(validBase)
	for i := 0; i < 500; i++ {
		b.WriteString("    x" + strings.Repeat("y", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26)) + ": 1\n")
	}
	_, err := Load([]byte(b.String()), "x.yml")
	es, ok := err.(Errors)
	if !ok {
		t.Fatalf("err = %v", err)
	}
	if len(es) != MaxReportedErrors+1 {
		t.Fatalf("%d errors reported, want %d and a summary", len(es), MaxReportedErrors)
	}
	if got, want := es[len(es)-1].Error(), "x.yml: 400 more errors not shown"; got != want {
		t.Errorf("summary = %q, want %q", got, want)
	}
}

// TestUnknownFieldsInHTTPClientConfig: an unknown key inside an
// http_client_config is reported where it is, and prometheus/common's own
// checks of the same block are reported too (its decoding stops at the
// unknown keys; validation runs them anyway).
func TestUnknownFieldsInHTTPClientConfig(t *testing.T) {
	doc := `workloads:
  w: {classes: [{name: c, prompt_tokens: 1, output_tokens: 1}]}
targets:
  - name: t
    url: http://127.0.0.1:1/v1
    model: m
    workload: w
    arrival: {rate: 1}
    http_client_config:
      basic_auth: {username: u, password: p, passwrd: p}
      authorization: {credentials: c, credential: c}
`
	_, err := Load([]byte(doc), "x.yml")
	want := "x.yml:9:5: targets[0].http_client_config: at most one of basic_auth, oauth2 & authorization must be configured\n" +
		"x.yml:10:46: targets[0].http_client_config.basic_auth.passwrd: unknown field \"passwrd\"\n" +
		"x.yml:11:39: targets[0].http_client_config.authorization.credential: unknown field \"credential\""
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
}

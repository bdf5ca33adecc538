// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package alerts

import (
	"strings"
)

// Diagnosis (docs/design.md "Diagnosis"): each minute the daemon names the
// cause of a target's (or a replica's) latency with the figures that
// decided it, from the engine's own metrics (a target's server_metrics).
// The SLO burn-rate, regression and replica-outlier alerts join those
// series in their descriptions; docs/runbook.md has a section per cause.

// The diagnosis series of the metrics contract (docs/metrics.md). A
// target's own verdict has no replica label (replica=""); a discovery
// target whose replicas are read one by one has a verdict per replica too.
const (
	// DiagnosisMetric is 1 for the current cause, 0 for the others.
	DiagnosisMetric = "llmprobe_diagnosis"
	// DiagnosisEvidenceMetric holds the figures the verdict rests on,
	// labelled figure.
	DiagnosisEvidenceMetric = "llmprobe_diagnosis_evidence"
	// DiagnosisInfoMetric is 1 with the current cause and its kind
	// (queueing: batch, kv, gpu or "").
	DiagnosisInfoMetric = "llmprobe_diagnosis_info"
)

// The server view's series (docs/metrics.md): the engine's own figures per
// target (and replica), read from its server_metrics.
const (
	ServerUpMetric          = "llmprobe_server_up"
	ServerTTFTMetric        = "llmprobe_server_ttft_seconds"
	ServerTTFTErrorMetric   = "llmprobe_server_ttft_bucket_error_seconds"
	ServerITLMetric         = "llmprobe_server_itl_seconds"
	ServerQueueMetric       = "llmprobe_server_queue_seconds"
	ServerPrefillMetric     = "llmprobe_server_prefill_seconds"
	ServerDecodeMetric      = "llmprobe_server_decode_seconds"
	ServerRunningMetric     = "llmprobe_server_requests_running"
	ServerWaitingMetric     = "llmprobe_server_requests_waiting"
	ServerKVUsageMetric     = "llmprobe_server_kv_cache_usage_ratio"
	ServerPreemptionsMetric = "llmprobe_server_preemptions_per_request"
	ServerPrefixHitMetric   = "llmprobe_server_prefix_cache_hit_ratio"
	ServerGPUUtilMetric     = "llmprobe_server_gpu_utilization_ratio"
	ServerGapMetric         = "llmprobe_server_ttft_gap_seconds"
	ServerGapMeanMetric     = "llmprobe_server_ttft_gap_mean_seconds"
)

// DiagnosisCauses are the values of the cause label, in the order of the
// rules (docs/design.md "Diagnosis"); docs/runbook.md has a section
// "Cause: <cause>" for each.
var DiagnosisCauses = []string{"harness", "path", "queueing", "prefill", "decode", "kv_pressure", "prefix_cache", "deploy", "none", "unknown"}

// CauseRunbookAnchor is the anchor of a cause's section in docs/runbook.md.
func CauseRunbookAnchor(cause string) string { return "cause-" + cause }

// How an evidence figure's value is rendered in an annotation, by its
// unit (docs/metrics.md "The diagnosis"): seconds as a duration, ratios
// (0–1) as a percentage, requests and tokens whole, per request with two
// decimals.
const (
	figCount    = `printf "%.0f"`
	figPercent  = "humanizePercentage"
	figDuration = "humanizeDuration"
	figNumber   = `printf "%.2f"`
)

// figure is one evidence figure as an annotation states it: text with the
// value at %v, rendered by format.
type figure struct {
	name, text, format string
}

// evidenceFigures are the figures of llmprobe_diagnosis_evidence an
// annotation states (docs/runbook.md lists them per cause), by the
// daemon's names (diagnosis.EvidenceNames; a test in cmd/llmprobe holds
// them to it).
var evidenceFigures = map[string]figure{
	"waiting":                         {"waiting", "%v waiting", figCount},
	"running":                         {"running", "%v running", figCount},
	"running_history":                 {"running_history", "%v running before", figCount},
	"running_max":                     {"running_max", "at most %v running seen", figCount},
	"kv_usage":                        {"kv_usage", "KV cache %v", figPercent},
	"gpu_util":                        {"gpu_util", "GPU %v", figPercent},
	"queue_mean":                      {"queue_mean", "queue time %v", figDuration},
	"queue_share":                     {"queue_share", "%v of the server's TTFT", figPercent},
	"probe_ttft_p99":                  {"probe_ttft_p99", "probe p99 TTFT %v", figDuration},
	"probe_ttft_mean":                 {"probe_ttft_mean", "probe mean TTFT %v", figDuration},
	"probe_ttft_mean_history":         {"probe_ttft_mean_history", "%v before", figDuration},
	"probe_tpot_mean":                 {"probe_tpot_mean", "probe mean TPOT %v", figDuration},
	"probe_tpot_mean_history":         {"probe_tpot_mean_history", "%v before", figDuration},
	"server_ttft_mean":                {"server_ttft_mean", "server mean TTFT %v", figDuration},
	"gap_mean":                        {"gap_mean", "path gap %v (mean)", figDuration},
	"gap_mean_history":                {"gap_mean_history", "%v before", figDuration},
	"prefill_mean":                    {"prefill_mean", "server prefill %v", figDuration},
	"prefill_mean_history":            {"prefill_mean_history", "%v before", figDuration},
	"prompt_len_mean":                 {"prompt_len_mean", "server mean prompt %v tokens", figCount},
	"prompt_len_mean_history":         {"prompt_len_mean_history", "%v tokens before", figCount},
	"itl_mean":                        {"itl_mean", "server ITL %v", figDuration},
	"itl_mean_history":                {"itl_mean_history", "%v before", figDuration},
	"share":                           {"share", "%v of the added time", figPercent},
	"preemptions_per_request":         {"preemptions_per_request", "%v preemptions per request", figNumber},
	"preemptions_per_request_history": {"preemptions_per_request_history", "%v before", figNumber},
	"probe_hit_ratio":                 {"probe_hit_ratio", "prefix-cache hit ratio %v", figPercent},
	"probe_hit_ratio_history":         {"probe_hit_ratio_history", "%v before", figPercent},
	"intended_hit_ratio":              {"intended_hit_ratio", "intended %v", figPercent},
	"server_hit_ratio":                {"server_hit_ratio", "server's own %v", figPercent},
	"identity_change_age":             {"identity_change_age", "changed %v ago", figDuration},
}

// EvidenceFigures are the figure label values the annotations use.
func EvidenceFigures() []string {
	out := make([]string, 0, len(evidenceFigures))
	for name := range evidenceFigures {
		out = append(out, name)
	}
	return out
}

// evidenceItem is a figure a cause's sentence states, with what it says
// when the figure is absent ("" to say nothing).
type evidenceItem struct {
	figure, missing string
}

// causeSentence is how an annotation names a cause: what it means and the
// figures it states, in order.
type causeSentence struct {
	meaning  string
	evidence []evidenceItem
}

func items(figures ...string) []evidenceItem {
	out := make([]evidenceItem, len(figures))
	for i, f := range figures {
		out[i] = evidenceItem{figure: f}
	}
	return out
}

// causeSentences has an entry for every cause of DiagnosisCauses; the
// figures are those the daemon's rule for the cause gives (docs/design.md
// "Diagnosis").
var causeSentences = map[string]causeSentence{
	"harness": {meaning: "llmprobe itself could not keep its schedule, so its latency is not judged"},
	"path": {meaning: "the time goes between llmprobe and the engine (gateway, proxy, network, TLS)",
		evidence: items("gap_mean", "gap_mean_history", "probe_ttft_mean", "server_ttft_mean", "probe_ttft_p99")},
	"queueing": {meaning: "requests wait in the server's queue",
		evidence: items("waiting", "running", "running_max", "kv_usage", "gpu_util", "queue_mean", "queue_share", "server_ttft_mean", "probe_ttft_p99")},
	"prefill": {meaning: "TTFT grew with the server's prefill time (longer prompts or prefill skew)",
		evidence: []evidenceItem{{figure: "prefill_mean"}, {figure: "prefill_mean_history"}, {figure: "share"}, {figure: "prompt_len_mean"}, {figure: "prompt_len_mean_history"},
			{figure: "gpu_util", missing: "GPU unknown"}, {figure: "probe_ttft_mean"}, {figure: "probe_ttft_mean_history"}}},
	"decode": {meaning: "time per output token grew with the running batch",
		evidence: items("probe_tpot_mean", "probe_tpot_mean_history", "itl_mean", "itl_mean_history", "running", "running_history", "kv_usage")},
	"kv_pressure": {meaning: "the server preempts requests for want of KV cache",
		evidence: items("preemptions_per_request", "preemptions_per_request_history", "kv_usage")},
	"prefix_cache": {meaning: "fewer prompt tokens come from the prefix cache than intended (affinity or eviction lost)",
		evidence: items("probe_hit_ratio", "probe_hit_ratio_history", "intended_hit_ratio", "server_hit_ratio")},
	"deploy": {meaning: "the target changed (model, fingerprint, server or version) and its latency grew with it",
		evidence: items("identity_change_age", "probe_ttft_mean", "probe_ttft_mean_history", "probe_tpot_mean", "probe_tpot_mean_history")},
	"none":    {meaning: "the server view shows no cause", evidence: items("probe_ttft_p99", "server_ttft_mean", "gap_mean", "waiting", "kv_usage")},
	"unknown": {meaning: "not enough evidence to name a cause (no server view in most reads, or too few requests; the status page says why)"},
}

// queueingKinds phrase llmprobe_diagnosis_info's kind of a queueing verdict.
var queueingKinds = [][2]string{
	{"batch", "at its batch limit"},
	{"kv", "at its KV-cache limit"},
	{"gpu", "at its GPU's limit"},
}

// diagSeries renders the template expression that selects a diagnosis
// series of the alert's own target (and replica, when perReplica; else
// the target's own verdict, replica=""): printf "<metric>{<selector>,
// <fixed>,<name>=%q...,target=%q,...}<suffix>" <arg>... $labels.target ...
// args are label names with the template expression of their value.
func (c Config) diagSeries(metric string, fixed []string, args [][2]string, perReplica bool, suffix string) string {
	var sel, vals []string
	if s := c.selectorWith(""); s != "" {
		sel = append(sel, s)
	}
	sel = append(sel, fixed...)
	for _, a := range args {
		sel = append(sel, a[0]+"=%q")
		vals = append(vals, a[1])
	}
	labels := []string{"target"}
	if perReplica {
		labels = append(labels, "replica")
	} else {
		sel = append(sel, `replica=\"\"`)
	}
	for _, l := range c.grouped(labels...) {
		sel = append(sel, l+"=%q")
		vals = append(vals, "$labels."+l)
	}
	return `printf "` + metric + "{" + strings.Join(sel, ",") + "}" + suffix + `" ` + strings.Join(vals, " ")
}

// diagnosisText is the sentence an alert's description ends with: the
// current cause of the alert's target (perReplica: of its replica), its
// kind, the evidence figures the cause states and the runbook section:
//
//	Diagnosis: queueing at its KV-cache limit: requests wait in the
//	server's queue; evidence: 14 waiting, 64 running, KV cache 97%, ...
//	Runbook: <RunbookURL>#cause-queueing.
//
// It begins with a space and is empty when there is no diagnosis series
// (the target has no server_metrics, or the daemon has not judged yet):
// the description then reads as it did without it.
func (c Config) diagnosisText(perReplica bool) string {
	current := c.diagSeries(DiagnosisMetric, nil, nil, perReplica, " == 1")
	info := c.diagSeries(DiagnosisInfoMetric, nil, [][2]string{{"cause", "$cause"}}, perReplica, "")
	var b strings.Builder
	b.WriteString("{{ with " + current + " | query }}{{ $cause := (. | first).Labels.cause }}")
	b.WriteString(" Diagnosis: {{ $cause }}")
	b.WriteString("{{ if eq $cause \"queueing\" }}{{ with " + info + " | query }}{{ with (. | first).Labels.kind }}")
	for i, k := range queueingKinds {
		if i == 0 {
			b.WriteString("{{ if eq . \"" + k[0] + "\" }} " + k[1])
		} else {
			b.WriteString("{{ else if eq . \"" + k[0] + "\" }} " + k[1])
		}
	}
	b.WriteString("{{ else }} ({{ . }}){{ end }}{{ end }}{{ end }}{{ end }}")
	b.WriteString(`{{ $sep := "; evidence: " }}`)
	for i, cause := range DiagnosisCauses {
		s := causeSentences[cause]
		if i == 0 {
			b.WriteString("{{ if eq $cause \"" + cause + "\" }}")
		} else {
			b.WriteString("{{ else if eq $cause \"" + cause + "\" }}")
		}
		b.WriteString(": " + s.meaning)
		for _, it := range s.evidence {
			f := evidenceFigures[it.figure]
			q := c.diagSeries(DiagnosisEvidenceMetric, []string{`figure=\"` + f.name + `\"`}, nil, perReplica, " > -Inf")
			value := "{{ . | first | value | " + f.format + " }}"
			b.WriteString("{{ with " + q + " | query }}{{ $sep }}" + strings.Replace(f.text, "%v", value, 1) + `{{ $sep = ", " }}`)
			if it.missing != "" {
				b.WriteString("{{ else }}{{ $sep }}" + it.missing + `{{ $sep = ", " }}`)
			}
			b.WriteString("{{ end }}")
		}
	}
	b.WriteString("{{ end }}")
	b.WriteString(". Runbook: " + c.RunbookURL + "#" + CauseRunbookAnchor("") + "{{ $cause }}.{{ end }}")
	return b.String()
}

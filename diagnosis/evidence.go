// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package diagnosis

import (
	"fmt"
	"math"
	"strings"
)

// Cause is what a verdict names: one of [Causes], the values of the
// exported cause label.
type Cause string

// The causes, in the order the rules are tried (docs/design.md,
// "Diagnosis").
const (
	Harness     Cause = "harness"      // the probe itself was saturated: its figures cannot be judged
	Unknown     Cause = "unknown"      // not enough evidence: no server view, too few requests or too little history
	Deploy      Cause = "deploy"       // the identity changed and the probe's TTFT or TPOT grew against before it
	Queueing    Cause = "queueing"     // requests wait, and waiting is most of the server's TTFT
	Path        Cause = "path"         // the time outside the engine (gateway, proxy, network, TLS)
	Prefill     Cause = "prefill"      // TTFT grew with the engine's prefill time, its GPUs not busy
	Decode      Cause = "decode"       // TPOT grew with the running batch, the KV cache not full
	KVPressure  Cause = "kv_pressure"  // preemptions per request rose
	PrefixCache Cause = "prefix_cache" // the probe's prefix hit ratio fell below the intended one
	None        Cause = "none"         // no rule holds
)

// Causes is the fixed list of causes, the exported label's values.
var Causes = []Cause{Harness, Path, Queueing, Prefill, Decode, KVPressure, PrefixCache, Deploy, None, Unknown}

// Queueing kinds: what limit the queueing server is at.
const (
	KindKV    = "kv"    // its KV cache (usage ≥ KVFull)
	KindBatch = "batch" // its batch (running flat at the highest seen)
	KindGPU   = "gpu"   // its GPUs (utilization ≥ GPUFull)
)

// Kinds is the fixed list of queueing kinds ("" is queueing at no known
// limit).
var Kinds = []string{KindBatch, KindKV, KindGPU, ""}

// Evidence is one figure that decided a verdict.
type Evidence struct {
	Name  string // one of EvidenceNames
	Value float64
	Unit  string // "seconds", "ratio", "requests", "tokens", "reads" or "per_request"
}

// The evidence figures' names (the exported figure label's values).
// "_history" is the same figure over the history (for the deploy rule:
// over the state before the identity change); the recent figures are
// over the last RecentWindow.
const (
	EvProbeTTFTP99          = "probe_ttft_p99"           // seconds: the probe's TTFT p99 over the recent window (its kept samples)
	EvProbeTTFTMean         = "probe_ttft_mean"          // seconds: the probe's mean TTFT
	EvProbeTTFTMeanHistory  = "probe_ttft_mean_history"  // seconds
	EvProbeTPOTMean         = "probe_tpot_mean"          // seconds: the probe's mean TPOT
	EvProbeTPOTMeanHistory  = "probe_tpot_mean_history"  // seconds
	EvProbeRequests         = "probe_requests"           // requests: the probe's requests with a TTFT in the recent window
	EvTTFTAdded             = "ttft_added"               // seconds: recent minus history mean TTFT of the probe
	EvTPOTAdded             = "tpot_added"               // seconds: the same for TPOT
	EvShare                 = "share"                    // ratio: the named component's share of the added time
	EvReads                 = "reads"                    // reads: intervals in the recent window
	EvSaturatedReads        = "saturated_reads"          // reads: of them, with the harness saturated
	EvServerViewShare       = "server_view_share"        // ratio: of them, with a server view
	EvHistorySeconds        = "history_seconds"          // seconds: the history's length
	EvIdentityAge           = "identity_change_age"      // seconds: since the identity changed
	EvServerTTFTMean        = "server_ttft_mean"         // seconds: the engine's mean TTFT, from arrival
	EvServerTTFTMeanHistory = "server_ttft_mean_history" // seconds
	EvQueueMean             = "queue_mean"               // seconds: the engine's mean queue time
	EvQueueMeanHistory      = "queue_mean_history"       // seconds
	EvQueueShare            = "queue_share"              // ratio: mean queue time / the engine's mean TTFT
	EvPrefillMean           = "prefill_mean"             // seconds: the engine's mean prefill time
	EvPrefillMeanHistory    = "prefill_mean_history"     // seconds
	EvITLMean               = "itl_mean"                 // seconds: the engine's mean inter-token latency
	EvITLMeanHistory        = "itl_mean_history"         // seconds
	EvGapMean               = "gap_mean"                 // seconds: the probe's mean TTFT minus the engine's
	EvGapMeanHistory        = "gap_mean_history"         // seconds
	EvWaiting               = "waiting"                  // requests: waiting at the last read
	EvWaitingShare          = "waiting_share"            // ratio: reads of the last StateWindow with waiting > 0
	EvRunning               = "running"                  // requests: mean running over the window
	EvRunningHistory        = "running_history"          // requests
	EvRunningMax            = "running_max"              // requests: the highest running seen since start or the identity change
	EvKVUsage               = "kv_usage"                 // ratio: mean KV-cache usage
	EvGPUUtil               = "gpu_util"                 // ratio: mean GPU utilization
	EvPreemptionsPerRequest = "preemptions_per_request"  // ratio: preemptions per finished request
	EvPreemptionsHistory    = "preemptions_per_request_history"
	EvPromptLenMean         = "prompt_len_mean"          // tokens: the engine's mean prompt length
	EvPromptLenMeanHistory  = "prompt_len_mean_history"  // tokens
	EvProbePromptLenMean    = "probe_prompt_len_mean"    // tokens: the probe's mean prompt length
	EvProbeHitRatio         = "probe_hit_ratio"          // ratio: the probe's cached/prompt tokens
	EvProbeHitRatioHistory  = "probe_hit_ratio_history"  // ratio
	EvIntendedHitRatio      = "intended_hit_ratio"       // ratio: the probe's intended prefix reuse
	EvServerHitRatio        = "server_hit_ratio"         // ratio: the engine's prefix hits/queries
	EvServerHitRatioHistory = "server_hit_ratio_history" // ratio
)

// EvidenceNames is the fixed list of evidence names.
var EvidenceNames = []string{
	EvProbeTTFTP99, EvProbeTTFTMean, EvProbeTTFTMeanHistory, EvProbeTPOTMean, EvProbeTPOTMeanHistory,
	EvProbeRequests, EvTTFTAdded, EvTPOTAdded, EvShare, EvReads, EvSaturatedReads, EvServerViewShare,
	EvHistorySeconds, EvIdentityAge, EvServerTTFTMean, EvServerTTFTMeanHistory, EvQueueMean,
	EvQueueMeanHistory, EvQueueShare, EvPrefillMean, EvPrefillMeanHistory, EvITLMean, EvITLMeanHistory,
	EvGapMean, EvGapMeanHistory, EvWaiting, EvWaitingShare, EvRunning, EvRunningHistory, EvRunningMax,
	EvKVUsage, EvGPUUtil, EvPreemptionsPerRequest, EvPreemptionsHistory, EvPromptLenMean,
	EvPromptLenMeanHistory, EvProbePromptLenMean, EvProbeHitRatio, EvProbeHitRatioHistory,
	EvIntendedHitRatio, EvServerHitRatio, EvServerHitRatioHistory,
}

// evidenceUnit is each name's unit.
var evidenceUnit = func() map[string]string {
	m := map[string]string{}
	for _, n := range EvidenceNames {
		switch {
		case n == EvProbeRequests || n == EvWaiting || strings.HasPrefix(n, "running"):
			m[n] = "requests"
		case n == EvReads || n == EvSaturatedReads:
			m[n] = "reads"
		case strings.Contains(n, "prompt_len"):
			m[n] = "tokens"
		case strings.HasPrefix(n, "preemptions"):
			m[n] = "per_request"
		case strings.Contains(n, "ratio") || strings.Contains(n, "share") || n == EvKVUsage || n == EvGPUUtil:
			m[n] = "ratio"
		default:
			m[n] = "seconds"
		}
	}
	return m
}()

// builder collects a verdict's evidence, and formats figures for its
// sentence from that evidence only.
type builder struct{ ev []Evidence }

// add appends a finite figure (NaN and ±Inf are no evidence).
func (b *builder) add(name string, v float64) {
	if !finite(v) {
		return
	}
	u, ok := evidenceUnit[name]
	if !ok {
		panic("diagnosis: evidence " + name + " is not in EvidenceNames")
	}
	for i := range b.ev {
		if b.ev[i].Name == name {
			b.ev[i].Value = v
			return
		}
	}
	b.ev = append(b.ev, Evidence{name, v, u})
}

// has reports whether the evidence holds name.
func (b *builder) has(name string) bool {
	for _, e := range b.ev {
		if e.Name == name {
			return true
		}
	}
	return false
}

// f formats the evidence figure name for a sentence ("?" when absent,
// which the tests refuse).
func (b *builder) f(name string) string {
	for _, e := range b.ev {
		if e.Name == name {
			return formatFigure(e.Value, e.Unit)
		}
	}
	return "?"
}

// formatFigure writes a figure as a sentence shows it: seconds as "2.3 s"
// or "850 ms", ratios as "97%", counts whole.
func formatFigure(v float64, unit string) string {
	switch unit {
	case "seconds":
		a := math.Abs(v)
		switch {
		case a == 0:
			return "0 s"
		case a >= 10:
			return fmt.Sprintf("%.0f s", v)
		case a >= 1:
			return fmt.Sprintf("%.1f s", v)
		case a >= 0.01:
			return fmt.Sprintf("%.0f ms", v*1e3)
		default:
			return fmt.Sprintf("%.1f ms", v*1e3)
		}
	case "ratio":
		if a := math.Abs(v); a < 0.1 && a > 0 {
			return fmt.Sprintf("%.1f%%", v*100)
		}
		return fmt.Sprintf("%.0f%%", v*100)
	case "tokens":
		return fmt.Sprintf("%.0f tokens", v)
	case "per_request":
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/llmprobe/llmprobe/slo"
)

func TestLoadGoodConfig(t *testing.T) {
	cfg, err := LoadFile("testdata/good.yml")
	if err != nil {
		t.Fatalf("LoadFile: %v", err)
	}
	if got := time.Duration(cfg.Global.Warmup); got != time.Minute {
		t.Errorf("warmup = %v, want 1m", got)
	}
	// Defaults apply to what the file leaves out.
	if got := time.Duration(cfg.Global.LateAfter); got != time.Second {
		t.Errorf("late_after default = %v, want 1s", got)
	}
	if len(cfg.Targets) != 2 || len(cfg.Workloads) != 2 {
		t.Fatalf("got %d targets, %d workloads", len(cfg.Targets), len(cfg.Workloads))
	}
	prod := cfg.Target("llama-prod")
	if prod == nil || prod.Arrival.Process != ProcessGamma || prod.Arrival.Rate != 0.5 || prod.MaxInflight != 32 {
		t.Fatalf("llama-prod = %+v", prod)
	}
	if prod.ExtraBody["ignore_eos"] != true {
		t.Errorf("extra_body = %v", prod.ExtraBody)
	}
	// Relative secret files resolve against the config file's directory.
	if got, want := prod.HTTPClientConfig.Authorization.CredentialsFile, filepath.Join("testdata", "token.txt"); got != want {
		t.Errorf("credentials_file = %q, want %q", got, want)
	}
	local := cfg.Target("local")
	if local.API != APICompletions || local.Arrival.Process != ProcessConstant || local.Arrival.Burstiness != 1 {
		t.Errorf("local = %+v", local)
	}
	if local.MaxInflight != DefaultMaxInflight {
		t.Errorf("max_inflight default = %d", local.MaxInflight)
	}
	if got := local.Timeout(cfg.Global); got != 10*time.Second {
		t.Errorf("timeout override = %v", got)
	}
	if got := prod.Timeout(cfg.Global); got != 120*time.Second {
		t.Errorf("timeout default = %v", got)
	}

	chat := cfg.Workloads["prod-mix"].Classes[0]
	if chat.Sampling.Temperature != 0.7 || chat.Sampling.TopP != 0.95 {
		t.Errorf("sampling = %+v", chat.Sampling)
	}
	if chat.Prefix == nil || chat.Prefix.Groups != 4 || chat.Prefix.Tokens != 512 || chat.Prefix.Probability != 0.8 {
		t.Errorf("prefix = %+v", chat.Prefix)
	}
	agent := cfg.Workloads["prod-mix"].Classes[1]
	if agent.Sampling != DefaultSampling {
		t.Errorf("default sampling = %+v, want %+v", agent.Sampling, DefaultSampling)
	}
	for _, w := range cfg.Workloads {
		for _, c := range w.Classes {
			for _, d := range []*Dist{&c.PromptTokens, &c.OutputTokens} {
				if d.Sampler() == nil {
					t.Errorf("class %s: sampler not built", c.Name)
				}
			}
		}
	}
	// Clamping is applied: the lognormal's bounds hold at extreme quantiles.
	s := chat.PromptTokens.Sampler()
	if lo, hi := s.Quantile(0), s.Quantile(1); lo < 4 || hi > 8192 {
		t.Errorf("clamped quantiles = [%v, %v], want within [4, 8192]", lo, hi)
	}
	// The samples file (relative to the config) was read.
	sampled := cfg.Workloads["tiny"].Classes[1].PromptTokens.Sampler()
	if lo, hi := sampled.Quantile(0), sampled.Quantile(1); lo != 64 || hi != 1500 {
		t.Errorf("samples file quantiles = [%v, %v], want [64, 1500]", lo, hi)
	}
	if fixed := cfg.Workloads["tiny"].Classes[0].PromptTokens; fixed.Kind != DistFixed || *fixed.Value != 16 {
		t.Errorf("bare number = %+v, want fixed 16", fixed)
	}
	if wf := prod.WorkloadFrom; wf == nil || wf.Prometheus.URL != "http://prometheus:9090" || time.Duration(wf.Prometheus.Refresh) != 5*time.Minute || time.Duration(wf.Prometheus.Range) != time.Hour {
		t.Errorf("workload_from = %+v", wf)
	}
	if local.PromptFormat != PromptFormatIDs || local.Tokenize != TokenizeOff || prod.Tokenize != TokenizeAuto || prod.PromptFormat != PromptFormatText {
		t.Errorf("prompt_format/tokenize = %s/%s and %s/%s", local.PromptFormat, local.Tokenize, prod.PromptFormat, prod.Tokenize)
	}

	// Multi-turn classes: count and think time (durations, fixed or distributed).
	agentTurns := agent.Turns
	if agentTurns == nil || agentTurns.Count.Kind != DistUniform || agentTurns.ThinkTime.Sampler().Quantile(0.5) != 5 {
		t.Fatalf("agent turns = %+v", agentTurns)
	}
	coding := cfg.Workloads["prod-mix"].Classes[2].Turns
	if med := coding.ThinkTime.Sampler().Quantile(0.5); math.Abs(med-3) > 1e-9 {
		t.Errorf("think_time median = %vs, want 3s", med)
	}
	if hi := coding.ThinkTime.Sampler().Quantile(1); hi != 300 {
		t.Errorf("think_time max = %vs, want 300s", hi)
	}
	if !coding.UserTokens.IsSet() || coding.UserTokens.Sampler() == nil {
		t.Errorf("user_tokens not built")
	}

	// SLOs: the target's, refined by a class's; none where neither sets one.
	day := model.Duration(24 * time.Hour)
	if got := cfg.SLO(prod, chat); got == nil || *got != (slo.Objective{Ratio: 0.995, TTFT: model.Duration(500 * time.Millisecond), TPOT: model.Duration(60 * time.Millisecond), Window: 30 * day}) {
		t.Errorf("chat SLO = %+v", got)
	}
	if got := cfg.SLO(prod, agent); got == nil || got.TTFT != model.Duration(2*time.Second) || got.TPOT != model.Duration(60*time.Millisecond) || got.Ratio != 0.995 {
		t.Errorf("agent SLO = %+v, want the class's TTFT over the target's", got)
	}
	if got := cfg.SLO(local, cfg.Workloads["tiny"].Classes[0]); got != nil {
		t.Errorf("local has no SLO, got %+v", got)
	}
}

func TestSecretsHiddenWhenMarshalled(t *testing.T) {
	cfg, err := LoadFile("testdata/good.yml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "s3cr3t-password") {
		t.Fatalf("marshalled config leaks the password:\n%s", out)
	}
	if !strings.Contains(string(out), "<secret>") {
		t.Errorf("marshalled config does not mark the secret:\n%s", out)
	}
}

func TestLoadBadConfigs(t *testing.T) {
	tests := map[string]string{
		"unknown-field.bad.yml":    `testdata/unknown-field.bad.yml:12:24: targets[0].arrival.rat: unknown field "rat"`,
		"bad-rate.bad.yml":         `testdata/bad-rate.bad.yml:13:7: targets[0].arrival.rate: must be a positive number of requests per second, got -1`,
		"unknown-workload.bad.yml": `testdata/unknown-workload.bad.yml:11:5: targets[0].workload: unknown workload "nope" (defined: w)`,
		"lognormal-order.bad.yml":  `testdata/lognormal-order.bad.yml:5:9: workloads.w.classes[0].prompt_tokens: lognormal: p99 (100) must be greater than median (120)`,
		"duplicate-target.bad.yml": `testdata/duplicate-target.bad.yml:13:5: targets[1].name: duplicate target name "t" (also targets[0])`,
		"bad-duration.bad.yml":     `testdata/bad-duration.bad.yml:3:3: global.late_after: not a valid duration "soon" (a number and a unit, e.g. 500ms, 30s, 5m, 1h)`,
		"type-error.bad.yml":       `testdata/type-error.bad.yml:12:15: targets[0].arrival.rate: cannot use string "fast" as a number`,
		"two-auths.bad.yml":        `testdata/two-auths.bad.yml:13:5: targets[0].http_client_config: at most one of basic_auth, oauth2, bearer_token & bearer_token_file must be configured`,
		"missing-model.bad.yml":    `testdata/missing-model.bad.yml:8:5: targets[0].model: required`,
		"syntax.bad.yml":           `testdata/syntax.bad.yml:5:7: did not find expected '-' indicator (check this line's indentation: a key lines up with the keys of its mapping, spaces only)`,
		"dist-param.bad.yml":       `testdata/dist-param.bad.yml:5:9: workloads.w.classes[0].prompt_tokens: "median" does not apply to dist uniform (allowed: min, max)`,
		"empty.bad.yml":            `testdata/empty.bad.yml: empty configuration`,
		"extra-body.bad.yml":       `testdata/extra-body.bad.yml:13:18: targets[0].extra_body.stream: "stream" is set by llmprobe and cannot be overridden`,
		"url-credentials.bad.yml":  `testdata/url-credentials.bad.yml:9:5: targets[0].url: credentials in the URL are not allowed; use http_client_config.basic_auth`,
		"model-chars.bad.yml": strings.Join([]string{
			`testdata/model-chars.bad.yml:7:9: workloads.w.classes[0].model: must be a model or adapter name of at most 256 printable characters (no control or bidirectional formatting character)`,
			`testdata/model-chars.bad.yml:11:5: targets[0].model: must be a model or adapter name of at most 256 printable characters (no control or bidirectional formatting character)`,
		}, "\n"),
		"think-time.bad.yml": `testdata/think-time.bad.yml:7:27: workloads.w.classes[0].turns.think_time: not a valid duration "soon" (a number and a unit, e.g. 500ms, 30s, 5m, 1h; or a mapping with "dist")`,
		"slo.bad.yml": strings.Join([]string{
			`testdata/slo.bad.yml:7:25: workloads.w.classes[0].slo.p99: unknown field "p99"`,
			`testdata/slo.bad.yml:8:62: workloads.w.classes[1].slo.objective: must be a share of requests in (0, 1), e.g. 0.99, got 1.5`,
			`testdata/slo.bad.yml:18:7: targets[0].slo.tpot: not a valid duration "soon" (a number and a unit, e.g. 500ms, 30s, 5m, 1h)`,
			`testdata/slo.bad.yml:19:7: targets[0].slo.window: must be from 3d (the longest burn-rate window) to 92d, got 1h`,
		}, "\n"),
		"regression.bad.yml": strings.Join([]string{
			`testdata/regression.bad.yml:7:35: workloads.w.classes[0].regression.min_effect.median: must be a relative rise in (0, 10], e.g. 0.2 for 20%, got -0.1`,
			`testdata/regression.bad.yml:7:60: workloads.w.classes[0].regression.min_samplez: unknown field "min_samplez" (did you mean "min_samples"?)`,
			`testdata/regression.bad.yml:11:35: workloads.w.classes[1].regression.min_effect.errors: must be a rise of the error ratio in (0, 1), e.g. 0.02 for two points, got 1.5`,
			`testdata/regression.bad.yml:11:49: workloads.w.classes[1].regression.min_samples: must be in [5, 2048] (half the detector's window), got 2`,
			`testdata/regression.bad.yml:20:7: targets[0].regression.accept_after: must be at least 1h (a regression must be seen before it is accepted), got 10m`,
			`testdata/regression.bad.yml:21:20: targets[0].regression.min_effect.tail: unknown field "tail"`,
			`testdata/regression.bad.yml:22:7: targets[0].regression.min_span: must be from 1s to 1h, got 2h`,
		}, "\n"),
		"turns.bad.yml": strings.Join([]string{
			`testdata/turns.bad.yml:8:11: workloads.w.classes[0].turns.count: must be at least 1 turn, got 0`,
			`testdata/turns.bad.yml:9:11: workloads.w.classes[0].turns.think_time: can draw negative durations; set min: 0s`,
			`testdata/turns.bad.yml:20:5: targets[0].prompt_format: "token_ids" needs api: completions or embeddings (messages are text)`,
			`testdata/turns.bad.yml:20:5: targets[0].prompt_format: "token_ids" cannot carry multi-turn history (workload "w" has turns); use text`,
		}, "\n"),
		"workload-from.bad.yml": strings.Join([]string{
			`testdata/workload-from.bad.yml:12:7: targets[0].workload_from.prometheus: set both prompt_metric and completion_metric, or neither`,
			`testdata/workload-from.bad.yml:12:20: targets[0].workload_from.prometheus.url: must be an http(s) URL with a host`,
			`testdata/workload-from.bad.yml:12:44: targets[0].workload_from.prometheus.refresh: must be at least 1s, got 0s`,
		}, "\n"),
		"images.bad.yml": strings.Join([]string{
			`testdata/images.bad.yml:7:28: workloads.w.classes[0].images.width: must be at least 16 pixels, got 8`,
			`testdata/images.bad.yml:7:38: workloads.w.classes[0].images.format: must be png or jpeg, got "gif"`,
			`testdata/images.bad.yml:11:5: targets[0].api: completions cannot send images (class "vision" of workload "w" has them); use api: chat, responses or messages`,
		}, "\n"),
		"tools.bad.yml": strings.Join([]string{
			`testdata/tools.bad.yml:7:9: workloads.w.classes[0].reasoning_effort: must be one of none, minimal, low, medium, high, got "extreme"`,
			`testdata/tools.bad.yml:11:13: workloads.w.classes[0].tools[1].type: must be "function", got retrieval`,
			`testdata/tools.bad.yml:12:13: workloads.w.classes[0].tools[1].function.name: required`,
			`testdata/tools.bad.yml:13:13: workloads.w.classes[0].tools[1].strict: unknown key (a tool has type and function)`,
			`testdata/tools.bad.yml:14:50: workloads.w.classes[0].tool_choice.function.name: "lookup" is not one of the class's tools`,
			`testdata/tools.bad.yml:15:22: workloads.w.classes[0].extra_body.stream: "stream" is set by llmprobe and cannot be overridden`,
			`testdata/tools.bad.yml:15:37: workloads.w.classes[0].extra_body.tools: is also set as the class's tools: set it once`,
			`testdata/tools.bad.yml:16:59: workloads.w.classes[1].tool_choice: "required" needs tools`,
			`testdata/tools.bad.yml:20:5: targets[0].api: completions cannot send tools (class "agent" of workload "w" has them); use api: chat, responses or messages`,
		}, "\n"),
		"multiple.bad.yml": strings.Join([]string{
			`testdata/multiple.bad.yml:5:9: workloads.w.classes[0].weight: must be a positive number, got 0`,
			`testdata/multiple.bad.yml:6:9: workloads.w.classes[0].prompt_tokens: must be at least 1 tokens, got 0`,
			`testdata/multiple.bad.yml:7:9: workloads.w.classes[0].output_tokens: empirical: quantiles must increase: p0.9=50 < p0.5=100`,
			`testdata/multiple.bad.yml:8:20: workloads.w.classes[0].sampling.temperature: must be in [0, 2], got 3`,
			`testdata/multiple.bad.yml:11:5: targets[0].url: scheme must be http or https, got "ftp"`,
			`testdata/multiple.bad.yml:12:5: targets[0].api: must be one of chat, completions, responses, messages, embeddings, got "rerank"`,
			`testdata/multiple.bad.yml:15:15: targets[0].arrival.process: must be one of poisson, gamma, constant, trace_shape; got "weibull"`,
			`testdata/multiple.bad.yml:16:5: targets[0].max_inflight: must be at least 1, got 0`,
			`testdata/multiple.bad.yml:21:42: targets[1].arrival.burstiness: applies only to process gamma (poisson has a fixed shape), got 0.5`,
		}, "\n"),
	}
	for file, want := range tests {
		t.Run(file, func(t *testing.T) {
			_, err := LoadFile(filepath.Join("testdata", file))
			if err == nil {
				t.Fatal("expected an error")
			}
			if got := err.Error(); got != want {
				t.Errorf("error mismatch\ngot:  %s\nwant: %s", got, want)
			}
			for _, secret := range []string{"hunter2-secret", "hunter3-secret", "pa55word"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error leaks a secret: %s", err)
				}
			}
		})
	}
}

// Every bad fixture is covered by TestLoadBadConfigs.
func TestEveryBadFixtureIsTested(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.bad.yml")
	if len(files) < 10 {
		t.Fatalf("found only %d bad fixtures", len(files))
	}
	for _, f := range files {
		if _, err := LoadFile(f); err == nil {
			t.Errorf("%s: loaded without error", f)
		}
	}
}

func TestErrorsArePositioned(t *testing.T) {
	_, err := LoadFile("testdata/multiple.bad.yml")
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("error is %T, want Errors", err)
	}
	for _, e := range es {
		if e.File == "" || e.Line == 0 || e.Path == "" {
			t.Errorf("unpositioned error: %+v", e)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := LoadFile(filepath.Join(t.TempDir(), "nope.yml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want not-exist", err)
	}
}

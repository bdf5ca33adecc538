// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLoadConfigFile(t *testing.T) {
	cfg, err := LoadConfigFile("testdata/good.yml")
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.Models = []string{"llama-sim", "llama-sim-alias"}
	want.MaxModelLen = 4096
	want.DefaultMaxTokens = 128
	want.MaxNumSeqs = 32
	want.MaxNumBatchedTokens = 1024
	want.PrefillBase = 5 * time.Millisecond
	want.PrefillPerToken = 20 * time.Microsecond
	want.DecodeBase = 15 * time.Millisecond
	want.DecodePerSeq = 500 * time.Microsecond
	want.BlockSize = 32
	want.NumKVBlocks = 4096
	want.EOSProbability = 0.001
	want.ReasoningFraction = 0.25
	want.ReasoningField = "reasoning"
	want.ToolCallProbability = 0.3
	want.Seed = 42
	want.MaxRequestBodyBytes = 1 << 20
	want.Faults.HTTP500.Probability = 0.01
	want.Faults.HTTP503.Probability = 0.005
	want.Faults.HTTP429 = FaultSpec{Probability: 0.01, RetryAfter: 2 * time.Second}
	want.Faults.Reset = FaultSpec{Probability: 0.01, AfterTokens: 7}
	want.Faults.StallFirst = FaultSpec{Probability: 0.002, Duration: time.Second}
	want.Faults.Stall = FaultSpec{Probability: 0.003, AfterTokens: 3, Duration: defaultFaultDuration} // duration defaulted
	want.Faults.Malformed = FaultSpec{Probability: 0.001, AfterTokens: defaultFaultAfterTokens}
	want.Faults.NoDone = FaultSpec{Probability: 0.001, AfterTokens: 2}
	want.Faults.Empty.Probability = 0.002
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("loaded\n%+v\nwant\n%+v", cfg, want)
	}
	if cfg.effectiveReasoning(100) != 25 {
		t.Errorf("reasoning_fraction 0.25 of 100 = %d", cfg.effectiveReasoning(100))
	}

	empty, err := LoadConfigFile("testdata/empty.yml")
	if err != nil || !reflect.DeepEqual(empty, DefaultConfig()) {
		t.Errorf("empty file: %v, %+v", err, empty)
	}
	if _, err := LoadConfigFile("testdata/missing.yml"); err == nil || !strings.Contains(err.Error(), "missing.yml") {
		t.Errorf("missing file: %v", err)
	}
}

func TestLoadBadConfigs(t *testing.T) {
	tests := map[string]string{
		"bad-unknown-key.yml":           "line 2: field max_num_seq not found",
		"bad-unknown-fault.yml":         `line 3: faults: unknown fault kind "explode"`,
		"bad-fault-param.yml":           `line 2: faults.http_500: unknown parameter "after_tokens" (valid: probability)`,
		"bad-probability.yml":           "line 4: faults.reset.probability: must be between 0 and 1, got 1.5",
		"bad-probability-sum.yml":       "line 1: faults: probabilities sum to 1.2",
		"bad-duration-int.yml":          "cannot unmarshal !!int `12` into time.Duration",
		"bad-max-num-seqs.yml":          "line 1: max_num_seqs: must be between 1 and 65536, got 0",
		"bad-duplicate-model.yml":       `line 1: models[1]: duplicate model name "a"`,
		"bad-control-model.yml":         `line 1: models[1]: model name "a\nb" contains a control character`,
		"bad-kv-capacity.yml":           "line 2: num_kv_blocks: 100 blocks of 16 tokens cannot hold one max_model_len (100000) sequence",
		"bad-stall-duration.yml":        "line 2: faults.stall_first.duration: must be between 0 and 1h0m0s, got 2h0m0s",
		"bad-models-type.yml":           "cannot unmarshal !!str `sim` into []string",
		"bad-reasoning-field.yml":       `line 2: reasoning_field: must be "reasoning_content" or "reasoning", got "thinking"`,
		"bad-tool-call-probability.yml": "line 3: tool_call_probability: must be between 0 and 1, got 1.5",
	}
	for file, want := range tests {
		_, err := LoadConfigFile(filepath.Join("testdata", file))
		if err == nil {
			t.Errorf("%s: no error, want %q", file, want)
			continue
		}
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), file) {
			t.Errorf("%s: error %q, want it to name the file and contain %q", file, err, want)
		}
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := DefaultConfig()
	c.Models = nil
	c.MaxNumSeqs = 0
	c.BlockSize = 0
	c.DecodeBase = -time.Second
	c.EOSProbability = 2
	c.ReasoningField = "think"
	c.ToolCallProbability = -0.1
	err := c.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"models:", "max_num_seqs:", "block_size:", "decode_base:", "eos_probability:", "reasoning_field:", "tool_call_probability:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if _, err := New(c, nil); err == nil {
		t.Error("New accepted an invalid config")
	}
	if d := DefaultConfig(); d.Validate() != nil {
		t.Errorf("default config invalid: %v", d.Validate())
	}
	// An empty reasoning_field (a Config built without DefaultConfig)
	// means reasoning_content.
	d := DefaultConfig()
	d.ReasoningField = ""
	if err := d.Validate(); err != nil {
		t.Errorf("empty reasoning_field rejected: %v", err)
	}
}

func TestPlannedReasoning(t *testing.T) {
	c := DefaultConfig()
	c.ReasoningTokens = 8
	for _, tt := range []struct {
		maxTokens int
		effort    float64
		toolCall  bool
		want      int
	}{
		{100, 1, false, 8},
		{100, 0, false, 0},
		{100, 0.25, false, 2},
		{100, 0.5, false, 4},
		{100, 2, false, 16},
		{10, 2, false, 10},
		{10, 2, true, 9}, // a tool call keeps at least one token
		{1, 1, true, 0},
		{5, 1, false, 5},
	} {
		if got := c.plannedReasoning(tt.maxTokens, tt.effort, tt.toolCall); got != tt.want {
			t.Errorf("plannedReasoning(%d, %v, %v) = %d, want %d", tt.maxTokens, tt.effort, tt.toolCall, got, tt.want)
		}
	}
	c.ReasoningTokens, c.ReasoningFraction = 0, 0.25
	if got := c.plannedReasoning(100, 2, false); got != 50 {
		t.Errorf("reasoning_fraction 0.25 of 100 at high effort = %d, want 50", got)
	}
}

// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestBuiltInMemory: a configuration built of New, NewTarget and NewClass
// is the one a file setting the same values loads to (the same defaults
// everywhere), its distributions are built by Validate, and Validate
// finds what Load finds, each error naming its field's path.
func TestBuiltInMemory(t *testing.T) {
	const file = `
workloads: {w: {classes: [{name: c, prompt_tokens: 4, output_tokens: {dist: uniform, min: 1, max: 3}}]}}
targets: [{name: t, url: "http://127.0.0.1:1/v1", model: m, workload: w, arrival: {rate: 2}}]
`
	loaded, err := Load([]byte(file), "")
	if err != nil {
		t.Fatal(err)
	}
	one, lo, hi := 4.0, 1.0, 3.0
	cls := NewClass()
	cls.Name = "c"
	cls.PromptTokens = Dist{Kind: DistFixed, Value: &one}
	cls.OutputTokens = Dist{Kind: DistUniform, Min: &lo, Max: &hi}
	tg := NewTarget()
	tg.Name, tg.URL, tg.Model, tg.Workload, tg.Arrival.Rate = "t", "http://127.0.0.1:1/v1", "m", "w", 2
	built := New()
	built.Workloads = map[string]*Workload{"w": {Classes: []*Class{cls}}}
	built.Targets = []*Target{tg}
	if cls.OutputTokens.Sampler() != nil {
		t.Fatal("a sampler before Validate")
	}
	if err := built.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if cls.PromptTokens.Sampler() == nil || cls.OutputTokens.Sampler() == nil {
		t.Error("Validate built no sampler")
	}
	if !reflect.DeepEqual(built.Global, loaded.Global) || !reflect.DeepEqual(built.Tracing, loaded.Tracing) {
		t.Errorf("global or tracing differ:\n%+v\n%+v", built.Global, loaded.Global)
	}
	if !reflect.DeepEqual(*built.Targets[0], *loaded.Targets[0]) {
		t.Errorf("the targets differ:\nbuilt  %+v\nloaded %+v", *built.Targets[0], *loaded.Targets[0])
	}
	lc := loaded.Workloads["w"].Classes[0]
	if cls.Weight != lc.Weight || cls.Sampling != lc.Sampling || cls.Name != lc.Name {
		t.Errorf("the classes differ:\nbuilt  %+v\nloaded %+v", *cls, *lc)
	}

	tg.URL, tg.API, tg.Arrival.Rate = "ftp://h", "grpc", 0
	zero := 0.0
	cls.PromptTokens.Value = &zero
	err = built.Validate()
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Validate of a bad configuration: %v", err)
	}
	want := map[string]string{
		"targets[0].url":                       `scheme must be http or https, got "ftp"`,
		"targets[0].api":                       "must be one of chat, completions, responses, messages, embeddings",
		"targets[0].arrival.rate":              "must be a positive number",
		"workloads.w.classes[0].prompt_tokens": "must be at least 1 tokens, got 0",
	}
	for _, e := range errs {
		if e.File != "" || e.Line != 0 {
			t.Errorf("%v: a file or line", e)
		}
		if w, ok := want[e.Path]; ok && strings.Contains(e.Msg, w) {
			delete(want, e.Path)
		}
	}
	for path, msg := range want {
		t.Errorf("no error %s: %s in:\n%v", path, msg, err)
	}
}

// TestParseDist: a distribution of a flag is read as a file's, and its
// errors are worded as a file's (no Go type).
func TestParseDist(t *testing.T) {
	d, err := ParseDist("12")
	if err != nil || d.Kind != DistFixed || *d.Value != 12 {
		t.Errorf("12: %+v, %v", d, err)
	}
	d, err = ParseDist("{dist: lognormal, median: 512, p99: 4096}")
	if err != nil || d.Kind != DistLogNormal || *d.Median != 512 || *d.P99 != 4096 {
		t.Errorf("lognormal: %+v, %v", d, err)
	}
	for spec, want := range map[string]string{
		"many":                            `cannot use string "many" as a mapping`,
		"{dist: lognormal, medain: 1}":    `unknown field "medain"`,
		"{dist: uniform, min: x, max: 2}": `cannot use string "x" as a number`,
		"":                                "empty",
	} {
		if _, err := ParseDist(spec); err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "config.") {
			t.Errorf("%q: %v, want %q", spec, err, want)
		}
	}
}

// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
)

// LoRA adapters (Config.Adapters) are served as vLLM serves them: a
// request naming an adapter is scheduled by the one engine with the
// requests of its base model, and its share of every engine step it takes
// part in is multiplied by the adapter's factors (a LoRA's extra matmuls).
// /v1/models lists each adapter with "parent" its base, responses echo the
// adapter's name, and vllm:lora_requests_info shows the adapters of the
// running and waiting requests.

// AdapterConfig is one LoRA adapter.
type AdapterConfig struct {
	// Name is what requests give as model; it must differ from every
	// model and other adapter name.
	Name string `yaml:"name"`
	// Base is the served model the adapter applies to (one of Models;
	// empty: the first).
	Base string `yaml:"base"`
	// PrefillFactor and DecodeFactor multiply the adapter's requests'
	// share of a step's prefill and decode time (0: 1).
	PrefillFactor float64 `yaml:"prefill_factor"`
	DecodeFactor  float64 `yaml:"decode_factor"`
}

// maxAdapters bounds Config.Adapters.
const maxAdapters = 256

// maxAdapterFactor bounds an adapter's time factors.
const maxAdapterFactor = 1000

func (c *Config) validateAdapters() []error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, &fieldError{path: path, msg: fmt.Sprintf(format, args...)})
	}
	if len(c.Adapters) > maxAdapters {
		bad("adapters", "at most %d adapters, got %d", maxAdapters, len(c.Adapters))
		return errs
	}
	seen := make(map[string]bool, len(c.Adapters))
	for i, a := range c.Adapters {
		p := fmt.Sprintf("adapters[%d]", i)
		switch {
		case strings.TrimSpace(a.Name) == "":
			bad(p+".name", "adapter name must not be empty")
		case len(a.Name) > 256:
			bad(p+".name", "adapter name longer than 256 bytes")
		case strings.ContainsFunc(a.Name, unicode.IsControl):
			bad(p+".name", "adapter name %q contains a control character", a.Name)
		case slices.Contains(c.Models, a.Name):
			bad(p+".name", "adapter name %q is also a model name", a.Name)
		case seen[a.Name]:
			bad(p+".name", "duplicate adapter name %q", a.Name)
		}
		seen[a.Name] = true
		if a.Base != "" && !slices.Contains(c.Models, a.Base) {
			bad(p+".base", "base %q is not one of models", truncate(a.Base, maxHeaderEcho))
		}
		for _, f := range []struct {
			key string
			v   float64
		}{{"prefill_factor", a.PrefillFactor}, {"decode_factor", a.DecodeFactor}} {
			if !(f.v >= 0 && f.v <= maxAdapterFactor) {
				bad(p+"."+f.key, "must be between 0 (default 1) and %d, got %v", maxAdapterFactor, f.v)
			}
		}
	}
	return errs
}

// adapter is a served adapter at run time.
type adapter struct {
	name          string
	base          int // index in Config.Models
	prefillFactor float64
	decodeFactor  float64

	// Requests of this adapter waiting and running in the engine (for
	// vllm:lora_requests_info).
	waiting atomic.Int64
	running atomic.Int64
}

func newAdapters(cfg *Config) []*adapter {
	out := make([]*adapter, 0, len(cfg.Adapters))
	for _, a := range cfg.Adapters {
		ad := &adapter{name: a.Name, prefillFactor: a.PrefillFactor, decodeFactor: a.DecodeFactor}
		if a.Base != "" {
			ad.base = slices.Index(cfg.Models, a.Base)
		}
		if ad.prefillFactor == 0 {
			ad.prefillFactor = 1
		}
		if ad.decodeFactor == 0 {
			ad.decodeFactor = 1
		}
		out = append(out, ad)
	}
	return out
}

// adapterOf returns the adapter a resolved model index names, nil for a
// model.
func (s *Server) adapterOf(idx int) *adapter {
	if idx < len(s.cfg.Models) {
		return nil
	}
	return s.adapters[idx-len(s.cfg.Models)]
}

// modelName returns the served name of a resolved model index (a model or
// an adapter).
func (s *Server) modelName(idx int) string {
	return s.modelNames[idx]
}

// adapterStepDuration is the step duration when adapter requests take
// part: each sequence's per-sequence decode share and per-token prefill
// share are multiplied by its factors, and the fixed costs by the largest
// factor in the step (the adapter kernels run for the whole batch).
func (e *engine) adapterStepDuration() time.Duration {
	maxD, maxP := 0.0, 0.0
	sumD, sumP := 0.0, 0.0
	for _, s := range e.running {
		df, pf := 1.0, 1.0
		if a := s.adapter; a != nil {
			df, pf = a.decodeFactor, a.prefillFactor
		}
		switch {
		case s.prefillLeft == 0:
			sumD += df
			maxD = max(maxD, df)
		case s.chunk > 0:
			sumD += df
			maxD = max(maxD, df)
			sumP += float64(s.chunk) * pf
			maxP = max(maxP, pf)
		}
	}
	d := float64(e.cfg.DecodeBase)*maxD + float64(e.cfg.DecodePerSeq)*sumD
	if maxP > 0 {
		d += float64(e.cfg.PrefillBase)*maxP + float64(e.cfg.PrefillPerToken)*sumP
	}
	return time.Duration(math.Round(d))
}

// loraCollector exports vLLM's vllm:lora_requests_info: one series whose
// labels list the adapters of the running and waiting requests (comma
// separated, sorted) and max_lora (the number of configured adapters),
// and whose value is the scrape time, as vLLM's set_to_current_time.
type loraCollector struct {
	adapters []*adapter
	desc     *prometheus.Desc
}

func newLoraCollector(adapters []*adapter) *loraCollector {
	return &loraCollector{
		adapters: adapters,
		desc: prometheus.NewDesc("vllm:lora_requests_info", "Running stats on lora requests.",
			[]string{"max_lora", "waiting_lora_adapters", "running_lora_adapters"}, nil),
	}
}

func (c *loraCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *loraCollector) Collect(ch chan<- prometheus.Metric) {
	var running, waiting []string
	for _, a := range c.adapters {
		if a.running.Load() > 0 {
			running = append(running, a.name)
		}
		if a.waiting.Load() > 0 {
			waiting = append(waiting, a.name)
		}
	}
	slices.Sort(running)
	slices.Sort(waiting)
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(time.Now().UnixNano())/1e9,
		strconv.Itoa(len(c.adapters)), strings.Join(waiting, ","), strings.Join(running, ","))
}

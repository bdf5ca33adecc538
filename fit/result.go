// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package fit

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/llmprobe/llmprobe/config"
)

// SourceKind says where a Result's data came from.
type SourceKind int

// Source kinds.
const (
	SourceAccessLog SourceKind = iota
	SourcePrometheus
	SourceTrace
)

// Grouping limits: at most MaxClasses classes come out of a --by split;
// the smaller groups, and any group of fewer than MinClassCount requests,
// are merged into a class named "other".
const (
	MaxClasses    = 20
	MinClassCount = 20
)

// DefaultClassName names the single class of a fit without a split.
const DefaultClassName = "default"

// Result is a fitted workload: the lengths of all requests, and of each
// class when they were split by a field or label.
type Result struct {
	// Source describes the data: "access log FILE" or "Prometheus URL".
	Source     string
	SourceKind SourceKind
	// Start and End bound the requests' time (zero when unknown).
	Start, End time.Time
	// Log describes how an access log was read (nil for Prometheus).
	Log *LogStats
	// Queries are the PromQL expressions that returned the data (nil for
	// an access log).
	Queries []string
	// Model is the most frequent model name in the data ("" if none).
	Model string
	// By is the field or label the classes were split by ("" for one
	// class).
	By string
	// Prompt and Output are the lengths over all requests.
	Prompt, Output *Lengths
	// Classes hold one class per group (a single DefaultClassName class
	// without a split), largest first, "other" last.
	Classes []*Class
	// Warnings are caveats about the data worth telling the user.
	Warnings []string
	// Trace is the joint picture of a trace (nil for other sources).
	Trace *Joint
}

// Class is one class of a fitted workload.
type Class struct {
	// Name is a valid class name derived from Value.
	Name string
	// Value is the field or label value of the group ("" for the default
	// class; "other" for merged small groups).
	Value string
	// Weight is the class' share of the requests.
	Weight float64
	// Prompt and Output are the class' lengths.
	Prompt, Output *Lengths
	// Prefix is the shared prefix the data implies (a trace's hash_ids),
	// nil when it says none.
	Prefix *config.Prefix
}

// Class returns the class with the given name, or nil.
func (r *Result) Class(name string) *Class {
	for _, c := range r.Classes {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Workload returns the fitted classes as a configuration workload: the
// form WriteWorkload writes, with the default sampling settings. It is
// not validated; validating it (as loading a file does) builds the same
// samplers as Lengths.Sampler.
func (r *Result) Workload() *config.Workload {
	w := &config.Workload{}
	for _, c := range r.Classes {
		w.Classes = append(w.Classes, &config.Class{
			Name:         c.Name,
			Weight:       c.Weight,
			PromptTokens: c.Prompt.Dist(),
			OutputTokens: c.Output.Dist(),
			Prefix:       c.Prefix,
			Sampling:     config.DefaultSampling,
		})
	}
	return w
}

// Count is the number of requests the result was fitted from.
func (r *Result) Count() float64 { return r.Prompt.Count }

// fitRecords fits the overall lengths and the classes of an access log.
func (r *Result) fitRecords(recs []record) error {
	prompt := make([]float64, len(recs))
	output := make([]float64, len(recs))
	for i, rec := range recs {
		prompt[i], output[i] = rec.prompt, rec.completion
	}
	var err error
	if r.Prompt, err = FitSamples(prompt); err != nil {
		return fmt.Errorf("prompt tokens: %w", err)
	}
	if r.Output, err = FitSamples(output); err != nil {
		return fmt.Errorf("completion tokens: %w", err)
	}
	if r.By == "" {
		r.Classes = []*Class{{Name: DefaultClassName, Weight: 1, Prompt: r.Prompt, Output: r.Output}}
		return nil
	}
	groups := map[string][]record{}
	for _, rec := range recs {
		groups[rec.group] = append(groups[rec.group], rec)
	}
	sizes := make(map[string]float64, len(groups))
	for k, g := range groups {
		sizes[k] = float64(len(g))
	}
	keep, other := splitGroups(sizes)
	var merged []record
	for _, k := range other {
		merged = append(merged, groups[k]...)
	}
	for _, k := range keep {
		c, err := classFromRecords(k, groups[k], len(recs))
		if err != nil {
			return err
		}
		r.Classes = append(r.Classes, c)
	}
	if len(merged) > 0 {
		c, err := classFromRecords(otherClass, merged, len(recs))
		if err != nil {
			return err
		}
		r.Classes = append(r.Classes, c)
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d small %s group(s) (%d requests) merged into class %q", len(other), r.By, len(merged), otherClass))
	}
	nameClasses(r.Classes)
	return nil
}

const otherClass = "other"

func classFromRecords(value string, recs []record, total int) (*Class, error) {
	prompt := make([]float64, len(recs))
	output := make([]float64, len(recs))
	for i, rec := range recs {
		prompt[i], output[i] = rec.prompt, rec.completion
	}
	c := &Class{Value: value, Weight: float64(len(recs)) / float64(total)}
	var err error
	if c.Prompt, err = FitSamples(prompt); err != nil {
		return nil, fmt.Errorf("class %q: prompt tokens: %w", value, err)
	}
	if c.Output, err = FitSamples(output); err != nil {
		return nil, fmt.Errorf("class %q: completion tokens: %w", value, err)
	}
	return c, nil
}

// splitGroups orders group keys by size (largest first, then by key) and
// decides which stay classes of their own: at most MaxClasses-1 when some
// are merged, and none smaller than MinClassCount. A lone small group is
// kept rather than renamed "other".
func splitGroups(sizes map[string]float64) (keep, other []string) {
	keys := make([]string, 0, len(sizes))
	for k := range sizes {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(sizes[b], sizes[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	for i, k := range keys {
		if (len(keys) > MaxClasses && i >= MaxClasses-1) || (sizes[k] < MinClassCount && i > 0) {
			other = append(other, k)
		} else {
			keep = append(keep, k)
		}
	}
	if len(other) == 1 {
		// Merging one group into "other" only hides its name.
		keep, other = append(keep, other[0]), nil
	}
	return keep, other
}

// classNameRE is what a class name may look like (config's rule).
var (
	classNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,62}$`)
	badNameChar = regexp.MustCompile(`[^A-Za-z0-9_.:/-]+`)
)

// className derives a valid class name from a group value.
func className(v string) string {
	s := badNameChar.ReplaceAllString(v, "-")
	s = strings.TrimLeft(s, "_.:/-")
	if len(s) > 63 {
		s = s[:63]
	}
	if s == "" {
		s = "class"
	}
	return s
}

// nameClasses gives every class a valid, unique name.
func nameClasses(classes []*Class) {
	used := map[string]bool{}
	for _, c := range classes {
		base := className(c.Value)
		name := base
		for i := 2; used[name] || !classNameRE.MatchString(name); i++ {
			suffix := "-" + strconv.Itoa(i)
			name = base[:min(len(base), 63-len(suffix))] + suffix
		}
		used[name] = true
		c.Name = name
	}
}

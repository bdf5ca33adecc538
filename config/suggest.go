// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// suggestKey returns the key of struct type t (a mapping's schema) that
// unknown key is most likely a typo of (see Suggest), "" when none is
// close. Keys the mapping m already has are not suggested.
func suggestKey(t reflect.Type, key string, m *yaml.Node) string {
	t = yamlForm(t)
	if t == nil || t.Kind() != reflect.Struct || isLeaf(t) {
		return ""
	}
	have := map[string]bool{}
	if m != nil {
		for i := 0; i+1 < len(m.Content); i += 2 {
			have[m.Content[i].Value] = true
		}
	}
	var names []string
	for name := range structFields(t).named {
		if !have[name] {
			names = append(names, name)
		}
	}
	return Suggest(key, names)
}

// Suggest returns the candidate that key is most likely a typo of, ""
// when none is close: the smallest edit distance (insertions, deletions,
// substitutions and transpositions of neighbours, case ignored), at most
// 1 for keys of up to 4 characters, 2 up to 8, 3 beyond; ties go to the
// first in sorted order. Unknown configuration keys use it; so does
// `llmprobe mixin` for its file's.
func Suggest(key string, candidates []string) string {
	if key == "" {
		return ""
	}
	limit := 3
	switch n := utf8.RuneCountInString(key); {
	case n <= 4:
		limit = 1
	case n <= 8:
		limit = 2
	}
	names := slices.Sorted(slices.Values(candidates))
	best, bestDist := "", limit+1
	for _, name := range names {
		if d := editDistance(strings.ToLower(key), strings.ToLower(name)); d < bestDist && name != key {
			best, bestDist = name, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b
// (Levenshtein with transpositions of adjacent characters), by runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// Three rows: the one before the previous, the previous, the current.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

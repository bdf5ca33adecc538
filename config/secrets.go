// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Secrets in errors.
//
// A configuration's errors reach the log, the answer to /-/reload and the
// status page, where nothing scrubs the secrets of a file that failed to
// load (the scrubber knows the running configuration's). So an error
// about anything under a key that can hold a secret (secretRoot) never
// quotes what the file says there, whatever its shape: a string where a
// mapping belongs (authorization: "Bearer sk-..."), a key where a value
// belongs (authorization: {Bearer sk-...}), a list or a mapping. Its path
// stops before a key the schema does not know, its message names no
// unknown key and quotes no value.

// httpSecretKeys are the keys of an http_client_config (and of its
// oauth2 block) under which a secret may be written.
var httpSecretKeys = map[string]bool{
	"authorization":        true,
	"basic_auth":           true,
	"bearer_token":         true,
	"oauth2":               true,
	"http_headers":         true,
	"proxy_connect_header": true,
	"proxy_url":            true, // its userinfo
}

// secretRoot returns the beginning of path that names a key under which
// a secret may be written, and whether there is one.
func secretRoot(path string) (string, bool) {
	inHTTP := false
	prev := ""
	depth := 0
	for i := 0; i < len(path); {
		if path[i] == '[' { // a list index
			j := strings.IndexByte(path[i:], ']')
			if j < 0 {
				return "", false
			}
			i += j + 1
			continue
		}
		if path[i] == '.' {
			i++
			continue
		}
		j := strings.IndexAny(path[i:], ".[")
		if j < 0 {
			j = len(path) - i
		}
		seg, end := path[i:i+j], i+j
		switch {
		case seg == "http_client_config":
			inHTTP = true
		case inHTTP && httpSecretKeys[seg],
			inHTTP && prev == "tls_config" && seg == "key",
			depth == 1 && prev == "tracing" && seg == "headers":
			return path[:end], true
		}
		prev = seg
		depth++
		i = end
	}
	return "", false
}

// underSecret reports whether a node of the index is under a secret key.
func underSecret(n *indexed) bool {
	_, ok := secretRoot(n.path)
	return ok
}

// lineHasSecret reports whether any node on line is under a secret key.
func (idx nodeIndex) lineHasSecret(line int) bool {
	return slices.ContainsFunc(idx.lines[line], func(n indexed) bool { return underSecret(&n) })
}

// safeFields are the fields under a secret key that hold no secret: what
// their errors say (a file that does not exist) is shown as it is.
var safeFields = map[string]bool{
	"type": true, "username": true, "client_id": true, "token_url": true, "scopes": true,
	"grant_type": true, "signature_algorithm": true, "iss": true, "audience": true,
	"client_certificate_key_id": true, "files": true, "ca": true, "cert": true,
	"server_name": true, "insecure_skip_verify": true, "min_version": true, "max_version": true,
	"proxy_from_environment": true, "no_proxy": true,
}

// safeLeaf reports whether the value at path (under a secret key) holds
// no secret: a safe field, a file name, or an item of a safe list.
func safeLeaf(path string) bool {
	for strings.HasSuffix(path, "]") { // an item: its list's field
		i := strings.LastIndexByte(path, '[')
		if i < 0 {
			return false
		}
		path = path[:i]
	}
	field := path[strings.LastIndexByte(path, '.')+1:]
	return safeFields[field] || strings.HasSuffix(field, "_file")
}

// shownKeyRE is a key under a secret key that the path may show: a field
// the schema knows or a header name, never a value written as a key.
var shownKeyRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// typoRE is an unknown key shaped like a field name (a misspelt
// "passwrd"): lower-case letters and underscores, which no credential
// made of random characters is. Any other unknown key is not shown.
var typoRE = regexp.MustCompile(`^[a-z][a-z_]{0,31}$`)

// quotedTextRE is a double-quoted string in a message.
var quotedTextRE = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// hideSecrets rewrites the errors about values under secret keys so that
// they quote none of them.
func hideSecrets(errs Errors, idx nodeIndex) {
	var forms map[string][]string // by secret root, built once
	for _, e := range errs {
		root, ok := secretRoot(e.Path)
		if !ok {
			continue
		}
		path, hidden := idx.shownPath(root, e.Path)
		e.Path = path
		if hidden && strings.HasPrefix(e.Msg, "unknown field ") {
			e.Msg = "unknown field (its name is not shown: it may be a secret)"
			continue
		}
		if !hidden && safeLeaf(e.Path) {
			continue // about a file name or a type, not a secret
		}
		if forms == nil {
			forms = idx.secretForms()
		}
		e.Msg = scrubValues(e.Msg, forms[root])
	}
}

// shownPath cuts path (under root) before its first key that is not a
// known field or a header name, reporting whether it cut.
func (idx nodeIndex) shownPath(root, path string) (string, bool) {
	shown := root
	for shown != path {
		rest := path[len(shown):]
		var next string
		if rest[0] == '[' {
			j := strings.IndexByte(rest, ']')
			if j < 0 {
				return shown, true
			}
			next = shown + rest[:j+1]
		} else {
			// The next key of the index that continues shown (a key may
			// hold a dot: the shortest that the index has).
			next = ""
			for j := 2; j <= len(rest); j++ {
				if j < len(rest) && rest[j] != '.' && rest[j] != '[' {
					continue
				}
				if k, ok := idx.keyAt(shown + rest[:j]); ok {
					if (k.unknown && !typoRE.MatchString(k.value)) || !shownKeyRE.MatchString(k.value) {
						return shown, true
					}
					next = shown + rest[:j]
					break
				}
			}
			if next == "" {
				return shown, true
			}
		}
		shown = next
	}
	return shown, false
}

// keyAt returns the mapping key whose entry is at path.
func (idx nodeIndex) keyAt(path string) (indexed, bool) {
	pos, ok := idx.pos[path]
	if !ok {
		return indexed{}, false
	}
	for _, n := range idx.lines[pos.line] {
		if n.key && n.path == path && n.col == pos.col {
			return n, true
		}
	}
	return indexed{}, false
}

// secretForms collects, in one pass over the index, every scalar the
// file writes under each secret key (values, and keys that are not known
// fields or misspelt ones), in the forms messages quote them, longest
// first.
func (idx nodeIndex) secretForms() map[string][]string {
	forms := map[string][]string{}
	for _, nodes := range idx.lines {
		for _, n := range nodes {
			if n.kind != yaml.ScalarNode || len(n.value) < 4 || // too short to be a secret, and would shred the message
				(n.key && (!n.unknown || typoRE.MatchString(n.value)) && shownKeyRE.MatchString(n.value)) ||
				(!n.key && safeLeaf(n.path)) {
				continue
			}
			root, ok := secretRoot(n.path)
			if !ok {
				continue
			}
			v := n.value
			forms[root] = append(forms[root], v, strings.Trim(quoteValue(v), `"`), strings.Trim(strconv.Quote(v), `"`))
			if r := []rune(v); len(r) > 10 {
				forms[root] = append(forms[root], string(r[:7])) // yaml's own rendering of a long value
			}
		}
	}
	for _, f := range forms {
		slices.SortFunc(f, func(a, b string) int { return len(b) - len(a) })
	}
	return forms
}

// scrubValues removes every form from msg, and any quoted text that is
// not a plain word.
func scrubValues(msg string, forms []string) string {
	for _, f := range forms {
		msg = strings.ReplaceAll(msg, f, "[secret]")
	}
	return quotedTextRE.ReplaceAllStringFunc(msg, func(q string) string {
		if s, err := strconv.Unquote(q); err == nil && shownKeyRE.MatchString(s) {
			return q
		}
		return `"[secret]"`
	})
}

// kindWithArticle is yamlKind for a sentence: "a string", "a mapping".
func kindWithArticle(tag string) string {
	switch k := yamlKind(tag); k {
	case "a list", "a mapping", "null":
		return k
	case "value":
		return "a value"
	default:
		return "a " + k
	}
}

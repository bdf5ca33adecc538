// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package discovery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fsnotify/fsnotify"
	"go.yaml.in/yaml/v3"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/bounded"
	"github.com/llmprobe/llmprobe/internal/scrub"
)

// Bounds of file discovery.
const (
	// MaxFileSDSize bounds the files of one refresh, together: a glob
	// may match many files.
	MaxFileSDSize = 4 << 20
	// MaxFileSDFiles bounds the files of one refresh.
	MaxFileSDFiles = 4096
	// MaxLabelValue bounds a label value of a file_sd group.
	MaxLabelValue = 256
	// fileDebounce is the most a change waits before it is read: the
	// events of one write (truncate, write; an editor's temporary file
	// and rename) are read together, and writes that never pause are
	// read at this pace.
	fileDebounce = 100 * time.Millisecond
	// fileRefreshTimeout bounds one refresh, far above what reading
	// and parsing MaxFileSDSize takes (at most a few seconds for YAML;
	// BenchmarkFileSDRefreshAtBound).
	fileRefreshTimeout = 30 * time.Second
)

// LabelReplica in a file_sd group names its replicas (else pod, else the
// address).
const LabelReplica = "replica"

// fileDiscoverer reads Prometheus file_sd files: on every change event
// in their directories and every refresh interval.
type fileDiscoverer struct {
	patterns []string
	interval time.Duration
	timeout  time.Duration // of one refresh
	log      *slog.Logger
	// links are the names in the watched directories that the files
	// last matched are symbolic links through (a ConfigMap volume's
	// ..data): their events are the files' changes too.
	links map[string]bool
}

func newFile(c *config.FileSD, opts Options) (*fileDiscoverer, error) {
	if c == nil || len(c.Files) == 0 {
		return nil, errors.New("file discovery: no files")
	}
	for _, p := range c.Files {
		if _, err := filepath.Match(p, ""); err != nil {
			return nil, fmt.Errorf("file discovery: %q: %w", p, err)
		}
	}
	interval := time.Duration(c.RefreshInterval)
	if interval <= 0 {
		interval = config.DefaultFileSDRefresh
	}
	return &fileDiscoverer{patterns: append([]string(nil), c.Files...), interval: interval, timeout: fileRefreshTimeout, log: opts.Logger}, nil
}

func (f *fileDiscoverer) Mechanism() string { return config.DiscoveryMechanismFile }

func (f *fileDiscoverer) Run(ctx context.Context, ch chan<- Update) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		// Without a watcher the periodic re-read still runs.
		f.log.Warn("file discovery cannot watch for changes; re-reading every refresh interval only", "err", err)
	} else {
		defer w.Close()
	}
	watched := map[string]bool{}
	watch := func() {
		if w == nil {
			return
		}
		for _, p := range f.patterns {
			dir := filepath.Dir(p)
			if watched[dir] {
				continue
			}
			// The directory, not the file: editors and Kubernetes'
			// ConfigMap volumes replace files by rename. A directory
			// that does not exist yet is tried again at the next refresh.
			if err := w.Add(dir); err != nil {
				f.log.Debug("file discovery cannot watch a directory yet", "dir", dir, "err", err)
				continue
			}
			watched[dir] = true
		}
	}
	var events <-chan fsnotify.Event
	var watchErrs <-chan error
	if w != nil {
		events, watchErrs = w.Events, w.Errors
	}
	tick := time.NewTicker(f.interval)
	defer tick.Stop()
	// The first event of a change arms the debounce, which later events
	// leave alone: a refresh comes at most fileDebounce after the first
	// event, however fast the writes go on.
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()
	armed := false
	arm := func() {
		if !armed {
			debounce.Reset(fileDebounce)
			armed = true
		}
	}
	for {
		watch()
		debounce.Stop()
		armed = false
		if !send(ctx, ch, f.refresh(ctx)) {
			return
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				break wait
			case <-debounce.C:
				break wait
			case ev, ok := <-events:
				if !ok {
					events = nil
					continue
				}
				// Every change but a chmod of a file the patterns match,
				// or of a link it is read through.
				if ev.Op&^fsnotify.Chmod != 0 && f.matters(ev.Name) {
					arm()
				}
			case err, ok := <-watchErrs:
				if !ok {
					watchErrs = nil
					continue
				}
				f.log.Warn("file discovery watch error; re-reading", "err", err)
				arm()
			}
		}
	}
}

// matters says whether an event on name (a path in a watched directory)
// may change what the files say: name matches a pattern, or the files
// last read are symbolic links through it.
func (f *fileDiscoverer) matters(name string) bool {
	name = filepath.Clean(name)
	if f.links[name] {
		return true
	}
	dir, base := filepath.Split(name)
	dir = filepath.Clean(dir)
	for _, p := range f.patterns {
		if filepath.Dir(p) != dir {
			continue
		}
		if ok, _ := filepath.Match(filepath.Base(p), base); ok {
			return true
		}
	}
	return false
}

// linkThrough is the name in file's directory that file, a symbolic link,
// points through (pool.json -> ..data/pool.json: ..data), or "".
func linkThrough(file string) string {
	target, err := os.Readlink(file)
	if err != nil {
		return "" // not a link
	}
	dir := filepath.Dir(file)
	if !filepath.IsAbs(target) {
		target = filepath.Join(dir, target)
	}
	rel, err := filepath.Rel(dir, target)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "" // outside the directory: no event of it comes here
	}
	first, _, _ := strings.Cut(rel, string(filepath.Separator))
	return filepath.Join(dir, first)
}

// refresh reads every file. A pattern with a glob stands for the files
// it matches now (a deleted file's replicas are gone, as in Prometheus);
// a file named without a glob must exist. Any file that cannot be read
// or parsed fails the refresh; so do more than MaxFileSDFiles files or
// MaxFileSDSize bytes in all (refused before any is read), a file that
// is not a regular one (a FIFO would block the read), and a refresh that
// takes longer than its time bound.
func (f *fileDiscoverer) refresh(ctx context.Context) Update {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	u, err := f.read(ctx)
	if err != nil {
		err = mechanismError(f.Mechanism(), err)
		f.log.Warn("replica discovery failed; keeping the last set", "mechanism", f.Mechanism(), "err", err)
		return failed(err)
	}
	return u
}

// matched is a file to read, and whether a glob found it.
type matched struct {
	file string
	glob bool
	size int64
}

func (f *fileDiscoverer) read(ctx context.Context) (Update, error) {
	var (
		names []matched
		files []matched
		errs  []error
		total int64
	)
	seen := map[string]bool{}
	for _, p := range f.patterns {
		found := []string{p}
		glob := hasMeta(filepath.Base(p))
		if glob {
			var err error
			if found, err = filepath.Glob(p); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p, err))
				continue
			}
			slices.Sort(found)
		}
		for _, file := range found {
			if !seen[file] {
				seen[file] = true
				names = append(names, matched{file: file, glob: glob})
			}
		}
	}
	if len(names) > MaxFileSDFiles {
		return Update{}, fmt.Errorf("%s: %d files, more than %d", strings.Join(f.patterns, ", "), len(names), MaxFileSDFiles)
	}
	links := map[string]bool{}
	for _, m := range names {
		if ctx.Err() != nil {
			return Update{}, f.late(ctx, "")
		}
		if l := linkThrough(m.file); l != "" {
			links[l] = true
		}
		fi, err := bounded.Stat(m.file, MaxFileSDSize)
		if m.glob && errors.Is(err, fs.ErrNotExist) {
			continue // deleted since the glob
		}
		if err != nil {
			errs = append(errs, err) // names the file
			continue
		}
		m.size = fi.Size()
		files = append(files, m)
		total += m.size
	}
	f.links = links
	if len(errs) > 0 {
		return Update{}, errors.Join(errs...)
	}
	if total > MaxFileSDSize {
		return Update{}, f.tooLarge(len(files), total)
	}
	var out []Replica
	total = 0
	for _, m := range files {
		data, err := bounded.ReadFile(ctx, m.file, MaxFileSDSize)
		switch {
		case m.glob && errors.Is(err, fs.ErrNotExist):
			continue // deleted since the glob
		case ctx.Err() != nil:
			return Update{}, f.late(ctx, m.file)
		case err != nil:
			errs = append(errs, err) // names the file
			continue
		}
		if total += int64(len(data)); total > MaxFileSDSize {
			return Update{}, f.tooLarge(len(files), total) // grown since
		}
		rs, err := parseFileSD(m.file, data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, rs...)
	}
	if ctx.Err() != nil {
		return Update{}, f.late(ctx, "")
	}
	if len(errs) > 0 {
		return Update{}, errors.Join(errs...)
	}
	return Update{Replicas: normalize(out)}, nil
}

// tooLarge is the error of files that hold more than MaxFileSDSize
// bytes together.
func (f *fileDiscoverer) tooLarge(files int, total int64) error {
	return fmt.Errorf("%s: the %d files matched hold %.1f MiB, more than %s together", strings.Join(f.patterns, ", "), files, float64(total)/(1<<20), bounded.Size(MaxFileSDSize))
}

// late is the error of a refresh that passed its time bound (at file, if
// it was reading one), or of one whose discoverer stops.
func (f *fileDiscoverer) late(ctx context.Context, file string) error {
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ctx.Err()
	}
	if file != "" {
		return fmt.Errorf("%s: not read within %v, the time bound of a refresh", file, f.timeout)
	}
	return fmt.Errorf("%s: not read within %v, the time bound of a refresh", strings.Join(f.patterns, ", "), f.timeout)
}

func hasMeta(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// fileSDGroup is one group of a file_sd file.
type fileSDGroup struct {
	Targets []string          `json:"targets" yaml:"targets"`
	Labels  map[string]string `json:"labels,omitempty" yaml:"labels,omitempty"`
}

// parseFileSD parses the replicas of one file_sd file read whole (JSON
// for .json, else YAML). Errors name the file and, where the decoder
// says, the line.
func parseFileSD(file string, data []byte) ([]Replica, error) {
	var groups []fileSDGroup
	switch strings.ToLower(filepath.Ext(file)) {
	case ".json":
		// encoding/json would replace invalid UTF-8 silently.
		if off := invalidUTF8(data); off >= 0 {
			return nil, fmt.Errorf("%s: line %d: not valid UTF-8", file, 1+bytes.Count(data[:off], []byte("\n")))
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&groups); err != nil {
			return nil, fmt.Errorf("%s: %s", file, jsonError(data, err))
		}
		if dec.More() {
			return nil, fmt.Errorf("%s: data after the list of groups", file)
		}
	default:
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		// An empty file is no groups.
		if err := dec.Decode(&groups); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: %s", file, yamlError(err))
		}
	}
	var out []Replica
	for i, g := range groups {
		labels, name, err := groupLabels(g.Labels)
		if err != nil {
			return nil, fmt.Errorf("%s: group %d: %w", file, i, err)
		}
		for j, addr := range g.Targets {
			if err := checkAddress(addr); err != nil {
				return nil, fmt.Errorf("%s: group %d: targets[%d]: %w", file, i, j, err)
			}
			r := Replica{Name: addr, Address: addr, Labels: maps.Clone(labels)}
			if name != "" {
				r.Name = name
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// goTypeRE is the Go type yaml names in a message.
var goTypeRE = regexp.MustCompile(` (?:in|into) (?:type )?\S*discovery\.fileSDGroup| into \[\]discovery\.fileSDGroup| into map\[string\]string`)

// yamlError is a YAML decoding error (which gives its lines) in the file
// author's words.
func yamlError(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.ReplaceAll(msg, "unmarshal errors:\n  ", "")
	return goTypeRE.ReplaceAllString(msg, "")
}

// groupLabels keeps the join labels of a group (pod, namespace, node)
// and the replica name it gives (replica, else pod), checking the values
// it uses; other labels are ignored.
func groupLabels(in map[string]string) (map[string]string, string, error) {
	var out map[string]string
	for _, k := range []string{LabelReplica, LabelPod, LabelNamespace, LabelNode} {
		v, ok := in[k]
		if !ok || v == "" {
			continue
		}
		switch {
		case len(v) > MaxLabelValue:
			return nil, "", fmt.Errorf("label %s: value longer than %d bytes", k, MaxLabelValue)
		case !utf8.ValidString(v):
			return nil, "", fmt.Errorf("label %s: value is not valid UTF-8", k)
		}
		if k == LabelReplica {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	name := in[LabelReplica]
	if name == "" {
		name = in[LabelPod]
	}
	return out, name, nil
}

// checkAddress checks a host:port.
func checkAddress(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if host == "" || strings.ContainsAny(host, " /") || strings.ContainsFunc(host, scrub.Unsafe) || !utf8.ValidString(host) {
		return fmt.Errorf("%q: invalid host", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: invalid port", addr)
	}
	return nil
}

// invalidUTF8 is the offset of the first invalid UTF-8 in data, or -1.
func invalidUTF8(data []byte) int {
	for off := 0; off < len(data); {
		r, n := utf8.DecodeRune(data[off:])
		if r == utf8.RuneError && n <= 1 {
			return off
		}
		off += n
	}
	return -1
}

// jsonError says where in data a JSON decoding error is.
func jsonError(data []byte, err error) string {
	var (
		se *json.SyntaxError
		te *json.UnmarshalTypeError
	)
	off := int64(-1)
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	if off < 0 || off > int64(len(data)) {
		return err.Error()
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	return fmt.Sprintf("line %d: %v", line, err)
}

package config

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"
)

// LoadFile reads, decodes and validates a configuration file. On error it
// returns Errors (or a read error) naming the file, line and field of
// every problem.
func LoadFile(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Load(data, path)
}

// Load decodes and validates a configuration held in memory; file names it
// in errors and anchors relative paths (credentials_file, samples files).
func Load(data []byte, file string) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, translate(err, file, nodeIndex{})
	}
	if len(root.Content) == 0 {
		return nil, Errors{{File: file, Msg: "empty configuration"}}
	}
	idx := indexNodes(&root)

	cfg := &Config{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return nil, translate(err, file, idx)
	}
	cfg.Source = file

	dir := ""
	if file != "" {
		dir = filepath.Dir(file)
	}
	for _, t := range cfg.Targets {
		if t != nil {
			t.HTTPClientConfig.SetDirectory(dir)
			if t.WorkloadFrom != nil && t.WorkloadFrom.Prometheus != nil {
				t.WorkloadFrom.Prometheus.HTTPClientConfig.SetDirectory(dir)
			}
		}
	}
	for _, w := range cfg.Workloads {
		if w == nil {
			continue
		}
		for _, c := range w.Classes {
			if c != nil {
				for _, d := range c.dists() {
					d.dir = dir
				}
			}
		}
	}

	var fe fieldErrors
	cfg.validate(&fe)
	if len(fe.errs) > 0 {
		for _, e := range fe.errs {
			pos := idx.locate(e.Path)
			e.File, e.Line, e.Column = file, pos.line, pos.col
		}
		return nil, Errors(fe.errs)
	}
	return cfg, nil
}

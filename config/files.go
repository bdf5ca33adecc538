// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/llmprobe/llmprobe/dist"
	"github.com/llmprobe/llmprobe/internal/bounded"
)

// checkHTTPFiles checks that every file an http_client_config names exists
// and is a readable regular file. prometheus/common reads them at each
// request (so that rotated secrets apply), which would make a missing
// token a failure of every request, reported as a misleading
// connect_error. Contents are never read, let alone shown.
//
// The files are taken from the document as written (root), not from the
// decoded configuration: an http_client_config that fails to decode or
// to validate (two auths, an unknown TLS version) is left at its default
// there, and its files must still be reported, with its other problems,
// in the same run. Relative paths are resolved against dir, as
// prometheus/common's SetDirectory does.
func checkHTTPFiles(errs *fieldErrors, root *yaml.Node, dir string) {
	var doc struct {
		Targets []struct {
			HTTP         httpFiles `yaml:"http_client_config"`
			WorkloadFrom struct {
				Prometheus struct {
					HTTP httpFiles `yaml:"http_client_config"`
				} `yaml:"prometheus"`
			} `yaml:"workload_from"`
			ServerMetrics struct {
				HTTP httpFiles `yaml:"http_client_config"`
			} `yaml:"server_metrics"`
		} `yaml:"targets"`
		Global struct {
			Diagnosis struct {
				Prometheus struct {
					HTTP httpFiles `yaml:"http_client_config"`
				} `yaml:"prometheus"`
			} `yaml:"diagnosis"`
		} `yaml:"global"`
	}
	// Not strict, and what does not decode (a list where a file name
	// belongs) is left empty: those problems are the decoding's to report.
	_ = root.Decode(&doc)
	for i, t := range doc.Targets {
		path := fmt.Sprintf("targets[%d]", i)
		t.HTTP.check(errs, path+".http_client_config", dir)
		t.WorkloadFrom.Prometheus.HTTP.check(errs, path+".workload_from.prometheus.http_client_config", dir)
		t.ServerMetrics.HTTP.check(errs, path+".server_metrics.http_client_config", dir)
	}
	doc.Global.Diagnosis.Prometheus.HTTP.check(errs, "global.diagnosis.prometheus.http_client_config", dir)
}

// httpFiles are the file names of an http_client_config
// (prometheus/common's HTTPClientConfig), by the keys the file uses.
type httpFiles struct {
	Authorization struct {
		CredentialsFile string `yaml:"credentials_file"`
	} `yaml:"authorization"`
	BearerTokenFile string `yaml:"bearer_token_file"`
	BasicAuth       struct {
		UsernameFile string `yaml:"username_file"`
		PasswordFile string `yaml:"password_file"`
	} `yaml:"basic_auth"`
	OAuth2 struct {
		ClientSecretFile         string   `yaml:"client_secret_file"`
		ClientCertificateKeyFile string   `yaml:"client_certificate_key_file"`
		TLSConfig                tlsFiles `yaml:"tls_config"`
	} `yaml:"oauth2"`
	TLSConfig   tlsFiles `yaml:"tls_config"`
	HTTPHeaders map[string]struct {
		Files []string `yaml:"files"`
	} `yaml:"http_headers"`
}

type tlsFiles struct {
	CAFile   string `yaml:"ca_file"`
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

func (h *httpFiles) check(errs *fieldErrors, path, dir string) {
	check := func(p, file string) {
		if file == "" {
			return
		}
		if !filepath.IsAbs(file) {
			file = filepath.Join(dir, file)
		}
		if msg := fileProblem(file); msg != "" {
			errs.add(p, "%s", msg)
		}
	}
	check(path+".authorization.credentials_file", h.Authorization.CredentialsFile)
	check(path+".bearer_token_file", h.BearerTokenFile)
	check(path+".basic_auth.username_file", h.BasicAuth.UsernameFile)
	check(path+".basic_auth.password_file", h.BasicAuth.PasswordFile)
	check(path+".oauth2.client_secret_file", h.OAuth2.ClientSecretFile)
	check(path+".oauth2.client_certificate_key_file", h.OAuth2.ClientCertificateKeyFile)
	h.OAuth2.TLSConfig.check(check, path+".oauth2.tls_config")
	h.TLSConfig.check(check, path+".tls_config")
	names := make([]string, 0, len(h.HTTPHeaders))
	for name := range h.HTTPHeaders {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for i, f := range h.HTTPHeaders[name].Files {
			check(fmt.Sprintf("%s.http_headers.%s.files[%d]", path, name, i), f)
		}
	}
}

func (t *tlsFiles) check(check func(path, file string), path string) {
	check(path+".ca_file", t.CAFile)
	check(path+".cert_file", t.CertFile)
	check(path+".key_file", t.KeyFile)
}

// fileProblem says what is wrong with file as one to read secrets or
// certificates from, or returns "".
func fileProblem(file string) string {
	fi, err := os.Stat(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("file %q does not exist", file)
	case err != nil:
		return fmt.Sprintf("file %q cannot be read: %v", file, pathReason(err))
	case fi.IsDir():
		return fmt.Sprintf("%q is a directory, not a file", file)
	case !fi.Mode().IsRegular():
		// A FIFO or a device would block or never end.
		return fmt.Sprintf("%q is not a regular file", file)
	}
	f, err := os.Open(file)
	if err != nil {
		return fmt.Sprintf("file %q cannot be read: %v", file, pathReason(err))
	}
	f.Close()
	return ""
}

// pathReason is a *PathError's reason without the path (the message
// quotes the path itself).
func pathReason(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// samplesRead is a samples file read once per load.
type samplesRead struct {
	sampler dist.Sampler
	err     error
}

// readSamples builds the sampler of a samples file (dist: empirical with
// file), at most MaxSamplesFileSize of it, through the load's cache.
func readSamples(cache map[[2]string]samplesRead, path, field string) (dist.Sampler, error) {
	key := [2]string{path, field}
	if r, ok := cache[key]; ok {
		return r.sampler, r.err
	}
	s, err := readSamplesFile(path, field)
	if cache != nil {
		cache[key] = samplesRead{s, err}
	}
	return s, err
}

func readSamplesFile(path, field string) (dist.Sampler, error) {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return nil, err // *PathError names the file
	case fi.IsDir():
		return nil, fmt.Errorf("samples file %q is a directory", path)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("samples file %q is not a regular file", path)
	case fi.Size() > MaxSamplesFileSize:
		return nil, samplesTooLarge(path)
	}
	// The file may grow between Stat and the read: bounded reads at most
	// the limit.
	f, err := bounded.Open(context.Background(), path, MaxSamplesFileSize)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	values, err := dist.ReadSamplesLimit(f, field, MaxSamples)
	var (
		tl *bounded.TooLargeError
		tm *dist.TooManySamplesError
	)
	switch {
	case errors.As(err, &tl):
		return nil, samplesTooLarge(path)
	case errors.As(err, &tm):
		return nil, fmt.Errorf("%s: %w (summarise large logs with llmprobe fit)", path, err)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return dist.FromSamples(values)
}

func samplesTooLarge(path string) error {
	return fmt.Errorf("samples file %q is larger than the %d MiB limit (summarise large logs with llmprobe fit)", path, MaxSamplesFileSize>>20)
}

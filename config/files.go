package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"

	"github.com/llmprobe/llmprobe/dist"

	commoncfg "github.com/prometheus/common/config"
)

// checkFiles checks that every file an http_client_config names exists
// and is a readable regular file. prometheus/common reads them at each
// request (so that rotated secrets apply), which would make a missing
// token a failure of every request, reported as a misleading
// connect_error. Contents are never read, let alone shown.
func (c *Config) checkFiles(errs *fieldErrors, idx nodeIndex) {
	for i, t := range c.Targets {
		if t == nil {
			continue
		}
		path := fmt.Sprintf("targets[%d]", i)
		checkHTTPFiles(errs, idx, path+".http_client_config", &t.HTTPClientConfig)
		if t.WorkloadFrom != nil && t.WorkloadFrom.Prometheus != nil {
			checkHTTPFiles(errs, idx, path+".workload_from.prometheus.http_client_config", &t.WorkloadFrom.Prometheus.HTTPClientConfig)
		}
	}
}

func checkHTTPFiles(errs *fieldErrors, idx nodeIndex, path string, c *commoncfg.HTTPClientConfig) {
	check := func(p, file string) {
		if file == "" {
			return
		}
		if msg := fileProblem(file); msg != "" {
			errs.add(p, "%s", msg)
		}
	}
	if a := c.Authorization; a != nil {
		// Validate moves bearer_token_file to authorization: name what
		// the file says.
		p := path + ".authorization.credentials_file"
		if _, ok := idx.pos[p]; !ok {
			if _, ok := idx.pos[path+".bearer_token_file"]; ok {
				p = path + ".bearer_token_file"
			}
		}
		check(p, a.CredentialsFile)
	}
	check(path+".bearer_token_file", c.BearerTokenFile)
	if b := c.BasicAuth; b != nil {
		check(path+".basic_auth.username_file", b.UsernameFile)
		check(path+".basic_auth.password_file", b.PasswordFile)
	}
	if o := c.OAuth2; o != nil {
		check(path+".oauth2.client_secret_file", o.ClientSecretFile)
		check(path+".oauth2.client_certificate_key_file", o.ClientCertificateKeyFile)
		checkTLSFiles(check, path+".oauth2.tls_config", &o.TLSConfig)
	}
	checkTLSFiles(check, path+".tls_config", &c.TLSConfig)
	if h := c.HTTPHeaders; h != nil {
		names := make([]string, 0, len(h.Headers))
		for name := range h.Headers {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			for i, f := range h.Headers[name].Files {
				check(fmt.Sprintf("%s.http_headers.%s.files[%d]", path, name, i), f)
			}
		}
	}
}

func checkTLSFiles(check func(path, file string), path string, c *commoncfg.TLSConfig) {
	check(path+".ca_file", c.CAFile)
	check(path+".cert_file", c.CertFile)
	check(path+".key_file", c.KeyFile)
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
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The file may grow between Stat and the read.
	r := &io.LimitedReader{R: f, N: MaxSamplesFileSize + 1}
	values, err := dist.ReadSamples(r, field)
	if r.N == 0 {
		return nil, samplesTooLarge(path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return dist.FromSamples(values)
}

func samplesTooLarge(path string) error {
	return fmt.Errorf("samples file %q is larger than the %d MiB limit (summarise large logs with llmprobe fit)", path, MaxSamplesFileSize>>20)
}

// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// runPush pushes the image index of an OCI layout (dist's .oci directory)
// to each -tag. Credentials: $REGISTRY_USERNAME and $REGISTRY_PASSWORD
// when set, else the Docker configuration (docker login).
func runPush(args []string) error {
	fs := flag.NewFlagSet("push", flag.ExitOnError)
	dir := fs.String("layout", "", "OCI layout directory")
	insecure := fs.Bool("insecure", false, "plain HTTP (a local test registry)")
	var tags listFlag
	fs.Var(&tags, "tag", "REGISTRY/REPOSITORY:TAG (repeatable)")
	fs.Parse(args)
	if *dir == "" || len(tags) == 0 {
		return fmt.Errorf("push needs -layout and -tag")
	}
	auth := remote.WithAuthFromKeychain(authn.DefaultKeychain)
	if u := os.Getenv("REGISTRY_USERNAME"); u != "" {
		auth = remote.WithAuth(&authn.Basic{Username: u, Password: os.Getenv("REGISTRY_PASSWORD")})
	}
	for _, t := range tags {
		d, err := push(*dir, t, *insecure, auth)
		if err != nil {
			return err
		}
		fmt.Printf("%s@%s\n", t, d)
	}
	return nil
}

func push(dir, tag string, insecure bool, opts ...remote.Option) (v1.Hash, error) {
	idx, err := layoutIndex(dir)
	if err != nil {
		return v1.Hash{}, err
	}
	var nopts []name.Option
	if insecure {
		nopts = append(nopts, name.Insecure)
	}
	ref, err := name.NewTag(tag, nopts...)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := remote.WriteIndex(ref, idx, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("push %s: %w", ref, err)
	}
	return idx.Digest()
}

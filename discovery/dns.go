// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/llmprobe/llmprobe/config"
)

// maxDNSLookupTime bounds one refresh's lookups (below the refresh
// interval when that is shorter).
const maxDNSLookupTime = 30 * time.Second

// dnsDiscoverer resolves A/AAAA (with a fixed port) or SRV records of its
// names every refresh interval.
type dnsDiscoverer struct {
	names    []string
	typ      string
	port     int
	interval time.Duration
	resolver *net.Resolver
	server   string // "" for the system's
	log      *slog.Logger
}

func newDNS(c *config.DNSSD, opts Options) (*dnsDiscoverer, error) {
	if c == nil || len(c.Names) == 0 {
		return nil, errors.New("dns discovery: no names")
	}
	typ := c.Type
	if typ == "" {
		typ = config.DNSTypeA
	}
	switch typ {
	case config.DNSTypeA, config.DNSTypeAAAA:
		if c.Port < 1 || c.Port > 65535 {
			return nil, fmt.Errorf("dns discovery: type %s needs a port, got %d", typ, c.Port)
		}
	case config.DNSTypeSRV:
	default:
		return nil, fmt.Errorf("dns discovery: unknown record type %q", typ)
	}
	interval := time.Duration(c.RefreshInterval)
	if interval <= 0 {
		interval = config.DefaultDNSSDRefresh
	}
	r := &net.Resolver{PreferGo: true}
	if c.Server != "" {
		server := c.Server
		r.Dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, server)
		}
	}
	return &dnsDiscoverer{
		names:    append([]string(nil), c.Names...),
		typ:      typ,
		port:     c.Port,
		interval: interval,
		resolver: r,
		server:   c.Server,
		log:      opts.Logger,
	}, nil
}

func (d *dnsDiscoverer) Mechanism() string { return config.DiscoveryMechanismDNS }

func (d *dnsDiscoverer) Run(ctx context.Context, ch chan<- Update) {
	tick := time.NewTicker(d.interval)
	defer tick.Stop()
	for {
		if !send(ctx, ch, d.refresh(ctx)) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// refresh resolves every name. Any name that fails (SERVFAIL, a
// timeout, a refused query) makes the refresh fail: the caller keeps its
// last set, which holds that name's last answers. A name that does not
// exist (NXDOMAIN) or has no records of the type is an answer, as in
// Prometheus' dns_sd: it contributes no replicas (a headless Service
// scaled to zero).
func (d *dnsDiscoverer) refresh(ctx context.Context) Update {
	ctx, cancel := context.WithTimeout(ctx, min(d.interval, maxDNSLookupTime))
	defer cancel()
	var (
		out  []Replica
		errs []error
	)
	for _, name := range d.names {
		rs, err := d.resolve(ctx, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, rs...)
	}
	if len(errs) > 0 {
		err := mechanismError(d.Mechanism(), errors.Join(errs...))
		d.log.Warn("replica discovery failed; keeping the last set", "mechanism", d.Mechanism(), "err", err)
		return failed(err)
	}
	return Update{Replicas: normalize(out)}
}

func (d *dnsDiscoverer) resolve(ctx context.Context, name string) ([]Replica, error) {
	switch d.typ {
	case config.DNSTypeSRV:
		_, srvs, err := d.resolver.LookupSRV(ctx, "", "", name)
		err = d.asked(err)
		if notFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("SRV %s: %w", name, err)
		}
		var out []Replica
		for _, s := range srvs {
			ips, err := d.resolver.LookupNetIP(ctx, "ip", s.Target)
			if err = d.asked(err); err != nil {
				return nil, fmt.Errorf("SRV %s: target %s: %w", name, s.Target, err)
			}
			out = append(out, replicasOf(preferIPv4(ips), int(s.Port))...)
		}
		return out, nil
	default:
		network := "ip4"
		if d.typ == config.DNSTypeAAAA {
			network = "ip6"
		}
		ips, err := d.resolver.LookupNetIP(ctx, network, name)
		err = d.asked(err)
		if notFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", d.typ, name, err)
		}
		return replicasOf(ips, d.port), nil
	}
}

// asked makes a resolver's error name the server that was asked: Go's
// resolver names the server of resolv.conf even when it dialled the
// configured one. It must run before the error is wrapped (fmt.Errorf
// renders its message at once).
func (d *dnsDiscoverer) asked(err error) error {
	var de *net.DNSError
	if d.server != "" && errors.As(err, &de) {
		de.Server = d.server
	}
	return err
}

// notFound: the name does not exist or has no records of the type (an
// answer, not a failure).
func notFound(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de) && de.IsNotFound
}

// preferIPv4 keeps the IPv4 addresses of a dual-stack SRV target (one
// replica, not one per address family), else all of them.
func preferIPv4(ips []netip.Addr) []netip.Addr {
	var v4 []netip.Addr
	for _, ip := range ips {
		if ip.Unmap().Is4() {
			v4 = append(v4, ip.Unmap())
		}
	}
	if len(v4) > 0 {
		return v4
	}
	return ips
}

func replicasOf(ips []netip.Addr, port int) []Replica {
	out := make([]Replica, 0, len(ips))
	for _, ip := range ips {
		addr := net.JoinHostPort(ip.Unmap().String(), strconv.Itoa(port))
		out = append(out, Replica{Name: addr, Address: addr})
	}
	return out
}

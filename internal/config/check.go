package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// parsePairs reads "k=v,k=v" (blank entries skipped); keys must be
// non-empty and unique, values may be empty.
func parsePairs(s string) (map[string]string, error) {
	out := map[string]string{}
	for i, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		k, v, ok := strings.Cut(entry, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return nil, fmt.Errorf("entry %d: want key=value", i+1)
		}
		if strings.ContainsFunc(k+v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return nil, fmt.Errorf("entry %d: control characters are not allowed", i+1)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("entry %d: key %q given twice", i+1, k)
		}
		out[k] = v
	}
	return out, nil
}

// checkDialAddr accepts what checkAddr does, and
// static:///host:port,host:port (every replica of a peer, each entry
// checked by checkAddr; internal/grpcclient checks the rest).
func checkDialAddr(addr string) error {
	if list, ok := strings.CutPrefix(addr, "static:///"); ok {
		for _, a := range strings.Split(list, ",") {
			if err := checkAddr(a); err != nil {
				return err
			}
		}
		return nil
	}
	return checkAddr(addr)
}

// checkAddr accepts host:port with a numeric port 0–65535.
func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port, got %q", addr)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port of %q must be a number 0-65535", addr)
	}
	return nil
}

func checkNATSURL(urls string) error {
	if strings.TrimSpace(urls) == "" {
		return errors.New("must not be empty for this target")
	}
	for _, s := range strings.Split(urls, ",") {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || u.Host == "" {
			return fmt.Errorf("want nats://host:port, got %q", s)
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("unsupported scheme %q in %q", u.Scheme, s)
		}
	}
	return nil
}

// isLoopbackHost reports whether host names or is a loopback address.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// UnlimitedIfZero maps a setting's 0 (no limit) to a service option's
// negative (no limit; 0 there is the option's default).
func UnlimitedIfZero[T ~int | ~int64](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

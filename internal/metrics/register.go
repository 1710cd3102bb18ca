package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// RegisterExclusive registers every collector of one owner (a service's
// Server) on reg, or none: when one fails, those already registered are
// unregistered again. A collector already present means a second owner on
// the same registry, which would double count silently, so it is an error
// that names owner. A nil reg registers nothing.
func RegisterExclusive(reg prometheus.Registerer, owner string, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return fmt.Errorf("%s: metrics already registered on this registry (one per registry)", owner)
			}
			return fmt.Errorf("%s: register metrics: %w", owner, err)
		}
	}
	return nil
}

// RegisterShared registers c on reg, or returns the collector of the same
// description already registered there, so that several instances in one
// process (the gRPC servers of -target=all, model clients) add to one
// series. A nil reg returns c unregistered.
func RegisterShared[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		var zero C
		return zero, fmt.Errorf("register metrics: %w", err)
	}
	return c, nil
}

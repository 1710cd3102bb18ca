// Package k8s_test validates the kustomize overlays in k8s/ without a
// cluster: each overlay is rendered with kustomize as a library, every object
// is decoded strictly into its typed Kubernetes API struct, and the
// deployment invariants are checked (probes, resources, security context,
// container flags accepted by the binary's own parser, Service ports, peer
// addresses, NetworkPolicies covering exactly the architecture's edges).
package k8s_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baagent/baagent/k8s/render"
)

// overlay is one rendered variant and what is expected of it.
type overlay struct {
	name string
	// dev has one replica of everything, no HPA and a single NATS node.
	dev bool
	// natsReplicas is the size of the NATS cluster.
	natsReplicas int32
	// externalSecrets are Secrets the overlay expects to exist in the
	// cluster without rendering them, with stand-in values.
	externalSecrets map[string]map[string]string
	// traced overlays point every service at an OTLP collector.
	traced bool
}

var overlays = []overlay{
	{name: "dev", dev: true, natsReplicas: 1},
	{name: "prod", natsReplicas: 3, externalSecrets: map[string]map[string]string{
		"baagent-secrets": {"api-keys": "stand-in-key-for-validation=acme\n", "model-api-key": "stand-in",
			"memory-postgres-url": "postgres://baagent:stand-in@postgres:5432/baagent?sslmode=require"},
	}},
	// The dev overlay with the otel component.
	{name: "dev-otel", dev: true, natsReplicas: 1, traced: true},
}

func TestOverlaysRenderAndHoldTheInvariants(t *testing.T) {
	for _, o := range overlays {
		t.Run(o.name, func(t *testing.T) {
			m, err := render.Dir(filepath.Join("overlays", o.name))
			if err != nil {
				t.Fatal(err)
			}
			if m.Objects < 30 {
				t.Fatalf("rendered only %d objects", m.Objects)
			}
			for _, err := range check(t, m, o) {
				t.Error(err)
			}
		})
	}
}

// TestBaseRenders keeps the base renderable on its own (overlays build on it).
func TestBaseRenders(t *testing.T) {
	m, err := render.Dir("base")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Deployments) != 7 || len(m.StatefulSets) != 1 || len(m.HPAs) != 3 {
		t.Fatalf("base: %d Deployments, %d StatefulSets, %d HPAs; want 7, 1, 3", len(m.Deployments), len(m.StatefulSets), len(m.HPAs))
	}
}

// check runs every invariant and returns each violation.
func check(t *testing.T, m *render.Manifest, o overlay) []error {
	t.Helper()
	var errs []error
	add := func(es ...error) {
		for _, e := range es {
			if e != nil {
				errs = append(errs, e)
			}
		}
	}
	add(checkWorkloads(m, o)...)
	add(checkContainers(m)...)
	add(checkFlags(t, m, o)...)
	add(checkServices(m)...)
	add(checkPeers(t, m, o)...)
	add(checkNetworkPolicies(m)...)
	add(checkAvailability(m, o)...)
	add(checkNATS(t, m, o)...)
	add(checkTracing(t, m, o)...)
	add(checkConfigFiles(t, m, o)...)
	add(checkServiceMonitor(m)...)
	add(checkMemoryStore(t, m, o)...)
	return errs
}

// hasError reports whether one of errs contains want.
func hasError(errs []error, want string) bool {
	for _, e := range errs {
		if strings.Contains(e.Error(), want) {
			return true
		}
	}
	return false
}

func joinErrors(errs []error) error { return errors.Join(errs...) }

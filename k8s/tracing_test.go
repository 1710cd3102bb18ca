package k8s_test

import (
	"fmt"
	"testing"

	"github.com/baagent/baagent/k8s/render"
)

// checkTracing: a traced overlay gives every service the collector's
// endpoint (and the binary accepts the settings, which checkFlags loads);
// the others turn tracing on nowhere.
func checkTracing(t *testing.T, m *render.Manifest, o overlay) []error {
	t.Helper()
	var errs []error
	for _, name := range render.SortedKeys(m.Deployments) {
		d := m.Deployments[name]
		if len(d.Spec.Template.Spec.Containers) != 1 {
			continue
		}
		l, err := loadContainer(t, m, o, &d.Spec.Template.Spec, d.Spec.Template.Spec.Containers[0])
		if err != nil {
			continue // reported by checkFlags
		}
		switch {
		case o.traced && (l.cfg.OTLPEndpoint == "" || !l.cfg.OTLPInsecure || l.cfg.TraceSampling == ""):
			errs = append(errs, fmt.Errorf("Deployment %s: not pointed at the collector (endpoint %q, insecure %v)", name, l.cfg.OTLPEndpoint, l.cfg.OTLPInsecure))
		case !o.traced && l.cfg.OTLPEndpoint != "":
			errs = append(errs, fmt.Errorf("Deployment %s: exports traces to %s in an overlay without the otel component", name, l.cfg.OTLPEndpoint))
		}
	}
	return errs
}

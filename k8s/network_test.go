package k8s_test

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/k8s/render"
)

// dials lists the peers each service connects to (cmd/baagent/app), which are
// the gRPC edges of docs/architecture.md's diagram plus tokens counting for the
// orchestrator and skills, the gateway's read-only pass-through
// (ListSkills, ListTools, CountTokens), and memory for the gateway (the
// memory API), the orchestrator (conversation deletion) and the toolrunner
// (memory_search, memory_add).
var dials = map[string][]string{
	config.TargetTokens:       nil,
	config.TargetContext:      {config.TargetTokens},
	config.TargetSkills:       {config.TargetTokens},
	config.TargetMemory:       nil,
	config.TargetToolRunner:   {config.TargetMemory},
	config.TargetOrchestrator: {config.TargetContext, config.TargetSkills, config.TargetToolRunner, config.TargetTokens, config.TargetMemory},
	config.TargetGateway:      {config.TargetOrchestrator, config.TargetSkills, config.TargetToolRunner, config.TargetTokens, config.TargetMemory},
}

const natsWorkload = "nats"

// podOf returns the pod template of the workload whose pods svc selects.
func selectedPods(m *render.Manifest, selector map[string]string) []workload {
	var out []workload
	for _, w := range workloads(m) {
		if len(selector) > 0 && labelsMatch(selector, w.pod.Labels) {
			out = append(out, w)
		}
	}
	return out
}

func labelsMatch(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkServices: every Service selects pods, and each of its ports targets a
// container port of those pods.
func checkServices(m *render.Manifest) []error {
	var errs []error
	for _, name := range render.SortedKeys(m.Services) {
		s := m.Services[name]
		pods := selectedPods(m, s.Spec.Selector)
		if len(pods) == 0 {
			errs = append(errs, fmt.Errorf("Service %s: selects no pods", name))
			continue
		}
		for _, p := range s.Spec.Ports {
			target := p.TargetPort
			if target.Type == intstr.Int && target.IntVal == 0 {
				target = intstr.FromInt32(p.Port)
			}
			for _, w := range pods {
				found := false
				for _, c := range w.pod.Spec.Containers {
					found = found || hasContainerPort(c, target)
				}
				if !found {
					errs = append(errs, fmt.Errorf("Service %s: port %s (%d) targets %s, which %s %s's containers do not expose", name, p.Name, p.Port, target.String(), w.kind, w.name))
				}
			}
		}
	}
	return errs
}

// resolve finds the Service for a DNS name host:port and the container port
// number it leads to on pods of the workload named want.
func resolve(m *render.Manifest, hostport, want string) error {
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		return err
	}
	port, _ := strconv.Atoi(portStr)
	svcName, _, _ := strings.Cut(host, ".")
	if rest := strings.TrimPrefix(host, svcName); rest != "" && !strings.HasPrefix(rest, ".") {
		return fmt.Errorf("%s is not a Service DNS name", host)
	}
	s, ok := m.Services[svcName]
	if !ok {
		return fmt.Errorf("no Service %s in the render", svcName)
	}
	pods := selectedPods(m, s.Spec.Selector)
	if len(pods) != 1 || pods[0].name != want {
		return fmt.Errorf("Service %s does not select %s's pods", svcName, want)
	}
	for _, p := range s.Spec.Ports {
		if p.Port == int32(port) {
			return nil
		}
	}
	return fmt.Errorf("Service %s has no port %d", svcName, port)
}

// checkPeers: each service dials exactly its peers, by a Service DNS name
// that leads to them, and connects to NATS exactly when it needs it.
func checkPeers(t *testing.T, m *render.Manifest, o overlay) []error {
	var errs []error
	for _, name := range render.SortedKeys(m.Deployments) {
		d := m.Deployments[name]
		if len(d.Spec.Template.Spec.Containers) != 1 || !config.IsService(name) {
			continue
		}
		flags, err := containerFlags(d.Spec.Template.Spec.Containers[0])
		if err != nil {
			continue // reported by checkFlags
		}
		for _, peer := range config.Services {
			addr, set := flags[peer+"-addr"]
			wanted := slices.Contains(dials[name], peer)
			switch {
			case wanted && !set:
				errs = append(errs, fmt.Errorf("Deployment %s: dials %s but does not set -%s-addr (it would dial %s)", name, peer, peer, config.DefaultDialAddr(peer)))
			case !wanted && set:
				errs = append(errs, fmt.Errorf("Deployment %s: sets -%s-addr but never dials %s", name, peer, peer))
			case set:
				if err := resolve(m, addr, peer); err != nil {
					errs = append(errs, fmt.Errorf("Deployment %s: -%s-addr=%s: %w", name, peer, addr, err))
				}
			}
		}
		natsURL, set := flags["nats-url"]
		switch {
		case config.NeedsNATS(name) && !set:
			errs = append(errs, fmt.Errorf("Deployment %s: needs NATS but does not set -nats-url", name))
		case !config.NeedsNATS(name) && set:
			errs = append(errs, fmt.Errorf("Deployment %s: sets -nats-url but does not use NATS", name))
		case set:
			for _, s := range strings.Split(natsURL, ",") {
				u, err := url.Parse(strings.TrimSpace(s))
				if err == nil {
					err = resolve(m, u.Host, natsWorkload)
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("Deployment %s: -nats-url=%s: %v", name, natsURL, err))
				}
			}
		}
	}
	return errs
}

// endpoint is a source of traffic for the NetworkPolicy evaluation.
type endpoint struct {
	name      string
	labels    map[string]string // nil: outside the namespace
	nsLabels  map[string]string
	workload  string
	isOutside bool
}

// edge is allowed traffic: from a source to a named port of a workload.
type edge struct{ from, to, port string }

// expectedEdges are the only connections the policies may allow besides
// the gateway's public ports, which every client reaches.
func expectedEdges() map[edge]bool {
	want := map[edge]bool{{natsWorkload, natsWorkload, "cluster"}: true}
	for src, peers := range dials {
		for _, p := range peers {
			want[edge{src, p, "grpc"}] = true
		}
		if config.NeedsNATS(src) {
			want[edge{src, natsWorkload, "client"}] = true
		}
		want[edge{"prometheus", src, "metrics"}] = true
	}
	return want
}

// checkNetworkPolicies evaluates the policies for every source, destination
// pod and container port, and compares what they allow with expectedEdges.
func checkNetworkPolicies(m *render.Manifest) []error {
	var errs []error
	sources := []endpoint{
		{name: "client", nsLabels: map[string]string{"kubernetes.io/metadata.name": "ingress-nginx"}, isOutside: true},
		{name: "prometheus", nsLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}, isOutside: true},
	}
	for _, w := range workloads(m) {
		sources = append(sources, endpoint{name: w.name, labels: w.pod.Labels, workload: w.name})
	}
	want := expectedEdges()
	// A default deny keeps pods added later (or a policy renamed) closed.
	deny := false
	for _, np := range m.NetworkPolicies {
		deny = deny || (len(np.Spec.PodSelector.MatchLabels) == 0 && len(np.Spec.PodSelector.MatchExpressions) == 0 &&
			hasIngressType(np.Spec.PolicyTypes) && len(np.Spec.Ingress) == 0)
	}
	if !deny {
		errs = append(errs, fmt.Errorf("no default-deny ingress NetworkPolicy (podSelector {} with no ingress rules)"))
	}
	for _, np := range m.NetworkPolicies {
		for _, r := range np.Spec.Ingress {
			for _, peer := range r.From {
				if peer.IPBlock != nil || selectorHasExpressions(peer.PodSelector) || selectorHasExpressions(peer.NamespaceSelector) {
					errs = append(errs, fmt.Errorf("NetworkPolicy %s: only matchLabels selectors are supported by this check", np.Name))
				}
			}
		}
	}
	for _, dst := range workloads(m) {
		for _, c := range dst.pod.Spec.Containers {
			for _, port := range c.Ports {
				for _, src := range sources {
					e := edge{src.name, dst.name, port.Name}
					got := allowed(m, src, dst, port)
					// The public edge: every client reaches the gateway.
					public := dst.name == config.TargetGateway && (port.Name == "grpc" || port.Name == "http")
					if public {
						if !got {
							errs = append(errs, fmt.Errorf("NetworkPolicy does not let %s reach the public gateway port %s", src.name, port.Name))
						}
						continue
					}
					if got && !want[e] {
						errs = append(errs, fmt.Errorf("NetworkPolicy allows %s -> %s:%s, which is not an edge of the architecture", e.from, e.to, e.port))
					}
					if !got && want[e] {
						errs = append(errs, fmt.Errorf("NetworkPolicy does not allow the edge %s -> %s:%s", e.from, e.to, e.port))
					}
				}
			}
		}
	}
	return errs
}

func selectorHasExpressions(s *metav1.LabelSelector) bool {
	return s != nil && len(s.MatchExpressions) > 0
}

// allowed applies Kubernetes ingress semantics: a pod no Ingress policy
// selects takes all traffic; otherwise some rule of a selecting policy must
// admit the source and the port.
func allowed(m *render.Manifest, src endpoint, dst workload, port corev1.ContainerPort) bool {
	isolated := false
	for _, np := range m.NetworkPolicies {
		if !labelsMatch(np.Spec.PodSelector.MatchLabels, dst.pod.Labels) || !hasIngressType(np.Spec.PolicyTypes) {
			continue
		}
		isolated = true
		for _, r := range np.Spec.Ingress {
			if admitsPort(r.Ports, port) && admitsSource(r.From, src) {
				return true
			}
		}
	}
	return !isolated
}

func hasIngressType(types []networkingv1.PolicyType) bool {
	if len(types) == 0 {
		return true
	}
	for _, t := range types {
		if t == networkingv1.PolicyTypeIngress {
			return true
		}
	}
	return false
}

func admitsPort(ports []networkingv1.NetworkPolicyPort, port corev1.ContainerPort) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Port == nil {
			return true
		}
		if (p.Port.Type == intstr.String && p.Port.StrVal == port.Name) || (p.Port.Type == intstr.Int && p.Port.IntVal == port.ContainerPort) {
			return true
		}
	}
	return false
}

func admitsSource(from []networkingv1.NetworkPolicyPeer, src endpoint) bool {
	if len(from) == 0 {
		return true
	}
	for _, p := range from {
		switch {
		case p.NamespaceSelector != nil:
			// Another namespace (this evaluation puts every workload in
			// the suite's own namespace, which carries no such label).
			if src.isOutside && labelsMatch(p.NamespaceSelector.MatchLabels, src.nsLabels) &&
				(p.PodSelector == nil || len(p.PodSelector.MatchLabels) == 0) {
				return true
			}
		case p.PodSelector != nil:
			if !src.isOutside && labelsMatch(p.PodSelector.MatchLabels, src.labels) {
				return true
			}
		}
	}
	return false
}

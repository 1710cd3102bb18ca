package k8s_test

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/internal/topology"
	"github.com/baagent/baagent/k8s/render"
)

// componentLabel names the service a pod runs.
const componentLabel = "app.kubernetes.io/component"

// workload is a Deployment or StatefulSet's pod template, by name.
type workload struct {
	kind, name string
	pod        *corev1.PodTemplateSpec
}

func workloads(m *render.Manifest) []workload {
	var out []workload
	for _, n := range render.SortedKeys(m.Deployments) {
		out = append(out, workload{"Deployment", n, &m.Deployments[n].Spec.Template})
	}
	for _, n := range render.SortedKeys(m.StatefulSets) {
		out = append(out, workload{"StatefulSet", n, &m.StatefulSets[n].Spec.Template})
	}
	return out
}

// checkWorkloads: one Deployment per service, named after it, one container
// named after it, running -target=<service> from a pinned image.
func checkWorkloads(m *render.Manifest, o overlay) []error {
	var errs []error
	for _, svc := range config.Services {
		if _, ok := m.Deployments[svc]; !ok {
			errs = append(errs, fmt.Errorf("no Deployment for service %s", svc))
		}
	}
	for name, d := range m.Deployments {
		if !config.IsService(name) {
			errs = append(errs, fmt.Errorf("Deployment %s: not a service of the binary", name))
			continue
		}
		pod := &d.Spec.Template
		if pod.Labels[componentLabel] != name || d.Spec.Selector == nil || d.Spec.Selector.MatchLabels[componentLabel] != name {
			errs = append(errs, fmt.Errorf("Deployment %s: pod label and selector %s must be %q", name, componentLabel, name))
		}
		if len(pod.Spec.Containers) != 1 || pod.Spec.Containers[0].Name != name {
			errs = append(errs, fmt.Errorf("Deployment %s: want exactly one container named %s", name, name))
			continue
		}
		c := pod.Spec.Containers[0]
		if len(c.Args) == 0 || c.Args[0] != "-target="+name {
			errs = append(errs, fmt.Errorf("Deployment %s: first arg must be -target=%s", name, name))
		}
		if len(c.Command) > 0 {
			errs = append(errs, fmt.Errorf("Deployment %s: command overrides the image's entrypoint", name))
		}
	}
	for _, w := range workloads(m) {
		for _, c := range append(append([]corev1.Container{}, w.pod.Spec.InitContainers...), w.pod.Spec.Containers...) {
			img := c.Image
			if img == "" || strings.HasSuffix(img, ":latest") || !regexp.MustCompile(`:[\w.-]+$|@sha256:[0-9a-f]{64}$`).MatchString(img) {
				errs = append(errs, fmt.Errorf("%s %s: container %s: image %q must be pinned to a tag or digest (not latest)", w.kind, w.name, c.Name, img))
			}
			if !o.dev && strings.HasSuffix(img, ":dev") {
				errs = append(errs, fmt.Errorf("%s %s: container %s: a production overlay must not run the dev image", w.kind, w.name, c.Name))
			}
		}
	}
	return errs
}

// checkContainers: probes, resources and the non-root, read-only security
// context on every container of every workload.
func checkContainers(m *render.Manifest) []error {
	var errs []error
	for _, w := range workloads(m) {
		where := w.kind + " " + w.name
		ps := w.pod.Spec
		if ps.HostNetwork || ps.HostPID || ps.HostIPC {
			errs = append(errs, fmt.Errorf("%s: host namespaces are not allowed", where))
		}
		if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
			errs = append(errs, fmt.Errorf("%s: automountServiceAccountToken must be false (no service calls the Kubernetes API)", where))
		}
		if ps.ServiceAccountName != "" {
			if _, ok := m.ServiceAccounts[ps.ServiceAccountName]; !ok {
				errs = append(errs, fmt.Errorf("%s: ServiceAccount %s is not in the render", where, ps.ServiceAccountName))
			}
		}
		sc := ps.SecurityContext
		if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
			errs = append(errs, fmt.Errorf("%s: pod securityContext must set runAsNonRoot: true and a non-zero runAsUser", where))
		}
		if sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			errs = append(errs, fmt.Errorf("%s: pod securityContext must use the RuntimeDefault seccomp profile", where))
		}
		for _, v := range ps.Volumes {
			if v.HostPath != nil {
				errs = append(errs, fmt.Errorf("%s: volume %s: hostPath is not allowed", where, v.Name))
			}
		}
		for _, c := range ps.Containers {
			cw := fmt.Sprintf("%s container %s", where, c.Name)
			errs = append(errs, checkProbes(w, c)...)
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				req, okReq := c.Resources.Requests[r]
				lim, okLim := c.Resources.Limits[r]
				if !okReq || !okLim || req.IsZero() || lim.IsZero() {
					errs = append(errs, fmt.Errorf("%s: resources must request and limit %s", cw, r))
				} else if req.Cmp(lim) > 0 {
					errs = append(errs, fmt.Errorf("%s: %s request %s above its limit %s", cw, r, req.String(), lim.String()))
				}
			}
			csc := c.SecurityContext
			switch {
			case csc == nil:
				errs = append(errs, fmt.Errorf("%s: no securityContext", cw))
			default:
				if csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
					errs = append(errs, fmt.Errorf("%s: allowPrivilegeEscalation must be false", cw))
				}
				if csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem {
					errs = append(errs, fmt.Errorf("%s: readOnlyRootFilesystem must be true", cw))
				}
				if csc.Privileged != nil && *csc.Privileged {
					errs = append(errs, fmt.Errorf("%s: privileged", cw))
				}
				if csc.RunAsUser != nil && *csc.RunAsUser == 0 {
					errs = append(errs, fmt.Errorf("%s: runs as root", cw))
				}
				if csc.Capabilities == nil || len(csc.Capabilities.Add) > 0 || len(csc.Capabilities.Drop) != 1 || csc.Capabilities.Drop[0] != "ALL" {
					errs = append(errs, fmt.Errorf("%s: capabilities must drop ALL and add none", cw))
				}
			}
		}
	}
	return errs
}

// checkProbes: baagent containers use Kubernetes' native gRPC probes on
// their own gRPC port (readiness on the service's health name); NATS uses
// its HTTP health endpoint.
func checkProbes(w workload, c corev1.Container) []error {
	where := fmt.Sprintf("%s %s container %s", w.kind, w.name, c.Name)
	var errs []error
	probes := map[string]*corev1.Probe{"startupProbe": c.StartupProbe, "readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe}
	for _, kind := range render.SortedKeys(probes) {
		p := probes[kind]
		if p == nil {
			errs = append(errs, fmt.Errorf("%s: no %s", where, kind))
			continue
		}
		if w.kind == "StatefulSet" {
			if p.HTTPGet == nil || !hasContainerPort(c, p.HTTPGet.Port) {
				errs = append(errs, fmt.Errorf("%s: %s must be an HTTP health check on a container port", where, kind))
			}
			continue
		}
		if p.GRPC == nil {
			errs = append(errs, fmt.Errorf("%s: %s must be a native gRPC probe", where, kind))
			continue
		}
		if want := containerPort(c, "grpc"); want == 0 || p.GRPC.Port != want {
			errs = append(errs, fmt.Errorf("%s: %s probes port %d, want the container's grpc port %d", where, kind, p.GRPC.Port, want))
		}
		svc := ""
		if p.GRPC.Service != nil {
			svc = *p.GRPC.Service
		}
		if kind == "readinessProbe" && svc != topology.GRPCServices[w.name] {
			errs = append(errs, fmt.Errorf("%s: readinessProbe checks health of %q, want %q", where, svc, topology.GRPCServices[w.name]))
		}
		if kind != "readinessProbe" && svc != "" {
			errs = append(errs, fmt.Errorf("%s: %s must check the server's overall health (service \"\")", where, kind))
		}
	}
	return errs
}

// containerPort returns the number of c's port called name, or 0.
func containerPort(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

func hasContainerPort(c corev1.Container, port intstr.IntOrString) bool {
	for _, p := range c.Ports {
		if (port.Type == intstr.String && p.Name == port.StrVal) || (port.Type == intstr.Int && p.ContainerPort == port.IntVal) {
			return true
		}
	}
	return false
}

// readFile is os.ReadFile for the tests' fixed paths.
func readFile(p string) (string, error) {
	b, err := os.ReadFile(p)
	return string(b), err
}

func emptyDirVolume(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}

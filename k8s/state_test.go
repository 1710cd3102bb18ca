package k8s_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/k8s/render"
	"github.com/baagent/baagent/services/tokens"
	"github.com/baagent/baagent/services/toolrunner"
	"github.com/baagent/baagent/services/toolrunner/external"
)

// autoscaled are the services with a HorizontalPodAutoscaler outside dev.
var autoscaled = []string{config.TargetGateway, config.TargetOrchestrator, config.TargetToolRunner}

// checkAvailability: a PodDisruptionBudget for every workload; HPAs for the
// autoscaled services (none in dev), which then own the replica count.
func checkAvailability(m *render.Manifest, o overlay) []error {
	var errs []error
	for _, w := range workloads(m) {
		n := 0
		for _, pdb := range m.PDBs {
			if pdb.Spec.Selector != nil && labelsMatch(pdb.Spec.Selector.MatchLabels, w.pod.Labels) && len(pdb.Spec.Selector.MatchLabels) > 0 {
				n++
				if pdb.Spec.MinAvailable != nil || pdb.Spec.MaxUnavailable == nil {
					errs = append(errs, fmt.Errorf("PodDisruptionBudget %s: use maxUnavailable (minAvailable blocks every drain of a one-replica workload)", pdb.Name))
				}
			}
		}
		if n != 1 {
			errs = append(errs, fmt.Errorf("%s %s: covered by %d PodDisruptionBudgets, want 1", w.kind, w.name, n))
		}
	}
	targets := map[string]bool{}
	for name, h := range m.HPAs {
		ref := h.Spec.ScaleTargetRef
		if ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || m.Deployments[ref.Name] == nil {
			errs = append(errs, fmt.Errorf("HorizontalPodAutoscaler %s: scales %s %s, not a rendered Deployment", name, ref.Kind, ref.Name))
			continue
		}
		targets[ref.Name] = true
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 || h.Spec.MaxReplicas < *h.Spec.MinReplicas {
			errs = append(errs, fmt.Errorf("HorizontalPodAutoscaler %s: want 2 <= minReplicas <= maxReplicas", name))
		}
		if len(h.Spec.Metrics) == 0 {
			errs = append(errs, fmt.Errorf("HorizontalPodAutoscaler %s: no metrics", name))
		}
		if m.Deployments[ref.Name].Spec.Replicas != nil {
			errs = append(errs, fmt.Errorf("Deployment %s: sets replicas although HorizontalPodAutoscaler %s owns the count (every apply would reset it)", ref.Name, name))
		}
	}
	for _, svc := range autoscaled {
		if !o.dev && !targets[svc] {
			errs = append(errs, fmt.Errorf("Deployment %s: no HorizontalPodAutoscaler", svc))
		}
	}
	if o.dev {
		if len(m.HPAs) > 0 {
			errs = append(errs, fmt.Errorf("dev: %d HorizontalPodAutoscalers, want none", len(m.HPAs)))
		}
		for name, d := range m.Deployments {
			if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
				errs = append(errs, fmt.Errorf("dev: Deployment %s must run 1 replica", name))
			}
		}
	}
	return errs
}

// checkNATS: a StatefulSet of the overlay's size with JetStream on its
// persistent volumes, a headless Service for the routes, and a
// configuration the NATS server itself accepts.
func checkNATS(t *testing.T, m *render.Manifest, o overlay) []error {
	ss, ok := m.StatefulSets[natsWorkload]
	if !ok {
		return []error{fmt.Errorf("no NATS StatefulSet")}
	}
	var errs []error
	if ss.Spec.Replicas == nil || *ss.Spec.Replicas != o.natsReplicas {
		errs = append(errs, fmt.Errorf("StatefulSet nats: want %d replicas", o.natsReplicas))
	}
	hs, ok := m.Services[ss.Spec.ServiceName]
	if !ok || hs.Spec.ClusterIP != "None" || !labelsMatch(hs.Spec.Selector, ss.Spec.Template.Labels) {
		errs = append(errs, fmt.Errorf("StatefulSet nats: serviceName %q must be a headless Service selecting its pods", ss.Spec.ServiceName))
	}
	if len(ss.Spec.Template.Spec.Containers) != 1 {
		return append(errs, fmt.Errorf("StatefulSet nats: want one container"))
	}
	c := ss.Spec.Template.Spec.Containers[0]
	claims := map[string]bool{}
	for _, vct := range ss.Spec.VolumeClaimTemplates {
		claims[vct.Name] = true
	}
	storeMount := ""
	for _, vm := range c.VolumeMounts {
		if claims[vm.Name] {
			storeMount = vm.MountPath
		}
	}
	if storeMount == "" {
		return append(errs, fmt.Errorf("StatefulSet nats: no volumeClaimTemplate mounted (JetStream must be on a persistent volume)"))
	}
	// The claim is not in the render (the StatefulSet makes it): lay the
	// pod out with the claim as an emptyDir.
	pod := ss.Spec.Template.Spec.DeepCopy()
	for name := range claims {
		pod.Volumes = append(pod.Volumes, emptyDirVolume(name))
	}
	local, err := m.Materialize(pod, &c, render.LocalOptions{Dir: t.TempDir(), RepoRoot: ".."})
	if err != nil {
		return append(errs, fmt.Errorf("StatefulSet nats: %w", err))
	}
	if len(c.Args) != 2 || c.Args[0] != "--config" {
		return append(errs, fmt.Errorf("StatefulSet nats: args must be --config <file>"))
	}
	confPath, ok := local.Path(c.Args[1])
	if !ok {
		return append(errs, fmt.Errorf("StatefulSet nats: config %s is not on a volume", c.Args[1]))
	}
	t.Setenv("POD_NAME", "nats-0")
	opts, err := server.ProcessConfigFile(confPath)
	if err != nil {
		return append(errs, fmt.Errorf("StatefulSet nats: the NATS server refuses its config: %w", err))
	}
	if !opts.JetStream || (opts.StoreDir != storeMount && !strings.HasPrefix(opts.StoreDir, storeMount+"/")) {
		errs = append(errs, fmt.Errorf("StatefulSet nats: JetStream must be enabled with store_dir under %s, got enabled=%v store_dir=%q", storeMount, opts.JetStream, opts.StoreDir))
	}
	if want := containerPort(c, "client"); int32(opts.Port) != want {
		errs = append(errs, fmt.Errorf("StatefulSet nats: client port %d, container port %d", opts.Port, want))
	}
	if opts.ServerName != "nats-0" {
		errs = append(errs, fmt.Errorf("StatefulSet nats: server_name must be the pod name, got %q", opts.ServerName))
	}
	n := int(o.natsReplicas)
	if n == 1 {
		if len(opts.Routes) > 0 {
			errs = append(errs, fmt.Errorf("StatefulSet nats: a single node must not have cluster routes"))
		}
		return errs
	}
	if opts.Cluster.Name == "" || int32(opts.Cluster.Port) != containerPort(c, "cluster") {
		errs = append(errs, fmt.Errorf("StatefulSet nats: cluster name and port (%d) must be set to the container's cluster port", opts.Cluster.Port))
	}
	routes := map[string]bool{}
	for _, r := range opts.Routes {
		routes[r.Host] = true
	}
	for i := range n {
		h := net.JoinHostPort(fmt.Sprintf("%s-%d.%s", ss.Name, i, ss.Spec.ServiceName), strconv.Itoa(opts.Cluster.Port))
		if !routes[h] {
			errs = append(errs, fmt.Errorf("StatefulSet nats: no route to %s", h))
		}
	}
	if len(routes) != n {
		errs = append(errs, fmt.Errorf("StatefulSet nats: %d routes for %d replicas", len(routes), n))
	}
	return errs
}

// checkConfigFiles: the files the services read from ConfigMaps parse with
// the binary's own loaders, the skills ConfigMap is the sample skills tree
// file for file, and the image directories the manifests use are the ones
// the Dockerfile fills.
func checkConfigFiles(t *testing.T, m *render.Manifest, o overlay) []error {
	var errs []error
	loadOf := func(svc string) *loaded {
		d, ok := m.Deployments[svc]
		if !ok || len(d.Spec.Template.Spec.Containers) != 1 {
			return nil
		}
		l, err := loadContainer(t, m, o, &d.Spec.Template.Spec, d.Spec.Template.Spec.Containers[0])
		if err != nil {
			return nil // reported by checkFlags
		}
		return l
	}
	if l := loadOf(config.TargetTokens); l != nil {
		if l.cfg.Tokens.EncodersFile == "" {
			errs = append(errs, fmt.Errorf("tokens: no -token-encoders-file (the model registry ConfigMap is not used)"))
		} else if _, err := tokens.LoadConfigFile(l.cfg.Tokens.EncodersFile); err != nil {
			errs = append(errs, fmt.Errorf("tokens: %w", err))
		}
	}
	if l := loadOf(config.TargetToolRunner); l != nil {
		if l.cfg.ToolRunner.ToolsFile == "" {
			errs = append(errs, fmt.Errorf("toolrunner: no -tools-file (the tools ConfigMap is not used)"))
		} else {
			if _, err := toolrunner.LoadPolicies(l.cfg.ToolRunner.ToolsFile); err != nil {
				errs = append(errs, fmt.Errorf("toolrunner: %w", err))
			}
			if _, err := external.LoadFile(l.cfg.ToolRunner.ToolsFile); err != nil {
				errs = append(errs, fmt.Errorf("toolrunner: %w", err))
			}
		}
	}
	if l := loadOf(config.TargetSkills); l != nil {
		if err := sameTree(l.cfg.Skills.Dir, filepath.Join("..", "examples", "skills")); err != nil {
			errs = append(errs, fmt.Errorf("skills ConfigMap differs from examples/skills (copy the change into k8s/base/skills and kustomization.yaml): %w", err))
		}
	}
	dockerfile, err := readFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		return append(errs, err)
	}
	for img, repo := range render.ImageDirs {
		if !strings.Contains(dockerfile, "COPY "+repo+" "+img+"\n") {
			errs = append(errs, fmt.Errorf("Dockerfile: no `COPY %s %s`", repo, img))
		}
	}
	return errs
}

// sameTree compares two directory trees file by file (hidden names, as
// kubelet's ..data links, are skipped, as the skills loader skips them).
func sameTree(got, want string) error {
	files := func(root string) (map[string][]byte, error) {
		out := map[string][]byte{}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if strings.HasPrefix(d.Name(), ".") && p != root {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			out[filepath.ToSlash(rel)] = b
			return nil
		})
		return out, err
	}
	g, err := files(got)
	if err != nil {
		return err
	}
	w, err := files(want)
	if err != nil {
		return err
	}
	for p, b := range w {
		gb, ok := g[p]
		if !ok {
			return fmt.Errorf("%s is missing", p)
		}
		if !bytes.Equal(gb, b) {
			return fmt.Errorf("%s differs", p)
		}
	}
	for p := range g {
		if _, ok := w[p]; !ok {
			return fmt.Errorf("%s is not in examples/skills", p)
		}
	}
	return nil
}

// checkServiceMonitor: the ServiceMonitor scrapes the metrics port of every
// service.
func checkServiceMonitor(m *render.Manifest) []error {
	if len(m.ServiceMonitors) != 1 {
		return []error{fmt.Errorf("%d ServiceMonitors, want 1", len(m.ServiceMonitors))}
	}
	var errs []error
	for name, sm := range m.ServiceMonitors {
		spec, _ := sm["spec"].(map[string]any)
		sel, _ := spec["selector"].(map[string]any)
		ml, _ := sel["matchLabels"].(map[string]any)
		selector := map[string]string{}
		for k, v := range ml {
			selector[k], _ = v.(string)
		}
		port := ""
		if eps, _ := spec["endpoints"].([]any); len(eps) == 1 {
			ep, _ := eps[0].(map[string]any)
			port, _ = ep["port"].(string)
		}
		if port == "" {
			errs = append(errs, fmt.Errorf("ServiceMonitor %s: want one endpoint with a port name", name))
			continue
		}
		for _, svc := range config.Services {
			s, ok := m.Services[svc]
			if !ok || len(selector) == 0 || !labelsMatch(selector, s.Labels) {
				errs = append(errs, fmt.Errorf("ServiceMonitor %s: does not select Service %s", name, svc))
				continue
			}
			found := false
			for _, p := range s.Spec.Ports {
				found = found || p.Name == port
			}
			if !found {
				errs = append(errs, fmt.Errorf("ServiceMonitor %s: Service %s has no port %q", name, svc, port))
			}
		}
	}
	return errs
}

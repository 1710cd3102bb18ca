// Package render renders the kustomize overlays of k8s/ with kustomize as a
// library and decodes every object strictly into its typed Kubernetes API
// struct, so that the validation tests and the split-mode launcher read
// exactly the objects `kubectl apply -k` would send.
package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Manifest is one rendered overlay, by kind and name.
type Manifest struct {
	Namespaces      map[string]*corev1.Namespace
	ServiceAccounts map[string]*corev1.ServiceAccount
	ConfigMaps      map[string]*corev1.ConfigMap
	Secrets         map[string]*corev1.Secret
	Services        map[string]*corev1.Service
	PVCs            map[string]*corev1.PersistentVolumeClaim
	Deployments     map[string]*appsv1.Deployment
	StatefulSets    map[string]*appsv1.StatefulSet
	PDBs            map[string]*policyv1.PodDisruptionBudget
	HPAs            map[string]*autoscalingv2.HorizontalPodAutoscaler
	NetworkPolicies map[string]*networkingv1.NetworkPolicy
	// ServiceMonitors are Prometheus Operator objects, kept as decoded JSON
	// (their Go types are not a dependency); see ServiceMonitorFields.
	ServiceMonitors map[string]map[string]any
	// Objects counts every rendered object.
	Objects int
}

// Dir renders the kustomization in dir on disk.
func Dir(dir string) (*Manifest, error) {
	return Render(filesys.MakeFsOnDisk(), dir)
}

// Render renders the kustomization at dir of fsys and decodes it.
func Render(fsys filesys.FileSystem, dir string) (*Manifest, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	m := newManifest()
	for _, r := range res.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", r.GetKind(), r.GetName(), err)
		}
		if err := m.add(r.GetApiVersion(), r.GetKind(), r.GetName(), data); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func newManifest() *Manifest {
	return &Manifest{
		Namespaces:      map[string]*corev1.Namespace{},
		ServiceAccounts: map[string]*corev1.ServiceAccount{},
		ConfigMaps:      map[string]*corev1.ConfigMap{},
		Secrets:         map[string]*corev1.Secret{},
		Services:        map[string]*corev1.Service{},
		PVCs:            map[string]*corev1.PersistentVolumeClaim{},
		Deployments:     map[string]*appsv1.Deployment{},
		StatefulSets:    map[string]*appsv1.StatefulSet{},
		PDBs:            map[string]*policyv1.PodDisruptionBudget{},
		HPAs:            map[string]*autoscalingv2.HorizontalPodAutoscaler{},
		NetworkPolicies: map[string]*networkingv1.NetworkPolicy{},
		ServiceMonitors: map[string]map[string]any{},
	}
}

// add decodes one object into its typed struct; unknown kinds and unknown
// fields are errors.
func (m *Manifest) add(apiVersion, kind, name string, data []byte) error {
	var err error
	switch apiVersion + " " + kind {
	case "v1 Namespace":
		err = put(m.Namespaces, name, data)
	case "v1 ServiceAccount":
		err = put(m.ServiceAccounts, name, data)
	case "v1 ConfigMap":
		err = put(m.ConfigMaps, name, data)
	case "v1 Secret":
		err = put(m.Secrets, name, data)
	case "v1 Service":
		err = put(m.Services, name, data)
	case "v1 PersistentVolumeClaim":
		err = put(m.PVCs, name, data)
	case "apps/v1 Deployment":
		err = put(m.Deployments, name, data)
	case "apps/v1 StatefulSet":
		err = put(m.StatefulSets, name, data)
	case "policy/v1 PodDisruptionBudget":
		err = put(m.PDBs, name, data)
	case "autoscaling/v2 HorizontalPodAutoscaler":
		err = put(m.HPAs, name, data)
	case "networking.k8s.io/v1 NetworkPolicy":
		err = put(m.NetworkPolicies, name, data)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		var obj map[string]any
		if err = json.Unmarshal(data, &obj); err == nil {
			err = checkServiceMonitor(obj)
		}
		if err == nil {
			if _, dup := m.ServiceMonitors[name]; dup {
				err = fmt.Errorf("duplicate object")
			}
			m.ServiceMonitors[name] = obj
		}
	default:
		err = fmt.Errorf("unexpected kind (add it to render.Manifest to validate it)")
	}
	if err != nil {
		return fmt.Errorf("%s %s (%s): %w", kind, name, apiVersion, err)
	}
	m.Objects++
	return nil
}

// put decodes data strictly into a new T and stores it under name.
func put[T any](into map[string]*T, name string, data []byte) error {
	if _, dup := into[name]; dup {
		return fmt.Errorf("duplicate object")
	}
	v := new(T)
	if err := DecodeStrict(data, v); err != nil {
		return err
	}
	into[name] = v
	return nil
}

// DecodeStrict decodes JSON into v, failing on unknown fields and trailing
// data.
func DecodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the object")
	}
	return nil
}

// ServiceMonitorFields lists the ServiceMonitor fields these manifests may
// use (monitoring.coreos.com/v1), as dotted paths; "[]" marks list items.
var ServiceMonitorFields = map[string]bool{
	"apiVersion": true, "kind": true,
	"metadata": true, "metadata.name": true, "metadata.namespace": true, "metadata.labels": true,
	"spec": true, "spec.selector": true, "spec.selector.matchLabels": true,
	"spec.namespaceSelector": true, "spec.namespaceSelector.matchNames": true,
	"spec.endpoints": true, "spec.endpoints[]": true,
	"spec.endpoints[].port": true, "spec.endpoints[].path": true,
	"spec.endpoints[].interval": true, "spec.endpoints[].scrapeTimeout": true,
	"spec.endpoints[].scheme": true, "spec.jobLabel": true,
}

// checkServiceMonitor refuses fields outside ServiceMonitorFields; label
// maps are free-form below their known path.
func checkServiceMonitor(obj map[string]any) error {
	var walk func(path string, v any) error
	walk = func(path string, v any) error {
		if path != "" && !ServiceMonitorFields[path] {
			return fmt.Errorf("unknown field %q", path)
		}
		switch path {
		case "metadata.labels", "spec.selector.matchLabels", "spec.namespaceSelector.matchNames":
			return nil
		}
		switch t := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				p := k
				if path != "" {
					p = path + "." + k
				}
				if err := walk(p, t[k]); err != nil {
					return err
				}
			}
		case []any:
			for _, item := range t {
				if err := walk(path+"[]", item); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk("", obj)
}

// CopyToMemory copies the directory tree at root into an in-memory file
// system under the same absolute path, so that a test can break one file
// and render without touching the disk.
func CopyToMemory(root string) (filesys.FileSystem, string, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, "", err
	}
	mem := filesys.MakeFsInMemory()
	err = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return mem.MkdirAll(p)
		}
		if filepath.Ext(p) == ".go" {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile(p, data)
	})
	if err != nil {
		return nil, "", err
	}
	return mem, abs, nil
}

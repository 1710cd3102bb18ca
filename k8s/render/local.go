package render

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ImageDirs maps directories baked into the image (Dockerfile) to the
// repository directories they are copied from.
var ImageDirs = map[string]string{
	"/usr/share/baagent/skills":    "examples/skills",
	"/usr/share/baagent/scenarios": "examples/scenarios",
	"/usr/share/baagent/agents":    "examples/agents",
	"/usr/share/baagent/data":      "examples/data",
	"/usr/share/baagent/config":    "examples/config",
}

// LocalOptions says where to lay out a container's file system.
type LocalOptions struct {
	// Dir receives one directory per volume mount.
	Dir string
	// RepoRoot resolves ImageDirs.
	RepoRoot string
	// ExternalSecrets supplies the data of Secrets that an overlay expects to
	// exist in the cluster but does not render.
	ExternalSecrets map[string]map[string]string
}

// Local is a container's view of its files, laid out in local directories.
type Local struct {
	// Mounts maps each mount path to its local directory.
	Mounts map[string]string
	// Writable lists the mount paths a container may write to.
	Writable map[string]bool
	image    map[string]string
}

// Materialize lays out the volumes that container c of pod mounts under
// opts.Dir: ConfigMap and Secret volumes are written out (honouring items),
// emptyDir and PersistentVolumeClaim volumes become empty writable
// directories. Every referenced ConfigMap, Secret and claim must exist.
func (m *Manifest) Materialize(pod *corev1.PodSpec, c *corev1.Container, opts LocalOptions) (*Local, error) {
	vols := map[string]*corev1.Volume{}
	for i := range pod.Volumes {
		vols[pod.Volumes[i].Name] = &pod.Volumes[i]
	}
	l := &Local{Mounts: map[string]string{}, Writable: map[string]bool{}, image: map[string]string{}}
	for img, repo := range ImageDirs {
		l.image[img] = filepath.Join(opts.RepoRoot, repo)
	}
	for i, vm := range c.VolumeMounts {
		v, ok := vols[vm.Name]
		if !ok {
			return nil, fmt.Errorf("container %s: volumeMount %s: no such volume", c.Name, vm.Name)
		}
		if vm.SubPath != "" || vm.SubPathExpr != "" {
			return nil, fmt.Errorf("container %s: volumeMount %s: subPath is not supported (a ConfigMap under subPath never updates)", c.Name, vm.Name)
		}
		dir := filepath.Join(opts.Dir, fmt.Sprintf("%02d-%s", i, vm.Name))
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, err
		}
		var files map[string][]byte
		switch {
		case v.ConfigMap != nil:
			cm, ok := m.ConfigMaps[v.ConfigMap.Name]
			if !ok {
				return nil, fmt.Errorf("volume %s: ConfigMap %s is not in the render", v.Name, v.ConfigMap.Name)
			}
			data := map[string][]byte{}
			for k, s := range cm.Data {
				data[k] = []byte(s)
			}
			for k, b := range cm.BinaryData {
				data[k] = b
			}
			var err error
			if files, err = project(data, v.ConfigMap.Items, "ConfigMap "+cm.Name); err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
		case v.Secret != nil:
			data, err := m.SecretData(v.Secret.SecretName, opts.ExternalSecrets)
			if err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			if files, err = project(data, v.Secret.Items, "Secret "+v.Secret.SecretName); err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
		case v.EmptyDir != nil:
			l.Writable[vm.MountPath] = !vm.ReadOnly
		case v.PersistentVolumeClaim != nil:
			if _, ok := m.PVCs[v.PersistentVolumeClaim.ClaimName]; !ok {
				return nil, fmt.Errorf("volume %s: PersistentVolumeClaim %s is not in the render", v.Name, v.PersistentVolumeClaim.ClaimName)
			}
			l.Writable[vm.MountPath] = !vm.ReadOnly && !v.PersistentVolumeClaim.ReadOnly
		default:
			return nil, fmt.Errorf("volume %s: unsupported volume type", v.Name)
		}
		for p, b := range files {
			full := filepath.Join(dir, filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(full), 0o750); err != nil {
				return nil, err
			}
			if err := os.WriteFile(full, b, 0o640); err != nil {
				return nil, err
			}
		}
		l.Mounts[vm.MountPath] = dir
	}
	return l, nil
}

// project returns the files a ConfigMap or Secret volume shows: every key
// under its own name, or exactly the listed items at their paths.
func project(data map[string][]byte, items []corev1.KeyToPath, what string) (map[string][]byte, error) {
	out := map[string][]byte{}
	if len(items) == 0 {
		for k, b := range data {
			out[k] = b
		}
		return out, nil
	}
	for _, it := range items {
		b, ok := data[it.Key]
		if !ok {
			return nil, fmt.Errorf("%s has no key %q", what, it.Key)
		}
		p := path.Clean(it.Path)
		if p != it.Path || path.IsAbs(p) || strings.HasPrefix(p, "..") {
			return nil, fmt.Errorf("%s: item path %q must be relative and clean", what, it.Path)
		}
		if _, dup := out[p]; dup {
			return nil, fmt.Errorf("%s: item path %q given twice", what, p)
		}
		out[p] = b
	}
	return out, nil
}

// SecretData returns a Secret's data (stringData over data, as the API
// server merges them), from the render or from external.
func (m *Manifest) SecretData(name string, external map[string]map[string]string) (map[string][]byte, error) {
	out := map[string][]byte{}
	if s, ok := m.Secrets[name]; ok {
		for k, b := range s.Data {
			out[k] = b
		}
		for k, v := range s.StringData {
			out[k] = []byte(v)
		}
		return out, nil
	}
	if ext, ok := external[name]; ok {
		for k, v := range ext {
			out[k] = []byte(v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("secret %s is neither in the render nor declared external", name)
}

// Env resolves a container's environment: literal values, ConfigMap and
// Secret keys. Downward API fields are left out (they name the pod).
func (m *Manifest) Env(c *corev1.Container, external map[string]map[string]string) (map[string]string, error) {
	if len(c.EnvFrom) > 0 {
		return nil, fmt.Errorf("container %s: envFrom hides which variables are set; list them under env", c.Name)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if _, dup := env[e.Name]; dup {
			return nil, fmt.Errorf("container %s: env %s set twice", c.Name, e.Name)
		}
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			cm, ok := m.ConfigMaps[ref.Name]
			if !ok {
				return nil, fmt.Errorf("env %s: ConfigMap %s is not in the render", e.Name, ref.Name)
			}
			v, ok := cm.Data[ref.Key]
			if !ok {
				return nil, fmt.Errorf("env %s: ConfigMap %s has no key %q", e.Name, ref.Name, ref.Key)
			}
			env[e.Name] = v
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			data, err := m.SecretData(ref.Name, external)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			v, ok := data[ref.Key]
			if !ok && ref.Optional != nil && *ref.Optional {
				continue // Kubernetes leaves the variable unset
			}
			if !ok {
				return nil, fmt.Errorf("env %s: Secret %s has no key %q", e.Name, ref.Name, ref.Key)
			}
			env[e.Name] = string(v)
		case e.ValueFrom.FieldRef != nil, e.ValueFrom.ResourceFieldRef != nil:
			env[e.Name] = "downward-api"
		default:
			return nil, fmt.Errorf("env %s: unsupported valueFrom", e.Name)
		}
	}
	return env, nil
}

// Path rewrites an absolute container path to its local directory: under
// the longest matching mount, else under an image directory. ok is false for
// a path that is neither (it would not exist in the container).
func (l *Local) Path(p string) (local string, ok bool) {
	best := ""
	for mp := range l.Mounts {
		if within(p, mp) && len(mp) > len(best) {
			best = mp
		}
	}
	if best != "" {
		return filepath.Join(l.Mounts[best], filepath.FromSlash(strings.TrimPrefix(p, best))), true
	}
	for img, dir := range l.image {
		if within(p, img) {
			return filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(p, img))), true
		}
	}
	return "", false
}

// IsWritable reports whether the container may write at p.
func (l *Local) IsWritable(p string) bool {
	for mp, w := range l.Writable {
		if w && within(p, mp) {
			return true
		}
	}
	return false
}

func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// SortedKeys returns m's keys in order.
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

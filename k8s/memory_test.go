package k8s_test

import (
	"fmt"
	"path"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/k8s/render"
)

// checkMemoryStore: the memory service's store fits its replicas. On
// SQLite (-memory-db) it is one replica, replaced rather than rolled (one
// writer), with the file on a persistent volume outside dev; on PostgreSQL
// the connection string comes from a Secret, never from the manifest, and
// nothing is written to a SQLite file.
func checkMemoryStore(t *testing.T, m *render.Manifest, o overlay) []error {
	d, ok := m.Deployments[config.TargetMemory]
	if !ok || len(d.Spec.Template.Spec.Containers) != 1 {
		return nil // reported by checkWorkloads
	}
	c := d.Spec.Template.Spec.Containers[0]
	var errs []error
	flags, err := containerFlags(c)
	if err != nil {
		return nil // reported by checkFlags
	}
	if _, inArgs := flags["memory-postgres-url"]; inArgs {
		errs = append(errs, fmt.Errorf("Deployment memory: -memory-postgres-url in args (it holds a password): take it from a Secret as BAAGENT_MEMORY_POSTGRES_URL"))
	}
	fromSecret := false
	for _, e := range c.Env {
		if e.Name != "BAAGENT_MEMORY_POSTGRES_URL" {
			continue
		}
		if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			errs = append(errs, fmt.Errorf("Deployment memory: BAAGENT_MEMORY_POSTGRES_URL must come from a secretKeyRef (it holds a password)"))
		}
		fromSecret = true
	}
	l, err := loadContainer(t, m, o, &d.Spec.Template.Spec, c)
	if err != nil {
		return errs // reported by checkFlags
	}
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	if l.cfg.Memory.PostgresURL != "" {
		if !fromSecret {
			errs = append(errs, fmt.Errorf("Deployment memory: the PostgreSQL URL does not come from a Secret"))
		}
		if _, set := flags["memory-db"]; set {
			errs = append(errs, fmt.Errorf("Deployment memory: sets -memory-db although PostgreSQL (-memory-postgres-url) is used"))
		}
		if !o.dev && replicas < 2 {
			errs = append(errs, fmt.Errorf("Deployment memory: on PostgreSQL, run at least 2 replicas, got %d", replicas))
		}
		return errs
	}
	if replicas != 1 {
		errs = append(errs, fmt.Errorf("Deployment memory: on SQLite (-memory-db) it must run 1 replica (one writer), got %d", replicas))
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		errs = append(errs, fmt.Errorf("Deployment memory: on SQLite the strategy must be Recreate, so two pods never open the file, got %q", d.Spec.Strategy.Type))
	}
	db, ok := flags["memory-db"]
	if !ok {
		return append(errs, fmt.Errorf("Deployment memory: no -memory-db (the default under -data-dir is an emptyDir)"))
	}
	vol := volumeAt(d.Spec.Template.Spec, c, path.Dir(db))
	switch {
	case vol == nil:
		errs = append(errs, fmt.Errorf("Deployment memory: -memory-db=%s is on no volume", db))
	case o.dev && vol.EmptyDir == nil && vol.PersistentVolumeClaim == nil:
		errs = append(errs, fmt.Errorf("Deployment memory: -memory-db=%s: volume %s is neither an emptyDir nor a claim", db, vol.Name))
	case !o.dev && vol.PersistentVolumeClaim == nil:
		errs = append(errs, fmt.Errorf("Deployment memory: -memory-db=%s: volume %s must be a PersistentVolumeClaim (the graph must survive the pod)", db, vol.Name))
	case !o.dev:
		pvc, ok := m.PVCs[vol.PersistentVolumeClaim.ClaimName]
		if !ok {
			errs = append(errs, fmt.Errorf("Deployment memory: claim %s is not in the render", vol.PersistentVolumeClaim.ClaimName))
		} else if len(pvc.Spec.AccessModes) != 1 || pvc.Spec.AccessModes[0] != corev1.ReadWriteOnce {
			errs = append(errs, fmt.Errorf("PersistentVolumeClaim %s: want ReadWriteOnce (SQLite needs a local file system, one writer)", pvc.Name))
		}
	}
	return errs
}

// volumeAt is the volume the container mounts at dir or above it.
func volumeAt(pod corev1.PodSpec, c corev1.Container, dir string) *corev1.Volume {
	best, bestPath := "", ""
	for _, vm := range c.VolumeMounts {
		if (dir == vm.MountPath || strings.HasPrefix(dir, strings.TrimSuffix(vm.MountPath, "/")+"/")) && len(vm.MountPath) > len(bestPath) {
			best, bestPath = vm.Name, vm.MountPath
		}
	}
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == best {
			return &pod.Volumes[i]
		}
	}
	return nil
}

package k8s_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/baagent/baagent/k8s/render"
)

// TestBrokenManifestsFail breaks one thing at a time in an in-memory copy of
// k8s/ and checks that the validation names it.
func TestBrokenManifestsFail(t *testing.T) {
	cases := []struct {
		name      string
		file      string // under k8s/
		old, new  string
		overlay   string // default dev
		renderErr string // the render itself must fail with this
		want      string // else a violation containing this
	}{
		{name: "misspelt flag", file: "base/tokens.yaml",
			old: "- -tokens-listen=:7705", new: "- -tokens-listn=:7705",
			want: "Deployment tokens: the binary refuses the settings"},
		{name: "invalid flag value", file: "base/skills.yaml",
			old: "- -shutdown-timeout=10s", new: "- -shutdown-timeout=ten",
			want: "Deployment skills: the binary refuses the settings"},
		{name: "misspelt environment variable", file: "base/orchestrator.yaml",
			old: "- name: BAAGENT_MODEL_BASE_URL", new: "- name: BAAGENT_MODEL_BASEURL",
			want: "Deployment orchestrator: the binary refuses the environment"},
		{name: "environment variable the binary ignores", file: "base/context.yaml",
			old: "- name: BAAGENT_MODEL_BASE_URL", new: "- name: MODEL_BASE_URL",
			want: "env MODEL_BASE_URL: not read by the binary"},
		{name: "unknown field", file: "base/tokens.yaml",
			old: "readOnlyRootFilesystem: true", new: "readOnlyRootFilesytem: true",
			renderErr: `unknown field "readOnlyRootFilesytem"`},
		{name: "unknown ServiceMonitor field", file: "base/servicemonitor.yaml",
			old: "interval: 30s", new: "intervall: 30s",
			renderErr: `unknown field "spec.endpoints[].intervall"`},
		{name: "writable root filesystem", file: "base/gateway.yaml",
			old: "readOnlyRootFilesystem: true", new: "readOnlyRootFilesystem: false",
			want: "Deployment gateway container gateway: readOnlyRootFilesystem must be true"},
		{name: "capability kept", file: "base/context.yaml",
			old: "capabilities: {drop: [ALL]}", new: "capabilities: {drop: [ALL], add: [NET_ADMIN]}",
			want: "Deployment context container context: capabilities must drop ALL"},
		{name: "no liveness probe", file: "base/skills.yaml",
			old: "livenessProbe:", new: "lifenessProbeRemoved: null\n          x:",
			renderErr: "unknown field"},
		{name: "HTTP probe instead of gRPC", file: "base/tokens.yaml",
			old: "grpc: {port: 7705, service: baagent.v1.TokensService}", new: "tcpSocket: {port: 7705}",
			want: "Deployment tokens container tokens: readinessProbe must be a native gRPC probe"},
		{name: "probe on the wrong port", file: "base/orchestrator.yaml",
			old: "startupProbe:\n            grpc: {port: 7701}", new: "startupProbe:\n            grpc: {port: 9090}",
			want: "startupProbe probes port 9090, want the container's grpc port 7701"},
		{name: "no memory limit", file: "base/toolrunner.yaml",
			old: `limits: {cpu: "2", memory: 2Gi}`, new: `limits: {cpu: "2"}`,
			want: "Deployment toolrunner container toolrunner: resources must request and limit memory"},
		{name: "listen port is not the container port", file: "base/context.yaml",
			old: "- -context-listen=:7704", new: "- -context-listen=:7714",
			want: "Deployment context: listens on :7714 for grpc"},
		{name: "Service port targets no container port", file: "base/tokens.yaml",
			old: "- {name: grpc, port: 7705, targetPort: grpc,", new: "- {name: grpc, port: 7705, targetPort: grcp,",
			want: "Service tokens: port grpc (7705) targets grcp"},
		{name: "peer address resolves to no Service", file: "base/context.yaml",
			old: "- -tokens-addr=tokens:7705", new: "- -tokens-addr=token:7705",
			want: "Deployment context: -tokens-addr=token:7705: no Service token in the render"},
		{name: "peer address on the wrong port", file: "base/orchestrator.yaml",
			old: "- -skills-addr=skills:7703", new: "- -skills-addr=skills:7704",
			want: "Service skills has no port 7704"},
		{name: "peer not configured", file: "base/skills.yaml",
			old: "- -tokens-addr=tokens:7705", new: "- -max-msg-bytes=16777216",
			want: "Deployment skills: dials tokens but does not set -tokens-addr"},
		{name: "NATS URL of a service without NATS", file: "base/tokens.yaml",
			old: "- -target=tokens\n", new: "- -target=tokens\n            - -nats-url=nats://nats:4222\n",
			want: "Deployment tokens: sets -nats-url but does not use NATS"},
		{name: "writable directory on the read-only root", file: "base/toolrunner.yaml",
			old: "- -artifact-dir=/var/lib/baagent-tools/artifacts", new: "- -artifact-dir=/srv/artifacts",
			want: "setting artifact-dir=/srv/artifacts: not on a mounted volume"},
		{name: "writable directory on a read-only mount", file: "base/toolrunner.yaml",
			old: "- {name: tool-data, mountPath: /var/lib/baagent-tools}", new: "- {name: tool-data, mountPath: /var/lib/baagent-tools, readOnly: true}",
			want: "written by the process but not on a writable volume"},
		{name: "edge missing from the NetworkPolicies", file: "base/networkpolicies.yaml",
			old:  "            matchLabels: {app.kubernetes.io/name: baagent, app.kubernetes.io/component: context}\n        - podSelector:\n            matchLabels: {app.kubernetes.io/name: baagent, app.kubernetes.io/component: skills}",
			new:  "            matchLabels: {app.kubernetes.io/name: baagent, app.kubernetes.io/component: skills}",
			want: "NetworkPolicy does not allow the edge context -> tokens:grpc"},
		{name: "NetworkPolicy allows a non-edge", file: "base/networkpolicies.yaml",
			old:  "  name: context-ingress\nspec:\n  podSelector:\n    matchLabels: {app.kubernetes.io/name: baagent, app.kubernetes.io/component: context}\n  policyTypes: [Ingress]\n  ingress:\n    - from:\n",
			new:  "  name: context-ingress\nspec:\n  podSelector:\n    matchLabels: {app.kubernetes.io/name: baagent, app.kubernetes.io/component: context}\n  policyTypes: [Ingress]\n  ingress:\n    - from:\n        - podSelector:\n            matchLabels: {app.kubernetes.io/component: toolrunner}\n",
			want: "NetworkPolicy allows toolrunner -> context:grpc, which is not an edge"},
		{name: "no default deny", file: "base/networkpolicies.yaml",
			old: "  name: default-deny-ingress\nspec:\n  podSelector: {}\n", new: "  name: default-deny-ingress\nspec:\n  podSelector: {matchLabels: {nobody: here}}\n",
			want: "no default-deny ingress NetworkPolicy"},
		{name: "destination without a policy", file: "base/networkpolicies.yaml",
			old: "  name: nats-ingress\nspec:\n  podSelector:\n    matchLabels: {app.kubernetes.io/name: nats,", new: "  name: nats-ingress\nspec:\n  podSelector:\n    matchLabels: {app.kubernetes.io/name: not-nats,",
			want: "NetworkPolicy does not allow the edge gateway -> nats:client"},
		{name: "replicas fight the HPA", file: "base/gateway.yaml",
			old: "  # No replicas: the HorizontalPodAutoscaler owns the count.\n", new: "  replicas: 2\n", overlay: "prod",
			want: "Deployment gateway: sets replicas although HorizontalPodAutoscaler gateway owns the count"},
		{name: "HPA scales a Deployment that does not exist", file: "base/toolrunner.yaml",
			old: "scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: toolrunner}", new: "scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: toolrunner-old}",
			overlay: "prod", want: "Deployment toolrunner: no HorizontalPodAutoscaler"},
		{name: "no PodDisruptionBudget", file: "base/skills.yaml",
			old:  "kind: PodDisruptionBudget\nmetadata:\n  name: skills\n  labels: {app.kubernetes.io/name: baagent, app.kubernetes.io/component: skills}\nspec:\n  maxUnavailable: 1\n  selector:\n    matchLabels: {app.kubernetes.io/name: baagent, app.kubernetes.io/component: skills}",
			new:  "kind: PodDisruptionBudget\nmetadata:\n  name: skills\nspec:\n  maxUnavailable: 1\n  selector:\n    matchLabels: {app.kubernetes.io/component: nobody}",
			want: "Deployment skills: covered by 0 PodDisruptionBudgets"},
		{name: "NATS cluster route missing", file: "base/config/nats.conf",
			old: "    nats://nats-2.nats-headless:6222\n", new: "", overlay: "prod",
			want: "StatefulSet nats: no route to nats-2.nats-headless:6222"},
		{name: "NATS JetStream off the volume", file: "overlays/dev/nats.conf",
			old: "store_dir: /data ", new: "store_dir: /tmp/jetstream ",
			want: "JetStream must be enabled with store_dir under /data"},
		{name: "NATS option the server refuses", file: "overlays/dev/nats.conf",
			old: "lame_duck_duration: 30s", new: "lame_duck_duration: 5s",
			want: "the NATS server refuses its config"},
		{name: "invalid tools.yaml", file: "base/config/tools.yaml",
			old: "    timeout: 2m\n", new: "    timout: 2m\n",
			want: "toolrunner: tools file"},
		{name: "invalid token_encoders.yaml", file: "base/config/token_encoders.yaml",
			old: "encoders: {}", new: "encoders: {bad-model: {encoding_name: nope}}",
			want: "tokens:"},
		{name: "skills ConfigMap out of date", file: "base/skills/sales-analysis/SKILL.md",
			old: "# Sales analysis", new: "# Sales analysis (edited)",
			want: "skills ConfigMap differs from examples/skills"},
		{name: "skill file not mounted", file: "base/skills.yaml",
			old: "{key: sales-analysis--references--schema.md, path: sales-analysis/references/schema.md}", new: "{key: sales-analysis--SKILL.md, path: sales-analysis/references/renamed.md}",
			want: "sales-analysis/references/schema.md is missing"},
		{name: "SQLite memory rolled instead of replaced", file: "base/memory.yaml",
			old: "type: Recreate", new: "type: RollingUpdate",
			want: "Deployment memory: on SQLite the strategy must be Recreate"},
		{name: "PostgreSQL URL written in the manifest", file: "overlays/prod/memory-postgres.yaml",
			old: "valueFrom: {secretKeyRef: {name: baagent-secrets, key: memory-postgres-url}}", new: "value: postgres://baagent:pw@postgres:5432/baagent",
			overlay: "prod", want: "BAAGENT_MEMORY_POSTGRES_URL must come from a secretKeyRef"},
		{name: "memory address without a Service", file: "base/toolrunner.yaml",
			old: "- -memory-addr=memory:7706", new: "- -memory-addr=memroy:7706",
			want: "Deployment toolrunner: -memory-addr=memroy:7706: no Service memroy in the render"},
		{name: "latest image", file: "overlays/prod/kustomization.yaml",
			old: `newTag: "0.1.0"`, new: `newTag: latest`, overlay: "prod",
			want: "must be pinned to a tag or digest"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := overlays[0]
			if tc.overlay == "prod" {
				o = overlays[1]
			}
			fsys, root, err := render.CopyToMemory(".")
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(root, filepath.FromSlash(tc.file))
			data, err := fsys.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(data), tc.old); n != 1 {
				t.Fatalf("%s: the text to break occurs %d times, want once", tc.file, n)
			}
			if err := fsys.WriteFile(p, []byte(strings.Replace(string(data), tc.old, tc.new, 1))); err != nil {
				t.Fatal(err)
			}
			m, err := render.Render(fsys, filepath.Join(root, "overlays", o.name))
			if tc.renderErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.renderErr) {
					t.Fatalf("render error %v, want one containing %q", err, tc.renderErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			errs := check(t, m, o)
			if !hasError(errs, tc.want) {
				t.Fatalf("no violation containing %q; got:\n%v", tc.want, joinErrors(errs))
			}
		})
	}
}

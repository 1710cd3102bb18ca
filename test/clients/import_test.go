package clients

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryGeneratedModuleImports imports every generated module of both
// clients as a program would, without any hand edit (the examples import
// only a few): one per proto file, messages and gRPC stubs.
func TestEveryGeneratedModuleImports(t *testing.T) {
	protos, err := filepath.Glob("../../proto/baagent/v1/*.proto")
	if err != nil || len(protos) == 0 {
		t.Fatalf("no protos: %v", err)
	}
	var names []string
	for _, p := range protos {
		names = append(names, strings.TrimSuffix(filepath.Base(p), ".proto"))
	}

	t.Run("python", func(t *testing.T) {
		if err := exec.Command(python, "-c", "import grpc, google.protobuf").Run(); err != nil {
			missing(t, python+" with grpc and protobuf (apt-get install -y python3-grpcio python3-protobuf)")
		}
		var script strings.Builder
		script.WriteString("import importlib\n")
		for _, n := range names {
			for _, mod := range []string{n + "_pb2", n + "_pb2_grpc"} {
				script.WriteString("importlib.import_module('baagent.v1." + mod + "')\n")
			}
		}
		script.WriteString("print('imported')\n")
		cmd := exec.Command(python, "-c", script.String())
		cmd.Env = append(os.Environ(), "PYTHONPATH=../../clients/python")
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "imported" {
			t.Fatalf("python imports: %v\n%s", err, out)
		}
	})

	t.Run("typescript", func(t *testing.T) {
		node, err := exec.LookPath("node")
		if err != nil {
			missing(t, "node")
		}
		const pkg = "../../clients/typescript"
		if _, err := os.Stat(filepath.Join(pkg, "node_modules", "@bufbuild", "protobuf", "package.json")); err != nil {
			missing(t, "clients/typescript/node_modules (npm ci --prefix clients/typescript)")
		}
		// Imported by the package's own name (its exports map), as a
		// dependent project would, from inside the package.
		var script strings.Builder
		for _, n := range names {
			script.WriteString("await import('@baagent/client/baagent/v1/" + n + "_pb');\n")
		}
		script.WriteString("console.log('imported');\n")
		cmd := exec.Command(node, "--input-type=module", "-e", script.String())
		cmd.Dir = pkg
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "imported" {
			t.Fatalf("node imports: %v\n%s", err, out)
		}
	})
}

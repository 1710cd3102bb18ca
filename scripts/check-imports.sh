#!/usr/bin/env bash
# Checks the repository's import rules on the transitive dependencies of every
# non-test package (`go list` Deps). depguard (.golangci.yml) checks the same
# rules on direct imports, with file and line; this catches a forbidden
# package pulled in through another one, e.g. the NATS server linked into the
# CLI by way of a package the CLI imports.
#
#   internal/...       depends on no services/... and no cmd/...
#   cmd/baagentctl/... depends on neither services/orchestrator (the package
#                      itself), internal/config nor github.com/nats-io/nats-server
#   services/X/...     depends on no services/Y/... for Y != X
#
# Exits 1 and lists the offending packages with one forbidden dependency each
# (per service, for the services rules).
set -euo pipefail
cd "$(dirname "$0")/.."

mod=github.com/baagent/baagent

go list -f '{{.ImportPath}}{{range .Deps}} {{.}}{{end}}' ./... | awk -v mod="$mod" '
function svc(p,   rest) {
	# The service a package belongs to, or "" when it is not under services/.
	if (index(p, mod "/services/") != 1) return ""
	rest = substr(p, length(mod "/services/") + 1)
	sub(/\/.*/, "", rest)
	return rest
}
function bad(pkg, dep, why) {
	printf "%s depends on %s: %s\n", substr(pkg, length(mod) + 2), dep, why
	n++
}
{
	pkg = $1
	internal = (pkg == mod "/internal" || index(pkg, mod "/internal/") == 1)
	cli = (pkg == mod "/cmd/baagentctl" || index(pkg, mod "/cmd/baagentctl/") == 1)
	own = svc(pkg)
	for (i = 2; i <= NF; i++) {
		d = $i
		# One line per offending service or main, not per package of it.
		if (internal && index(d, mod "/services/") == 1 && !seen[pkg, svc(d)]++)
			bad(pkg, d, "internal/ must not depend on a service")
		if (internal && index(d, mod "/cmd/") == 1)
			bad(pkg, d, "internal/ must not depend on a main")
		if (cli) {
			if (d == mod "/services/orchestrator" || d == mod "/internal/config")
				bad(pkg, d, "the CLI must not link the server side")
			else if (index(d, "github.com/nats-io/nats-server/") == 1 && !seen[pkg, "nats"]++)
				bad(pkg, d, "the CLI must not link the NATS server")
		}
		if (own != "") {
			other = svc(d)
			if (other != "" && other != own && !seen[pkg, other]++)
				bad(pkg, d, "services talk over gRPC, not through each other'"'"'s packages")
		}
	}
}
END {
	if (n > 0) {
		printf "%d import rule violation(s)\n", n
		exit 1
	}
}'

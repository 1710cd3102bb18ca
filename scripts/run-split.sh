#!/usr/bin/env bash
# Microservices mode on this machine (`make run-split`): builds bin/baagent,
# bin/baagentctl and bin/nats-server (from the nats-server module in go.mod),
# then starts NATS and each service as its own `baagent -target=<service>`
# process with the flags of k8s/overlays/dev, rewritten to loopback. Ctrl-C
# stops them all (SIGTERM) and checks that each exits 0.
# Extra arguments go to the launcher, e.g. scripts/run-split.sh -quiet.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
mkdir -p bin data/split
"$GO" build -trimpath -o bin/ ./cmd/baagent ./cmd/baagentctl
"$GO" build -trimpath -o bin/nats-server github.com/nats-io/nats-server/v2
"$GO" build -trimpath -o bin/run-split ./scripts/run-split
exec bin/run-split -repo . -baagent bin/baagent -nats-server bin/nats-server -dir data/split "$@"

#!/usr/bin/env bash
# Microservices mode on this machine (`make run-split`): builds baagent,
# baagentctl and nats-server (from the nats-server module in go.mod) into
# $BIN (default ./bin), then starts NATS and each service as its own
# `baagent -target=<service>` process with the flags of k8s/overlays/dev,
# rewritten to loopback: on the ports of `make run` where they are free, on
# free ports for all with RUN_SPLIT_PORTS=random. It prints commands that
# reach the suite as printed. Ctrl-C stops them all (SIGTERM) and checks that
# each exits 0.
# Extra arguments go to the launcher, e.g. scripts/run-split.sh -quiet.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
BIN=${BIN:-./bin}
mkdir -p "$BIN" data/split
"$GO" build -trimpath -o "$BIN/" ./cmd/baagent ./cmd/baagentctl
"$GO" build -trimpath -o "$BIN/nats-server" github.com/nats-io/nats-server/v2
"$GO" build -trimpath -o "$BIN/run-split" ./scripts/run-split
exec "$BIN/run-split" -repo . -baagent "$BIN/baagent" -nats-server "$BIN/nats-server" \
	-baagentctl "$BIN/baagentctl" -dir data/split "$@"

# syntax=docker/dockerfile:1
# The BA-Agent server image: static `baagent` and `baagentctl` on a
# distroless base, running as a non-root user, with the sample skills,
# scenarios (scripted model), datasets and config files under
# /usr/share/baagent. k8s/ deploys it one service per Deployment
# (-target=<service>); with no arguments it runs -target=all.
#
#   docker build -t baagent:dev .
#   docker build --build-arg VERSION="$(git describe --tags --always)" -t <registry>/baagent:<tag> .

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/baagent/baagent/internal/buildinfo.version=${VERSION}" \
      -o /out/bin/ ./cmd/baagent ./cmd/baagentctl \
 && mkdir -p /out/state

# distroless/static: CA certificates and tzdata, no shell, no package manager;
# the :nonroot tag runs as uid/gid 65532.
FROM gcr.io/distroless/static-debian13:nonroot
COPY --from=build /out/bin/baagent /out/bin/baagentctl /usr/local/bin/
COPY examples/skills /usr/share/baagent/skills
COPY examples/scenarios /usr/share/baagent/scenarios
COPY examples/agents /usr/share/baagent/agents
COPY examples/data /usr/share/baagent/data
COPY examples/config /usr/share/baagent/config
# The default -data-dir, writable by the non-root user (Kubernetes mounts a
# volume here; the root filesystem is read-only there).
COPY --from=build --chown=65532:65532 /out/state /var/lib/baagent
ENV BAAGENT_DATA_DIR=/var/lib/baagent \
    BAAGENT_SKILLS_DIR=/usr/share/baagent/skills \
    BAAGENT_SCENARIOS_DIR=/usr/share/baagent/scenarios \
    BAAGENT_SUBAGENTS_DIR=/usr/share/baagent/agents \
    BAAGENT_WORKSPACE_SEED_DIR=/usr/share/baagent/data
USER 65532:65532
WORKDIR /var/lib/baagent
# gRPC: gateway 7700, orchestrator 7701, toolrunner 7702, skills 7703,
# context 7704, tokens 7705; gateway HTTP 7780; Prometheus metrics 9090.
EXPOSE 7700 7701 7702 7703 7704 7705 7780 9090
ENTRYPOINT ["/usr/local/bin/baagent"]

# syntax=docker/dockerfile:1
# Build: a static binary (no cgo), templ output is committed so no generate step.
# .dockerignore keeps .git, local databases and build outputs out of the context.
# deploy_test.go builds and runs what this file describes; teach it any new instruction.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/handoff . && mkdir -p /out/data

# Run: distroless static, non-root (uid 65532, the image's "nonroot"), data on a volume.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/handoff /usr/local/bin/handoff
# /data exists in the image, owned by the user handoff runs as: Docker gives a
# new, empty named volume the owner and mode of the folder it is mounted on,
# so the first start can create handoff.db there (a folder that does not exist
# in the image becomes a root-owned volume: "permission denied", exit 1).
COPY --from=build --chown=65532:65532 /out/data /data
# The environment wins over --data/--addr and the file's data_dir/addr; the
# start log says which source set each (see README, "Configuration").
ENV HANDOFF_DATA=/data HANDOFF_ADDR=0.0.0.0:8080
# The Go heap's soft limit (the GC works harder near it instead of growing);
# -e GOMEMLIMIT=… overrides it, about half the container's memory limit.
# Without the variable the binary sets the same itself (limits.memory).
ENV GOMEMLIMIT=512MiB
VOLUME ["/data"]
EXPOSE 8080
# Numeric, so that Kubernetes' runAsNonRoot can check it.
USER 65532:65532
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/handoff", "health", "--addr", "127.0.0.1:8080"]
# SIGTERM (docker stop's signal) stops HTTP (3 s), drains the workers (5 s),
# cancels and releases the rest and closes the database: inside docker stop's
# 10 s before its SIGKILL.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/handoff"]
CMD ["serve"]

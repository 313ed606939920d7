# syntax=docker/dockerfile:1
# Build: a static binary (no cgo), templ output is committed so no generate step.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/handoff .

# Run: distroless static, non-root (uid 65532), data on a volume.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/handoff /usr/local/bin/handoff
ENV HANDOFF_DATA=/data HANDOFF_ADDR=0.0.0.0:8080
VOLUME ["/data"]
EXPOSE 8080
USER nonroot:nonroot
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/handoff", "health", "--addr", "127.0.0.1:8080"]
ENTRYPOINT ["/usr/local/bin/handoff"]
CMD ["serve"]

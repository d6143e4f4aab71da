# syntax=docker/dockerfile:1
# The scheduler image: a static binary on distroless, running as a non-root user. The binary
# is the same build as `make release` makes (scripts/release.sh: the same flags and ldflags);
# the build context has no .git, so the version, commit and date come as build arguments:
#   docker build -t scheduler:local \
#     --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg COMMIT=$(git rev-parse HEAD) \
#     --build-arg DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ) .
# `docker buildx build --platform linux/amd64,linux/arm64` cross-compiles for each platform on
# the build machine's own, as release.sh does.

FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS build
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS TARGETARCH
ARG VERSION=dev
ARG COMMIT=
ARG DATE=
# timetzdata embeds the IANA zone database in the binary: the jobs compute local dates and
# drop times in every group's zone, and must not depend on the base image carrying tzdata.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -buildvcs=false -tags timetzdata \
      -ldflags="-s -w -X main.version=${VERSION} -X main.commit=${COMMIT} -X main.date=${DATE}" \
      -o /scheduler ./cmd/scheduler

# static-debian12 has CA certificates (TLS to PostgreSQL), tzdata, and the nonroot user
# (uid 65532); no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /scheduler /scheduler
USER nonroot:nonroot
# Inside a container loopback is unreachable from outside, so listen on all interfaces;
# the configuration then requires SCHEDULER_API_TOKEN.
ENV SCHEDULER_HTTP_ADDR=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["/scheduler"]
CMD ["serve"]

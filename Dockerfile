# syntax=docker/dockerfile:1
# The scheduler image: a static binary on distroless, running as a non-root user.
#   docker build -t scheduler:local --build-arg VERSION=$(git describe --always --dirty) .

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
# timetzdata embeds the IANA zone database in the binary: the jobs compute local dates and
# drop times in every group's zone, and must not depend on the base image carrying tzdata.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -tags timetzdata \
      -ldflags="-s -w -X main.version=${VERSION}" -o /scheduler ./cmd/scheduler

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

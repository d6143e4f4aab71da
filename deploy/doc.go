// Package deploy holds the files that run the scheduler outside a developer's shell:
// Prometheus rules and configuration (prometheus/), Kubernetes examples (k8s/), a Helm chart
// (helm/scheduler, rendered by the tools module's helmtest), and, at the
// repository root, the Dockerfile and docker-compose.yml. It has no code; its tests check
// those files offline with promtool and by reading the manifests, since no container engine
// or cluster is available where the tests run.
package deploy

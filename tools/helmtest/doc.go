// Package helmtest renders deploy/helm/scheduler with the Helm SDK and checks what it renders
// against the Kubernetes API types. It lives in the tools module so that the product's go.mod
// does not carry Helm and client-go, which only this test needs.
package helmtest

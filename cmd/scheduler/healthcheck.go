package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/schedulerhq/scheduler/internal/config"
)

// healthcheck asks the replica on this host for /readyz. Container images without curl
// (distroless) use it as their health check.
func healthcheck(environ []string, stderr io.Writer) int {
	addr := config.NewEnv(environ).String("SCHEDULER_HTTP_ADDR", "127.0.0.1:8080")
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		fmt.Fprintf(stderr, "scheduler: healthcheck: SCHEDULER_HTTP_ADDR=%q is not host:port\n", addr)
		return exitUsage
	}
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://127.0.0.1:" + port + "/readyz")
	if err != nil {
		fmt.Fprintln(stderr, "scheduler: healthcheck:", err)
		return exitFailure
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintln(stderr, "scheduler: healthcheck: not ready:", resp.Status)
		return exitFailure
	}
	return exitOK
}

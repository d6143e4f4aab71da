package deploy_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/metrics"
)

// promtool returns the path of promtool, installed by scripts/promtool.sh when missing.
// Without apt (not root, no sudo) the test is skipped with the script's explanation.
func promtool(t *testing.T) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command("../scripts/promtool.sh")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("promtool unavailable, cannot check Prometheus files: %v: %s", err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

func runPromtool(t *testing.T, stdin []byte, args ...string) {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
}

func TestAlertRulesAreValid(t *testing.T) {
	runPromtool(t, nil, "check", "rules", "prometheus/alerts.yml")
}

// TestAlertsFireWhenTheyShould runs alerts_test.yml: each alert fires on the series that
// describe its incident, and stays quiet on the healthy, paused, disabled and transient cases.
func TestAlertsFireWhenTheyShould(t *testing.T) {
	runPromtool(t, nil, "test", "rules", "prometheus/alerts_test.yml")
}

func TestPrometheusConfigIsValid(t *testing.T) {
	runPromtool(t, nil, "check", "config", "prometheus/prometheus.yml")
}

// exercisedExposition is what a replica that has done a bit of everything serves on /metrics.
func exercisedExposition(t *testing.T) []byte {
	t.Helper()
	m := metrics.New()
	m.SetInstanceID("scheduler-1")
	m.SetLeader(true, 2)
	m.SteppedDown("lock_lost")
	m.SetLeader(true, 3)
	m.Elected(0.05)
	m.SetJobPeriod("plan-change", 24*time.Hour)
	m.SetJobPaused("plan-change", false)
	m.SetLastSuccess("plan-change", time.Now().Add(-time.Hour))
	m.RunStarted("plan-change", "schedule", 20*time.Millisecond)
	m.Entities("plan-change", 10, 7, 2, 1)
	m.RunFinished("plan-change", "succeeded", "schedule", 3*time.Second)
	m.RunRecorded("plan-change", "missed", "catch-up")
	m.LockAcquired("leader_row", 2*time.Millisecond)
	m.IdempotencyReplay()
	m.IdempotencyConflict()
	m.TargetCall("billing.internal", "2xx", 20*time.Millisecond)
	m.TargetCall("billing.internal", "error", time.Second)
	m.ExportCallsWaiting(func() int64 { return 3 })
	m.ExportPartitions(func(context.Context) (int, map[int]int64, error) { return 1, map[int]int64{1: 2, 2: 0}, nil })
	m.SlotsUnrecorded("plan-change", 1)
	m.NotificationSent("failed", "slack")
	m.NotificationFailed("failed", "webhook")

	m.HTTPRequest("/v1/jobs/{name}", http.MethodGet, http.StatusOK, 3*time.Millisecond)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	return rec.Body.Bytes()
}

// TestMetricsExpositionPassesPromtool lints /metrics as Prometheus' own tool does: names,
// units, _total suffixes, help texts.
func TestMetricsExpositionPassesPromtool(t *testing.T) {
	runPromtool(t, exercisedExposition(t), "check", "metrics")
}

// TestAlertsUseExportedMetrics catches a metric renamed in internal/metrics but not in the
// rules, which would leave an alert silently evaluating nothing.
func TestAlertsUseExportedMetrics(t *testing.T) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(exercisedExposition(t)))
	require.NoError(t, err)

	rules, err := os.ReadFile("prometheus/alerts.yml")
	require.NoError(t, err)
	used := regexp.MustCompile(`\bscheduler_[a-z_]+`).FindAllString(string(rules), -1)
	require.NotEmpty(t, used)
	for _, name := range slices.Compact(slices.Sorted(slices.Values(used))) {
		family := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && families[base] != nil {
				family = base
			}
		}
		assert.NotNil(t, families[family], "alerts.yml uses %s, which internal/metrics does not export", name)
	}
}

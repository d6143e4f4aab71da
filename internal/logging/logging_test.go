package logging_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/logging"
)

// syncBuffer lets several goroutines log into one buffer, as a run's goroutines do on stdout.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestEveryLineOfARunCarriesItsIdentity(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	base := logging.ForInstance(logging.New(&out, slog.LevelDebug, logging.FormatJSON), "scheduler-2")

	runLog := logging.ForRun(base, 4711, "plan-change", 9)
	// Everything a run does: its own lines, a child logger a job builds for one batch, a
	// grouped sub-logger, lines from concurrent goroutines, every level.
	runLog.Info("run started", "trigger", "schedule")
	batch := runLog.With("batch", 3)
	batch.Debug("batch selected", "rows", 500)
	runLog.WithGroup("stats").Warn("entity locked, skipped", "member_id", 17)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() { runLog.Error("entity failed", "worker", i, "error", errors.New("boom")) })
	}
	wg.Wait()
	runLog.Info("run finished", "status", "succeeded")
	// A line from another run in the same process keeps its own identity.
	logging.ForRun(base, 4712, "status-sync", 9).Info("run started")

	lines := jsonLines(t, out.String())
	require.Len(t, lines, 9)
	for i, line := range lines {
		want := map[string]any{"run_id": 4711.0, "job": "plan-change", "epoch": 9.0, "instance_id": "scheduler-2"}
		if i == len(lines)-1 {
			want = map[string]any{"run_id": 4712.0, "job": "status-sync", "epoch": 9.0, "instance_id": "scheduler-2"}
		}
		for key, v := range want {
			assert.Equal(t, v, line[key], "line %d (%v): %s", i, line["msg"], key)
		}
	}
	// Each key appears once per line: a JSON object with a repeated key would still decode,
	// so count the raw occurrences.
	for _, raw := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		for _, key := range []string{`"run_id":`, `"job":`, `"epoch":`, `"instance_id":`} {
			assert.Equal(t, 1, strings.Count(raw, key), "%s in %s", key, raw)
		}
	}
}

func TestNewHonoursLevelAndFormat(t *testing.T) {
	t.Parallel()
	var jsonOut, textOut bytes.Buffer
	logging.New(&jsonOut, slog.LevelInfo, logging.FormatJSON).Debug("hidden")
	logging.New(&jsonOut, slog.LevelInfo, logging.FormatJSON).Info("shown", "k", "v")
	lines := jsonLines(t, jsonOut.String())
	require.Len(t, lines, 1, "debug is below info")
	assert.Equal(t, "shown", lines[0]["msg"])

	logging.ForRun(logging.New(&textOut, slog.LevelInfo, logging.FormatText), 5, "rounds-open", 2).Info("opened")
	assert.Contains(t, textOut.String(), "run_id=5 job=rounds-open epoch=2")
	assert.Contains(t, textOut.String(), "msg=opened")
	assert.False(t, strings.HasPrefix(textOut.String(), "{"))
}

func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		var line map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line), "not a JSON line: %s", sc.Text())
		lines = append(lines, line)
	}
	require.NoError(t, sc.Err())
	return lines
}

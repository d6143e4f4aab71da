package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/logging"
)

// The log sender is built once, with the replica's logger, but what it logs during a run
// must carry that run's run_id: it logs through the run logger found in the context.
func TestLogSenderLogsWithTheRunsLogger(t *testing.T) {
	var replicaOut, runOut bytes.Buffer
	sender := NewLogSender(slog.New(slog.NewJSONHandler(&replicaOut, nil)))
	runLog := logging.ForRun(slog.New(slog.NewJSONHandler(&runOut, nil)), 42, "abandon-recovery", 7)

	_, err := sender.Send(logging.NewContext(context.Background(), runLog), Message{DeliveryID: 1, To: "a@example.com"})
	require.NoError(t, err)

	assert.Empty(t, replicaOut.String(), "a run's message went to the replica logger")
	var line map[string]any
	require.NoError(t, json.Unmarshal(runOut.Bytes(), &line))
	assert.EqualValues(t, 42, line["run_id"])
	assert.EqualValues(t, 1, line["delivery_id"])
}

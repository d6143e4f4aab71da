package api

import (
	"bytes"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/schedulerhq/scheduler/internal/store"
)

// A job's last run as the job list shows it, kept between requests: at 10 000 jobs,
// encoding every last run by reflection took a third of what GET /v1/jobs spent in Go, and
// most jobs' last run is the one the previous answer showed. The encoding is reused while
// the run read from the database equals, field by field, the one it was made from, so a
// run that finished, was retried or was asked to cancel since is encoded again.

// lastRunMemo is a jobView's memo of its last run's encoding.
type lastRunMemo struct{ p atomic.Pointer[encodedRun] }

type encodedRun struct {
	run  store.Run
	json []byte
}

// json returns r's view as JSON ("null" when the job never ran).
func (m *lastRunMemo) json(r *store.Run) ([]byte, error) {
	if r == nil {
		return []byte("null"), nil
	}
	if e := m.p.Load(); e != nil && sameRun(&e.run, r) {
		return e.json, nil
	}
	b, err := json.Marshal(newRunView(r))
	if err != nil {
		return nil, err
	}
	m.p.Store(&encodedRun{run: *r, json: b})
	return b, nil
}

// sameRun reports whether a and b hold the same values in every field of store.Run
// (TestSameRunComparesEveryField fails when a field is added and not compared here).
func sameRun(a, b *store.Run) bool {
	return a.ID == b.ID && a.Job == b.Job && a.Trigger == b.Trigger && a.Status == b.Status &&
		sameTime(a.ScheduledAt, b.ScheduledAt) && a.CreatedAt.Equal(b.CreatedAt) &&
		sameTime(a.StartedAt, b.StartedAt) && sameTime(a.FinishedAt, b.FinishedAt) &&
		same(a.InstanceID, b.InstanceID) && same(a.Epoch, b.Epoch) && bytes.Equal(a.Stats, b.Stats) &&
		same(a.Error, b.Error) && same(a.Reason, b.Reason) && bytes.Equal(a.Params, b.Params) &&
		same(a.RecoversRunID, b.RecoversRunID) && a.CancelRequested == b.CancelRequested &&
		same(a.DefinitionVersion, b.DefinitionVersion) && a.Rerun == b.Rerun &&
		sameTime(a.NextAttemptAt, b.NextAttemptAt) && same(a.Traceparent, b.Traceparent)
}

// same reports whether two optional values are both absent, or both present and equal.
func same[T comparable](a, b *T) bool {
	return a == b || (a != nil && b != nil && *a == *b)
}

// sameTime is same for times: the same instant (views show times in UTC).
func sameTime(a, b *time.Time) bool {
	return a == b || (a != nil && b != nil && a.Equal(*b))
}

package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/store"
)

// The job list's answer, written from pieces a replica keeps: at 10 000 jobs, encoding
// every job's view by reflection took most of what remained of GET /v1/jobs once the views
// were cached. A job's static part (jobView.static) is encoded once per version, its next
// slots once per memo, and only its paused flag and last run per request. The answer holds
// the same members as a Job encoded by encoding/json, the static ones in name order.

// jobStateKeys are the members of Job that withState sets.
var jobStateKeys = []string{"paused", "finished", "next_run_at", "next_runs", "next_runs_dst", "warnings", "last_run"}

// staticJSON returns the members of jv.static, but the state's, as `"k":v,...` (no braces).
func (jv *jobView) staticJSON() []byte {
	jv.encodeOnce.Do(func() {
		b, err := json.Marshal(jv.static)
		if err != nil {
			panic(fmt.Sprintf("api: encode job view: %v", err)) // an unencodable type: a programming error
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			panic(fmt.Sprintf("api: decode job view: %v", err))
		}
		for _, k := range jobStateKeys {
			delete(m, k)
		}
		if b, err = json.Marshal(m); err != nil {
			panic(fmt.Sprintf("api: encode job view: %v", err))
		}
		jv.encoded = b[1 : len(b)-1]
	})
	return jv.encoded
}

// appendJSON appends the job's view with its state, as withState would show it.
func (jv *jobView) appendJSON(b []byte, now time.Time, paused bool, last *store.Run, ran store.RanRuns) ([]byte, error) {
	b = append(b, `{"paused":`...)
	b = fmt.Append(b, paused)
	co := jv.coming(now, paused, ran)
	b = co.appendJSON(b)
	b = append(b, `,"last_run":`...)
	run, err := jv.last.json(last)
	if err != nil {
		return nil, err
	}
	b = append(b, run...)
	if s := jv.staticJSON(); len(s) > 0 {
		b = append(b, ',')
		b = append(b, s...)
	}
	return append(b, '}'), nil
}

// writeJobList answers a page of jobs: {"jobs": [...], "next_cursor": next}, and the
// members in extra when it is not empty (`"counts":{…}`, JSON of JobCounts, and more).
func writeJobList(w http.ResponseWriter, list []*jobView, now time.Time, paused map[string]bool, last map[string]*store.Run,
	ran map[string]store.RanRuns, next *string, extra []byte) error {
	b := make([]byte, 0, 1536*len(list)+64) // about 1.2 kB a runtime job
	b = append(b, `{"jobs":[`...)
	for i, jv := range list {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		name := jv.ref.conf.Name
		if b, err = jv.appendJSON(b, now, paused[name], last[name], ran[name]); err != nil {
			return err
		}
	}
	cursor, err := json.Marshal(next)
	if err != nil {
		return err
	}
	b = append(b, `],"next_cursor":`...)
	b = append(b, cursor...)
	if len(extra) > 0 {
		b = append(b, ',')
		b = append(b, extra...)
	}
	httpx.WriteRawJSON(w, http.StatusOK, append(b, '}'))
	return nil
}

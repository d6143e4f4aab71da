package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
)

// A runtime job's part of its view, and the answer to a definition write.

// targetRunes caps a view's one-line target.
const targetRunes = 80

// writeDefinitionAnswer answers a stored definition: its version as a strong ETag, and
// Location when it was created.
func writeDefinitionAnswer(w http.ResponseWriter, status int, v client.Job) {
	w.Header().Set("ETag", `"`+strconv.FormatInt(*v.Version, 10)+`"`)
	if status == http.StatusCreated {
		w.Header().Set("Location", jobPath(namespace.Key(v.Namespace, v.Name)))
	}
	writeJobView(w, status, v)
}

// addRuntimeView fills in a runtime job's part of its view.
func addRuntimeView(v *client.Job, j *jobRef) {
	v.Kind = j.stored.Kind
	v.Version = &j.stored.Version
	v.DefinitionError = j.invalid
	d := j.def
	if d == nil {
		return
	}
	v.Definition = encodedJSON(d)
	v.Description = &d.Description
	v.Labels = d.Labels
	if v.Labels == nil {
		v.Labels = map[string]string{}
	}
	v.Target = targetLine(d)
	v.Overlap = d.Overlap
	if v.Overlap == "" {
		v.Overlap = runtimejob.OverlapSkip
	}
	v.After = d.After
	if j.followsOnly() {
		// It runs only after its parents: the schedule it is given has no slot to show.
		v.Schedule, v.ScheduleText, v.TimeZone, v.Schedules = "", "after "+strings.Join(d.After, ", "), "", []string{}
	}
}

// targetLine is what a job calls or runs, in one line of at most targetRunes.
func targetLine(d *runtimejob.Definition) string {
	var line string
	switch {
	case d.HTTP != nil:
		method := d.HTTP.Method
		if method == "" {
			method = runtimejob.MethodDefault
		}
		line = method + " " + d.HTTP.URL
	case d.SQL != nil:
		line = "SQL on " + d.SQL.Target + ": " + strings.Join(strings.Fields(d.SQL.Statements), " ")
	case d.River != nil:
		line = "River " + d.River.Kind + " on " + d.River.Target + " (queue " + d.River.Queue + ")"
	case d.NATS != nil:
		// The server stays out when it is a secret's: the line is for every viewer.
		server := d.NATS.URL
		if server == "" {
			server = "secret " + d.NATS.URLSecret
		}
		line = "NATS publish to " + d.NATS.Subject + " on " + server
	}
	if utf8.RuneCountInString(line) <= targetRunes {
		return line
	}
	return string([]rune(line)[:targetRunes-1]) + "…"
}

// jobPath is the route of the job with key key.
func jobPath(key string) string {
	ns, name := namespace.Split(key)
	if ns == namespace.Default {
		return "/v1/jobs/" + name
	}
	return "/v1/namespaces/" + ns + "/jobs/" + name
}

// encodedJSON is v in JSON, for a view's member that holds it encoded (client.Job's
// definition and notification rules: their types are the server's).
func encodedJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("api: encode view member: %v", err)) // an unencodable type: a programming error
	}
	return b
}

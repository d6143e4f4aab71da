package runtimejob

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Schedules is a job's schedule: one spec, or a list of them whose union names the slots.
// It reads a JSON (or YAML) string or a list of strings, and writes one spec as a string,
// so a definition with one schedule reads and writes exactly as before lists existed, and a
// client that knows only strings keeps reading it.
type Schedules []string

// errScheduleType says what a schedule may be, for a value of another JSON type.
var errScheduleType = errors.New(`schedule: want a cron expression or a list of them, e.g. "0 2 * * *" or ["0 9 * * *", "0 17 * * *"]`)

// MarshalJSON writes one spec (or none) as a string, several as a list.
func (s Schedules) MarshalJSON() ([]byte, error) {
	if len(s) <= 1 {
		spec := ""
		if len(s) == 1 {
			spec = s[0]
		}
		return json.Marshal(spec)
	}
	return json.Marshal([]string(s))
}

// UnmarshalJSON reads a string or a list of strings.
func (s *Schedules) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case bytes.Equal(data, []byte("null")):
		*s = nil
		return nil
	case len(data) > 0 && data[0] == '"':
		var spec string
		if err := json.Unmarshal(data, &spec); err != nil {
			return err
		}
		*s = Schedules{spec}
		return nil
	case len(data) > 0 && data[0] == '[':
		var specs []string
		if err := json.Unmarshal(data, &specs); err != nil {
			return errScheduleType
		}
		*s = specs
		return nil
	}
	return errScheduleType
}

// DST is what a cron schedule does when its zone's clocks change: internal/schedule.DST as
// a definition writes it. Left out, a schedule keeps the behaviour of gap skip and repeat
// first; given, both halves are written, the one left out with its default.
type DST struct {
	// Gap: "skip" (a time that does not exist has no slot that day) or "shift" (it runs at
	// the first instant after the gap).
	Gap string `json:"gap,omitempty"`
	// Repeat: "first", "last" or "both" of the two instants of a time that happens twice.
	Repeat string `json:"repeat,omitempty"`
}

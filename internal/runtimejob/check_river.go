package runtimejob

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/schedulerhq/scheduler/internal/targets"
)

// MaxRiverArgs bounds a River job's args: they are copied into every slot's River job.
const MaxRiverArgs = 64 << 10

// river checks a river job: its SQL target as a SQL job's, and the kind, queue and args by
// River's own rules, so that a definition River would refuse is refused before it is stored,
// not at every slot. Args are written back compacted, the normal form.
func (c *checker) river(j *Checked) {
	copied := *j.Def.River // the normal form is written on the checked copy, not the caller's
	r := &copied
	j.Def.River = r
	c.sqlTarget("river.target", r.Target)
	switch {
	case r.Kind == "":
		c.fail("river.kind", "required: the kind the River worker is registered for (its JobArgs' Kind()), e.g. send_invoice")
	case len(r.Kind) > targets.RiverMaxKind || !utf8.ValidString(r.Kind) || !targets.RiverKindRE.MatchString(r.Kind):
		c.fail("river.kind", "%q is not a River job kind: want 2 to %d letters, digits and _ - [ ] < > / . : +, starting with a letter, digit or _ (e.g. send_invoice)",
			r.Kind, targets.RiverMaxKind)
	}
	switch {
	case r.Queue == "":
		r.Queue = targets.RiverQueueDefault
	case len(r.Queue) > targets.RiverMaxQueue || !targets.RiverQueueRE.MatchString(r.Queue):
		c.fail("river.queue", "%q is not a River queue: want at most %d lower-case letters and digits, in words joined by _ or - (e.g. billing_jobs)",
			r.Queue, targets.RiverMaxQueue)
	}
	c.riverArgs(r)
	if j.Def.Retry != nil {
		c.fail("retry", "applies to http jobs only: a river job's insert commits once per slot, with its marker; River retries the job itself")
	}
}

// riverArgs checks that args are one JSON object of at most MaxRiverArgs bytes.
func (c *checker) riverArgs(r *RiverTarget) {
	trimmed := bytes.TrimSpace(r.Args)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		r.Args = json.RawMessage(`{}`)
		return
	}
	if len(r.Args) > MaxRiverArgs {
		c.fail("river.args", "%d bytes; at most %d (64 KiB)", len(r.Args), MaxRiverArgs)
		return
	}
	var compact bytes.Buffer
	if trimmed[0] != '{' || json.Compact(&compact, trimmed) != nil {
		c.fail("river.args", `must be a JSON object, the River job's args, e.g. {"customer_id": 42}`)
		return
	}
	r.Args = compact.Bytes()
}

// countSet is how many of set are true.
func countSet(set ...bool) int {
	n := 0
	for _, s := range set {
		if s {
			n++
		}
	}
	return n
}

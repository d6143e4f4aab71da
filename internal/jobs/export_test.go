package jobs

import "github.com/schedulerhq/scheduler/internal/job"

// ClaimSQLOf is the claim statement of j, an appointment message job.
func ClaimSQLOf(j job.Job) string {
	switch j := j.(type) {
	case *AppointmentRemindersDay:
		return j.claim
	}
	panic("ClaimSQLOf: not an appointment message job")
}

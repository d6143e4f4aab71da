package jobs

import "github.com/schedulerhq/scheduler/internal/job"

// ClaimSQLOf is the claim statement of j, an appointment-reminders-day job.
func ClaimSQLOf(j job.Job) string { return j.(*AppointmentRemindersDay).claim }

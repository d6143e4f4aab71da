package jobs

import "github.com/schedulerhq/scheduler/internal/jobcontract"

// ClaimSQLOf is the claim statement of j, an appointment-reminders-day job.
func ClaimSQLOf(j jobcontract.Job) string { return j.(*AppointmentRemindersDay).claim }

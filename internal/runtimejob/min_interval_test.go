package runtimejob_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/schedulerhq/scheduler/internal/runtimejob"
)

// TestMinIntervalHoldsForTheWholeScheduleSet: a namespace's min_interval bounds every gap
// between two slots of a job's schedule set, not the one gap around now. Each of these was
// stored under a 1 h quota by a check that looked at one period.
func TestMinIntervalHoldsForTheWholeScheduleSet(t *testing.T) {
	e := env()
	e.MinInterval = time.Hour
	refused := []struct {
		name, extra, schedule string
		quota                 time.Duration
	}{
		{"every second during hour 0", ``, `["* * 0 * * *", "0 0 2 * * *"]`, 0},
		{"two @every one second apart at times", ``, `["@every 1h", "@every 3601s"]`, 0},
		{"a second spec close to the first", ``, `["0 9 * * *", "30 9 * * *"]`, 0},
		{"every minute on Mondays only", ``, `["0 0 * * *", "* * * * 1"]`, 0},
		{"a cron slot close to an @every slot", ``, `["@every 2h", "10 1 * * *"]`, 0},
		{"a day's last and the next day's first", ``, `["30 23 * * *", "15 0 * * *"]`, 0},
		{"repeat both: the repeated 02:30 twice, an hour apart", `"time_zone": "Europe/Paris", "dst": {"repeat": "both"}, `, `["30 2 * * *"]`, 2 * time.Hour},
		{"gap shift: the skipped 02:30 runs at 03:00, 20 minutes before 03:20", `"time_zone": "Europe/Paris", "dst": {"gap": "shift"}, `, `["30 2 * * *", "20 3 * * *"]`, 45 * time.Minute},
		{"a one-time slot beside the cron", ``, `["0 9 * * *", "@at 2027-01-01T09:30:00Z"]`, 0},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			d := decode(t, fmt.Sprintf(`{"name": "fast", %s"schedule": %s, "http": {"url": "https://billing.example/x"}}`, tc.extra, tc.schedule))
			e := e
			if tc.quota > 0 {
				e.MinInterval = tc.quota
			}
			start := time.Now()
			_, errs := runtimejob.Check(d, e)
			took := time.Since(start)
			msg, ok := fields(errs)["schedule"]
			if assert.True(t, ok, "stored under a 1h quota: %v", errs) {
				assert.Contains(t, msg, "min_interval")
				assert.Contains(t, msg, "namespace default allows no less than "+strings.TrimSuffix(strings.TrimSuffix(e.MinInterval.String(), "0s"), "0m"))
				assert.Contains(t, msg, " and 20", "names the two slots: %s", msg)
			}
			assert.Less(t, took, time.Second)
		})
	}
	allowed := []struct{ name, extra, schedule string }{
		{"hourly", ``, `["0 * * * *"]`},
		{"two specs two hours apart", ``, `["0 0,4,8,12,16,20 * * *", "0 2,6,10,14,18,22 * * *"]`},
		{"@every 1h and a cron on the hour", ``, `["@every 1h", "0 */3 * * *"]`},
		{"hourly in a DST zone, default policy", `"time_zone": "Europe/Paris", `, `["0 * * * *"]`},
		{"a fixed jitter moves every slot alike", `"jitter": "10m", `, `["0 * * * *"]`},
		{"a close pair only before start_at", `"start_at": "2027-02-01T00:00:00Z", "end_at": "2027-03-01T00:00:00Z", `, `["0 9 * * *", "@at 2027-01-10T09:30:00Z"]`},
	}
	for _, tc := range allowed {
		t.Run(tc.name, func(t *testing.T) {
			d := decode(t, fmt.Sprintf(`{"name": "slow", %s"schedule": %s, "http": {"url": "https://billing.example/x"}}`, tc.extra, tc.schedule))
			_, errs := runtimejob.Check(d, e)
			assert.Empty(t, errs)
		})
	}
}

// BenchmarkMinIntervalCheck: the worst schedules for the check (many slots, a DST zone, an
// @every beside them) stay well under 50 ms a definition.
func BenchmarkMinIntervalCheck(b *testing.B) {
	e := env()
	e.MinInterval = 2 * time.Second
	for _, tc := range []struct{ name, def string }{
		{"every-2s-paris-with-every", `"time_zone": "Europe/Paris", "dst": {"repeat": "both", "gap": "shift"}, "schedule": ["*/2 * * * * *", "@every 7s"]`},
		{"every-2s-paris-with-every-passes", `"time_zone": "Europe/Paris", "dst": {"repeat": "both", "gap": "shift"}, "schedule": ["*/2 * * * * *", "@every 4s", "@every 6s"]`},
		{"every-second-refused", `"schedule": ["* * 0 * * *", "0 0 2 * * *"]`},
		{"32-specs-many-day-sets-passes", `"time_zone": "Europe/Paris", "schedule": [` + daySetSpecs("*/2") + `]`},
		{"32-specs-many-times-and-day-sets-passes", `"time_zone": "Europe/Paris", "schedule": [` + daySetSpecs("") + `]`},
		{"32-specs-minutes", `"time_zone": "America/New_York", "schedule": [` + minuteSpecs() + `]`},
	} {
		d, err := runtimejob.Decode([]byte(`{"name": "bench", ` + tc.def + `, "http": {"url": "https://billing.example/x"}}`))
		if err != nil {
			b.Fatal(err)
		}
		if _, errs := runtimejob.Check(d, e); strings.Contains(tc.name, "passes") && len(errs) > 0 {
			b.Fatal(errs)
		}
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				runtimejob.Check(d, e)
			}
		})
	}
}

func minuteSpecs() string {
	s := ""
	for i := range 32 {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf(`"%d-59/32 * * * 0-5"`, i)
	}
	return s
}

// daySetSpecs are 32 specs, at seconds (or each at its own second of every minute), whose
// sets of days differ (months, weekdays, days of the month), so that nearly every day of a
// year fires another set of them.
func daySetSpecs(seconds string) string {
	var specs []string
	for i := range 32 {
		sec := seconds
		if sec == "" {
			sec = fmt.Sprint(2 * (i % 30))
		}
		switch {
		case i < 12:
			specs = append(specs, fmt.Sprintf(`"%s * * * %d *"`, sec, i+1))
		case i < 19:
			specs = append(specs, fmt.Sprintf(`"%s * * * * %d"`, sec, i-12))
		default:
			specs = append(specs, fmt.Sprintf(`"%s * * %d,%d * *"`, sec, i-18, i-6))
		}
	}
	return strings.Join(specs, ", ")
}

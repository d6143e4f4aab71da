package schedule

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestText(t *testing.T) {
	t.Parallel()
	for spec, want := range map[string]string{
		"0 2 * * *":                        "every day at 02:00 UTC",
		"CRON_TZ=Europe/Berlin 30 8 * * *": "every day at 08:30 Europe/Berlin",
		"0 * * * *":                        "every hour, on the hour",
		"15,45 * * * *":                    "every hour at minutes 15 and 45",
		"*/5 * * * *":                      "every 5 minutes",
		"* * * * *":                        "every minute",
		"0 4 * * 1-5":                      "every Monday to Friday at 04:00 UTC",
		"0 4 * * 0":                        "every Sunday at 04:00 UTC",
		"0 0 1 * *":                        "on day 1 of every month at 00:00 UTC",
		"0 2,14 * * *":                     "every day at 02:00 and 14:00 UTC",
		"@daily":                           "every day at 00:00 UTC",
		"@hourly":                          "every hour, on the hour",
		"@every 30s":                       "every 30 seconds",
		"@every 2h":                        "every 2 hours",
		"@every 1m":                        "every minute",
		"*/10 * * * * *":                   "every 10 seconds",
		"0 */5 * * * *":                    "every 5 minutes",
		"0 0 1 1 *":                        "every year on 1 January at 00:00 UTC",
		"@yearly":                          "every year on 1 January at 00:00 UTC",
		"0 0 1 1-6 *":                      "cron 0 0 1 1-6 *",
		"5-10 * * * *":                     "cron 5-10 * * * *",
	} {
		s, err := Parse(spec)
		require.NoError(t, err, spec)
		assert.Equal(t, want, s.Text(), spec)
	}
}

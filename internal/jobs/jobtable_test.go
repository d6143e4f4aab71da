package jobs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// The job table of docs/first-application.md is the registry's: the same built-in jobs in
// the same order, each with its default schedule and timeout, so the table cannot drift from
// the code. The rows are read from the table under "## Jobs" only.
func TestFirstApplicationJobTableIsTheRegistry(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(testdb.RepoRoot(), "docs", "first-application.md"))
	require.NoError(t, err)
	section := string(readme)
	start := strings.Index(section, "\n## Jobs\n")
	require.NotEqual(t, -1, start, `docs/first-application.md has a "## Jobs" section`)
	section = section[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	require.Contains(t, section, "| job | default schedule (UTC) | timeout | what it does |")

	var got []config.JobDefaults
	row := regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\| `([^`]+)` \\| ([0-9a-z.]+) \\|")
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		timeout, err := time.ParseDuration(m[3])
		require.NoError(t, err, "the timeout of %s in docs/first-application.md's job table", m[1])
		got = append(got, config.JobDefaults{Name: m[1], Schedule: m[2], Timeout: timeout})
	}

	var want []config.JobDefaults
	for _, d := range Defaults() {
		want = append(want, config.JobDefaults{Name: d.Name, Schedule: d.Schedule, Timeout: d.Timeout})
	}
	require.NotEmpty(t, want)
	assert.Equal(t, want, got, "docs/first-application.md's job table (## Jobs) against jobs.Defaults")
}

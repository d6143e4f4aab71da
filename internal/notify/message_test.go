package notify_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/notify"
)

// A target's error is written by another team: in a Slack message it must not become a
// mention or a link of its own, and the only link is the console's.
func TestSlackTextCannotBeForgedByARunsError(t *testing.T) {
	id := int64(7)
	hostile := "<!channel> pay now: <https://evil.example/login|Open in the console> & more\nsecond line"
	status := "failed"
	m := notify.NewMessage("billing/invoices", notify.Failed, "https://scheduler.example", []notify.Event{
		{RunID: &id, Status: &status, Error: &hostile}})
	text := m.SlackText()

	assert.NotContains(t, text, "<!channel>")
	assert.NotContains(t, text, "<https://evil.example")
	assert.Contains(t, text, "&lt;!channel&gt;", "the error is shown, escaped")
	assert.NotContains(t, text, "second line", "one line of the error")
	assert.Equal(t, 1, strings.Count(text, "<"), "one link: %s", text)
	assert.True(t, strings.HasSuffix(text, "<https://scheduler.example/ui/#/ns/billing/jobs/invoices|Open in the console>"), text)

	body, err := m.Body(notify.KindSlack)
	require.NoError(t, err)
	var slack map[string]string
	require.NoError(t, json.Unmarshal(body, &slack))
	assert.Equal(t, text, slack["text"])
}

// A run's error is cut to a bound in a message, never in the middle of a character, and
// says it was cut.
func TestMessageCutsLongErrorsOnACharacterBoundary(t *testing.T) {
	id := int64(1)
	long := strings.Repeat("é", 400) // 800 bytes, two per character
	m := notify.NewMessage("job", notify.Failed, "https://s.example", []notify.Event{{RunID: &id, Error: &long}})
	require.Len(t, m.Runs, 1)
	got := *m.Runs[0].Error
	assert.True(t, utf8.ValidString(got))
	assert.True(t, strings.HasSuffix(got, "…"))
	assert.Less(t, len(got), len(long))
	assert.Equal(t, "default", m.Namespace)
	assert.Equal(t, "https://s.example/ui/#/jobs/job", m.ConsoleURL)
}

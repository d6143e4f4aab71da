package deliver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Slack secret that is not a URL is refused in words that quote none of it, whatever part
// the URL parser would have named; a URL's path and query are hidden on their own as well,
// where a receiver that redirects elsewhere would show them.
func TestSlackURLIsCheckedWithoutQuotingIt(t *testing.T) {
	for _, v := range []string{
		"//hooks.slack.com/services/T0/B0/SeCrEt",      // no scheme: the guard would show the rest
		"ftp://hooks.slack.com/services/T0/B0/SeCrEt",  // a scheme the guard would quote
		"https://SeCrEt:pw@hooks.slack.com/services/T", // user info
		"https:///services/T0/B0/SeCrEt",               // no host
		"https://hooks.slack.com/services/T0/B0/SeCrEt\x01",
		"SeCrEt",
	} {
		_, err := slackURL("TEAM_SLACK", v)
		require.Error(t, err, v)
		assert.NotContains(t, err.Error(), "SeCrEt", v)
		assert.Contains(t, err.Error(), "secret TEAM_SLACK does not hold a Slack incoming webhook's URL", v)
	}
	parts, err := slackURL("TEAM_SLACK", "https://hooks.slack.com/services/T0/B0/SeCrEt?token=SeCrEt2")
	require.NoError(t, err)
	assert.Equal(t, []string{"/services/T0/B0/SeCrEt", "token=SeCrEt2"}, parts)
	parts, err = slackURL("TEAM_SLACK", "https://hooks.example/x")
	require.NoError(t, err)
	assert.Empty(t, parts, "a path of a few characters is not hidden wherever it stands")
}

package jobs_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/jobs"
	"github.com/schedulerhq/scheduler/internal/logging"
)

// A webhook URL often carries a credential (user info, a token in the query): the errors a
// send returns, which go to the log and to message_deliveries.error, show it redacted,
// whether the receiver refused the message or could not be reached.
func TestWebhookErrorsNeverShowTheURLsCredentials(t *testing.T) {
	t.Parallel()
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusBadRequest)
	}))
	defer refusing.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close() // nothing listens there any more: a network error
	for name, base := range map[string]string{"refused": refusing.URL, "unreachable": closed.URL} {
		t.Run(name, func(t *testing.T) {
			u := strings.Replace(base, "http://", "http://hook-user:hook-pass@", 1) + "/hook?token=tok-123&team=billing"
			s := jobs.NewWebhookSender(jobs.WebhookSettings{URL: u, MaxAttempts: 1, Timeout: time.Second})
			_, err := s.Send(context.Background(), jobs.Message{DeliveryID: 1, Deployment: "d"})
			require.Error(t, err)
			for _, secret := range []string{"hook-pass", "hook-user", "tok-123", "billing"} {
				assert.NotContains(t, err.Error(), secret)
			}
			assert.Contains(t, err.Error(), "/hook?", "the error still names the endpoint")
		})
	}
	assert.Equal(t, "https://REDACTED@example.com/p?a=REDACTED&b=REDACTED",
		logging.RedactURL("https://u:p@example.com/p?b=2&a=1"))
}

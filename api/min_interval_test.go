package api

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMinIntervalRefusesAScheduleSetWithCloseSlots: under a 1 h quota, a list whose specs
// are each slow enough but whose union is not gets 422 naming two slots and the quota; each
// was stored before.
func TestMinIntervalRefusesAScheduleSetWithCloseSlots(t *testing.T) {
	tm := newTeam(t)
	res := tm.do("PUT", "/v1/namespaces/small", `{"min_interval": "1h"}`, nil)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	for i, set := range []string{`["* * 0 * * *", "0 0 2 * * *"]`, `["@every 1h", "@every 3601s"]`} {
		body := fmt.Sprintf(`{"name": "set-%d", "schedule": %s, "http": {"url": "https://billing.internal/x"}}`, i, set)
		res := tm.do("POST", "/v1/namespaces/small/jobs", body, nil)
		require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s: %s", set, res.Body)
		assert.Equal(t, "schedule", res.problemField(t))
		assert.Contains(t, string(res.Body), "apart, and namespace small allows no less than 1h between slots (its min_interval)")
	}
	res = tm.do("POST", "/v1/namespaces/small/jobs", `{"name": "ok", "schedule": ["0 */2 * * *", "0 1-23/2 * * *"], "http": {"url": "https://billing.internal/x"}}`, nil)
	assert.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
}

package helmtest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

// TestChartPassesHelmLint runs what `helm lint --strict -f FILE` runs (Chart.yaml, values and
// their schema, templates, deprecated APIs) for each values file: any finding fails. Lint
// only logs a template's fail (TestChartRefusesValuesThatCannotWork checks those), and a null
// given for a default does not remove it there as it does in helm install: the chart's
// values never need a null.
func TestChartPassesHelmLint(t *testing.T) {
	for _, name := range []string{"defaults", "production", "minimal"} {
		t.Run(name, func(t *testing.T) {
			vals, err := chartutil.ReadValuesFile(valuesFile(name))
			require.NoError(t, err)
			linter := lint.AllWithKubeVersion(chartDir, vals, "jobs", nil)
			for _, m := range linter.Messages {
				// The only note allowed is the missing icon.
				if m.Severity == support.InfoSev && strings.Contains(m.Err.Error(), "icon is recommended") {
					continue
				}
				assert.Fail(t, "helm lint", "%s", m)
			}
		})
	}
}

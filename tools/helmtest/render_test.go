package helmtest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const chartDir = "../../deploy/helm/scheduler"

// rendered holds every object of one rendering, each decoded strictly into its API type.
type rendered struct {
	Deployment      *appsv1.Deployment
	Service         *corev1.Service
	Secret          *corev1.Secret
	PDB             *policyv1.PodDisruptionBudget
	ServiceMonitor  *monitoringv1.ServiceMonitor
	PrometheusRule  *monitoringv1.PrometheusRule
	objectsRendered int
}

// render renders the chart as `helm install scheduler -n jobs -f valuesFile` would, with the
// Helm SDK (no cluster: the engine and the default capabilities), and returns the error of the
// values' schema or of the templates, if any, beside the objects.
func render(t *testing.T, valuesFile string, set map[string]any) (rendered, error) {
	t.Helper()
	return renderChart(t, loadChart(t), valuesFile, set)
}

func renderChart(t *testing.T, ch *chart.Chart, valuesFile string, set map[string]any) (rendered, error) {
	t.Helper()
	vals := chartutil.Values{}
	var err error
	if valuesFile != "" {
		vals, err = chartutil.ReadValuesFile(valuesFile)
		require.NoError(t, err)
	}
	for path, v := range set {
		setPath(vals, strings.Split(path, "."), v)
	}
	top, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{
		Name: "scheduler", Namespace: "jobs", Revision: 1, IsInstall: true,
	}, chartutil.DefaultCapabilities)
	if err != nil { // values.schema.json refused the values
		return rendered{}, err
	}
	// Strict, as helm lint --strict: a template reading a value that does not exist (a typo
	// in .Values.serviceMonitor.enabled) fails instead of rendering as if it were off.
	files, err := engine.Engine{Strict: true}.Render(ch, top)
	if err != nil {
		return rendered{}, err
	}
	var r rendered
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.HasSuffix(name, "NOTES.txt") {
			continue
		}
		for _, doc := range docSeparator.Split(files[name], -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			r.decode(t, name, []byte(doc))
		}
	}
	return r, nil
}

// loadChart loads the chart from its directory once: Helm logs the link files/alerts.yml at
// every load.
var loadChart = func() func(t *testing.T) *chart.Chart {
	var once sync.Once
	var ch *chart.Chart
	var err error
	return func(t *testing.T) *chart.Chart {
		once.Do(func() { ch, err = loader.Load(chartDir) })
		require.NoError(t, err)
		return ch
	}
}()

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

func stripComments(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// decode reads one object strictly: a field its API type does not have (a misspelt key, a
// key at the wrong depth), a duplicate key or a value of the wrong type fails the test, as
// the API server would refuse it (or, worse, drop it without a word).
func (r *rendered) decode(t *testing.T, file string, doc []byte) {
	t.Helper()
	var tm metav1.TypeMeta
	require.NoError(t, yaml.Unmarshal(doc, &tm), file)
	type target struct {
		apiVersion string
		into       any
	}
	var to target
	switch tm.Kind {
	case "Deployment":
		to = target{"apps/v1", &r.Deployment}
	case "Service":
		to = target{"v1", &r.Service}
	case "Secret":
		to = target{"v1", &r.Secret}
	case "PodDisruptionBudget":
		to = target{"policy/v1", &r.PDB}
	case "ServiceMonitor":
		to = target{monitoringv1.SchemeGroupVersion.String(), &r.ServiceMonitor}
	case "PrometheusRule":
		to = target{monitoringv1.SchemeGroupVersion.String(), &r.PrometheusRule}
	default:
		t.Fatalf("%s: kind %q is not one the chart should render", file, tm.Kind)
	}
	require.Equal(t, to.apiVersion, tm.APIVersion, "%s: %s", file, tm.Kind)
	require.NoError(t, yaml.UnmarshalStrict(doc, to.into), "%s: %s does not decode strictly:\n%s", file, tm.Kind, doc)
	r.objectsRendered++
}

// setPath sets a dotted path of values, as helm's --set does.
func setPath(vals map[string]any, path []string, v any) {
	for _, k := range path[:len(path)-1] {
		next, ok := vals[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			vals[k] = next
		}
		vals = next
	}
	vals[path[len(path)-1]] = v
}

func mustRender(t *testing.T, valuesFile string) rendered {
	t.Helper()
	r, err := render(t, valuesFile, nil)
	require.NoError(t, err, "rendering with %s", valuesFile)
	return r
}

// alertGroups reads deploy/prometheus/alerts.yml, strictly, as the spec of a PrometheusRule.
func alertGroups(t *testing.T) monitoringv1.PrometheusRuleSpec {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir, "../../prometheus/alerts.yml"))
	require.NoError(t, err)
	var spec monitoringv1.PrometheusRuleSpec
	require.NoError(t, yaml.UnmarshalStrict(data, &spec), "alerts.yml as a PrometheusRule's spec")
	require.NotEmpty(t, spec.Groups)
	return spec
}

func env(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

func valuesFile(name string) string { return filepath.Join("testdata", name+".yaml") }

func fmtKeys[V any](m map[string]V) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return fmt.Sprint(keys)
}

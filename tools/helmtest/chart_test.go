package helmtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// secretVars are the variables that must never be written into the pod spec as plain values.
var secretVars = []string{
	"DATABASE_URL", "SCHEDULER_API_TOKEN", "SCHEDULER_API_TOKEN_NEXT", "SCHEDULER_API_READ_TOKEN",
	"SCHEDULER_SECRET_KEY", "SCHEDULER_SECRET_KEY_PREVIOUS", "SCHEDULER_METRICS_TOKEN",
}

// TestChartRendersValidObjects renders each values file and checks, on the decoded objects,
// what a working cluster relies on; each file's own expectations follow in its subtest.
func TestChartRendersValidObjects(t *testing.T) {
	for _, name := range []string{"defaults", "production", "minimal"} {
		t.Run(name, func(t *testing.T) {
			r := mustRender(t, valuesFile(name))
			checkCommon(t, r)
			switch name {
			case "defaults":
				checkDefaults(t, r)
			case "production":
				checkProduction(t, r)
			case "minimal":
				checkMinimal(t, r)
			}
		})
	}
}

func checkCommon(t *testing.T, r rendered) {
	d, svc := r.Deployment, r.Service
	require.NotNil(t, d, "a Deployment")
	require.NotNil(t, svc, "a Service")
	for _, name := range []string{d.Name, svc.Name} {
		assert.Empty(t, validation.IsDNS1035Label(name), "object name %q", name)
	}
	pod := d.Spec.Template
	podLabels := labels.Set(pod.Labels)
	selector := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)
	assert.True(t, selector.Matches(podLabels), "the Deployment's selector matches its pods")
	assert.True(t, labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels), "the Service selects the pods")
	assert.NotEmpty(t, svc.Spec.Selector)

	spec := pod.Spec
	require.Len(t, spec.Containers, 1)
	c := spec.Containers[0]
	assert.Equal(t, []string{"serve"}, c.Args)
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	require.Len(t, svc.Spec.Ports, 1)
	assert.Contains(t, ports, svc.Spec.Ports[0].TargetPort.String(), "the Service's targetPort names a container port")

	// Probes: ready only with the database and schema; alive without the database.
	require.NotNil(t, c.ReadinessProbe)
	require.NotNil(t, c.LivenessProbe)
	require.NotNil(t, c.ReadinessProbe.HTTPGet)
	require.NotNil(t, c.LivenessProbe.HTTPGet)
	assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
	assert.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path, "liveness must not depend on the database")
	assert.Equal(t, int32(8080), ports[c.ReadinessProbe.HTTPGet.Port.String()])
	assert.Equal(t, int32(8080), ports[c.LivenessProbe.HTTPGet.Port.String()])

	// Non-root, read-only, no privilege, the runtime's seccomp profile.
	psc := spec.SecurityContext
	require.NotNil(t, psc)
	require.NotNil(t, psc.RunAsNonRoot)
	assert.True(t, *psc.RunAsNonRoot)
	require.NotNil(t, psc.RunAsUser)
	assert.Equal(t, int64(65532), *psc.RunAsUser, "distroless nonroot")
	require.NotNil(t, psc.SeccompProfile)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, psc.SeccompProfile.Type)
	sc := c.SecurityContext
	require.NotNil(t, sc)
	require.NotNil(t, sc.ReadOnlyRootFilesystem)
	assert.True(t, *sc.ReadOnlyRootFilesystem)
	require.NotNil(t, sc.AllowPrivilegeEscalation)
	assert.False(t, *sc.AllowPrivilegeEscalation)
	require.NotNil(t, sc.Capabilities)
	assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)

	vars := env(c)
	assert.Len(t, vars, len(c.Env), "a variable set twice: Kubernetes keeps the last one silently")
	assert.Equal(t, "0.0.0.0:8080", vars["SCHEDULER_HTTP_ADDR"].Value)
	require.NotNil(t, vars["SCHEDULER_INSTANCE_ID"].ValueFrom)
	require.NotNil(t, vars["SCHEDULER_INSTANCE_ID"].ValueFrom.FieldRef, "each pod needs its own instance id")
	assert.Equal(t, "metadata.name", vars["SCHEDULER_INSTANCE_ID"].ValueFrom.FieldRef.FieldPath)

	// GOMEMLIMIT is the container's own memory limit, which must exist.
	gomem := vars["GOMEMLIMIT"].ValueFrom
	require.NotNil(t, gomem, "GOMEMLIMIT")
	require.NotNil(t, gomem.ResourceFieldRef, "GOMEMLIMIT follows the container's limit")
	assert.Equal(t, "limits.memory", gomem.ResourceFieldRef.Resource)
	assert.Empty(t, vars["GOMEMLIMIT"].Value)
	limit := c.Resources.Limits[corev1.ResourceMemory]
	assert.True(t, limit.Cmp(resource.MustParse("32Mi")) > 0, "a memory limit for GOMEMLIMIT to follow, got %s", limit.String())

	// The kubelet waits longer than the replica's own shutdown.
	shutdown, err := time.ParseDuration(vars["SCHEDULER_SHUTDOWN_TIMEOUT"].Value)
	require.NoError(t, err, "SCHEDULER_SHUTDOWN_TIMEOUT")
	require.NotNil(t, spec.TerminationGracePeriodSeconds)
	assert.Greater(t, time.Duration(*spec.TerminationGracePeriodSeconds)*time.Second, shutdown,
		"the kubelet would kill a replica before it finished stepping down")

	// Credentials come from the Secret, by reference, never as values in the pod spec.
	for _, name := range secretVars {
		v, ok := vars[name]
		if !ok {
			continue
		}
		assert.Empty(t, v.Value, "%s is written into the pod spec", name)
		require.NotNil(t, v.ValueFrom, name)
		require.NotNil(t, v.ValueFrom.SecretKeyRef, "%s comes from a Secret", name)
	}
	for _, name := range []string{"DATABASE_URL", "SCHEDULER_API_TOKEN"} {
		require.Contains(t, vars, name)
		require.NotNil(t, vars[name].ValueFrom, name)
		require.NotNil(t, vars[name].ValueFrom.SecretKeyRef, "%s comes from a Secret", name)
	}
	secretName := vars["DATABASE_URL"].ValueFrom.SecretKeyRef.Name
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		assert.Equal(t, secretName, ref.Name, "%s: one Secret", e.Name)
		assert.Equal(t, e.Name, ref.Key, "each key is the variable it becomes")
		if r.Secret != nil {
			assert.Contains(t, r.Secret.Data, ref.Key, "the chart's Secret holds %s", ref.Key)
		}
	}
	if r.Secret != nil {
		assert.Equal(t, r.Secret.Name, secretName)
		for key := range r.Secret.Data {
			assert.Contains(t, vars, key, "the Secret's key %s is used", key)
		}
	}

	for _, tsc := range spec.TopologySpreadConstraints {
		require.NotNil(t, tsc.LabelSelector, tsc.TopologyKey)
		sel, err := metav1.LabelSelectorAsSelector(tsc.LabelSelector)
		require.NoError(t, err)
		assert.True(t, sel.Matches(podLabels), "spreading %s counts the chart's pods", tsc.TopologyKey)
	}

	if pdb := r.PDB; pdb != nil {
		require.NotNil(t, pdb.Spec.Selector)
		assert.True(t, labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels).Matches(podLabels), "the budget covers the pods")
		assert.NotEqual(t, pdb.Spec.MinAvailable == nil, pdb.Spec.MaxUnavailable == nil, "exactly one of minAvailable and maxUnavailable")
		if pdb.Spec.MinAvailable != nil {
			assert.Less(t, pdb.Spec.MinAvailable.IntValue(), int(*d.Spec.Replicas), "minAvailable ≥ replicas blocks every drain")
		}
	}

	if sm := r.ServiceMonitor; sm != nil {
		assert.True(t, labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(svc.Labels)),
			"the ServiceMonitor selects the Service")
		// SchedulerReplicaDown is up{job="scheduler"} == 0.
		assert.Equal(t, "scheduler", svc.Labels[sm.Spec.JobLabel], "the scrape's job label")
		require.Len(t, sm.Spec.Endpoints, 1)
		ep := sm.Spec.Endpoints[0]
		assert.Equal(t, svc.Spec.Ports[0].Name, ep.Port)
		assert.Equal(t, "/metrics", ep.Path)
		if token, ok := vars["SCHEDULER_METRICS_TOKEN"]; ok {
			require.NotNil(t, ep.Authorization, "/metrics asks for SCHEDULER_METRICS_TOKEN: the scrape must send it")
			assert.Equal(t, "Bearer", ep.Authorization.Type)
			require.NotNil(t, ep.Authorization.Credentials)
			assert.Equal(t, token.ValueFrom.SecretKeyRef.Name, ep.Authorization.Credentials.Name)
			assert.Equal(t, token.ValueFrom.SecretKeyRef.Key, ep.Authorization.Credentials.Key)
		} else {
			assert.Nil(t, ep.Authorization)
		}
		_, annotated := pod.Annotations["prometheus.io/scrape"]
		assert.False(t, annotated, "scraped through the ServiceMonitor and annotations both")
	}

	if pr := r.PrometheusRule; pr != nil {
		assert.Equal(t, alertGroups(t), pr.Spec, "the PrometheusRule holds deploy/prometheus/alerts.yml's groups")
	}
}

func checkDefaults(t *testing.T, r rendered) {
	d := r.Deployment
	assert.Equal(t, int32(3), *d.Spec.Replicas)
	require.NotNil(t, r.Secret, "without existingSecret the chart makes the Secret")
	assert.Equal(t, "postgres://scheduler:pw@postgres.example.internal:5432/scheduler?sslmode=verify-full",
		string(r.Secret.Data["DATABASE_URL"]))
	assert.NotEmpty(t, d.Spec.Template.Annotations["checksum/secret"], "a changed Secret rolls the pods")
	require.NotNil(t, r.PDB)
	require.NotNil(t, r.PDB.Spec.MaxUnavailable)
	assert.Equal(t, 1, r.PDB.Spec.MaxUnavailable.IntValue())
	assert.Nil(t, r.ServiceMonitor)
	assert.Nil(t, r.PrometheusRule)
	c := d.Spec.Template.Spec.Containers[0]
	assert.Equal(t, "scheduler:0.4.0", c.Image, "the chart's appVersion")
	assert.Equal(t, "25s", env(c)["SCHEDULER_SHUTDOWN_TIMEOUT"].Value)
	assert.Equal(t, "json", env(c)["SCHEDULER_LOG_FORMAT"].Value)
	assert.Equal(t, int64(35), *d.Spec.Template.Spec.TerminationGracePeriodSeconds)
	assert.Equal(t, resource.MustParse("256Mi"), c.Resources.Limits[corev1.ResourceMemory])
	assert.Equal(t, "true", d.Spec.Template.Annotations["prometheus.io/scrape"])
	assert.Equal(t, "/metrics", d.Spec.Template.Annotations["prometheus.io/path"])
	assert.Equal(t, "8080", d.Spec.Template.Annotations["prometheus.io/port"])
	require.Len(t, d.Spec.Template.Spec.TopologySpreadConstraints, 1)
	assert.Equal(t, "kubernetes.io/hostname", d.Spec.Template.Spec.TopologySpreadConstraints[0].TopologyKey)
	require.NotNil(t, d.Spec.Template.Spec.AutomountServiceAccountToken)
	assert.False(t, *d.Spec.Template.Spec.AutomountServiceAccountToken, "the scheduler never calls the Kubernetes API")
	for _, name := range []string{"SCHEDULER_OIDC_ISSUER", "SCHEDULER_PUBLIC_URL", "SCHEDULER_SECRET_KEY"} {
		assert.NotContains(t, env(c), name)
	}
	assert.Equal(t, 4, r.objectsRendered, "Deployment, Service, Secret, PodDisruptionBudget")
}

func checkProduction(t *testing.T, r rendered) {
	d := r.Deployment
	assert.Nil(t, r.Secret, "the Secret is the operator's")
	c := d.Spec.Template.Spec.Containers[0]
	vars := env(c)
	assert.Equal(t, "registry.example.com/platform/scheduler:v0.5.0", c.Image)
	for _, name := range []string{"DATABASE_URL", "SCHEDULER_API_TOKEN", "SCHEDULER_API_TOKEN_NEXT", "SCHEDULER_SECRET_KEY", "SCHEDULER_METRICS_TOKEN"} {
		require.Contains(t, vars, name)
		assert.Equal(t, "scheduler-credentials", vars[name].ValueFrom.SecretKeyRef.Name, name)
	}
	assert.Equal(t, "https://scheduler.example.com", vars["SCHEDULER_PUBLIC_URL"].Value)
	assert.Equal(t, "https://kubernetes.default.svc", vars["SCHEDULER_OIDC_ISSUER"].Value)
	assert.Equal(t, "scheduler", vars["SCHEDULER_OIDC_AUDIENCE"].Value)
	assert.Equal(t, "system:serviceaccount:billing:*=billing:editor,system:serviceaccount:ops:admin=*:admin",
		vars["SCHEDULER_OIDC_BINDINGS"].Value)
	assert.Equal(t, "40s", vars["SCHEDULER_SHUTDOWN_TIMEOUT"].Value)
	assert.Equal(t, "text", vars["SCHEDULER_LOG_FORMAT"].Value, "env overrides the chart's json")
	assert.Equal(t, "256", vars["SCHEDULER_HTTP_CONCURRENCY"].Value)
	assert.Equal(t, "1000000", vars["SCHEDULER_MAX_JOBS"].Value, "not 1e+06")
	assert.Equal(t, "2.5", vars["SCHEDULER_SEND_RATE"].Value)
	assert.Equal(t, resource.MustParse("1Gi"), c.Resources.Limits[corev1.ResourceMemory])
	assert.Equal(t, "platform-critical", d.Spec.Template.Spec.PriorityClassName)

	require.NotNil(t, r.PDB)
	require.NotNil(t, r.PDB.Spec.MinAvailable)
	assert.Equal(t, 2, r.PDB.Spec.MinAvailable.IntValue())
	assert.Nil(t, r.PDB.Spec.MaxUnavailable)

	require.Len(t, d.Spec.Template.Spec.TopologySpreadConstraints, 2)
	assert.Equal(t, corev1.DoNotSchedule, d.Spec.Template.Spec.TopologySpreadConstraints[0].WhenUnsatisfiable)

	require.NotNil(t, r.ServiceMonitor)
	assert.Equal(t, "kube-prometheus-stack", r.ServiceMonitor.Labels["release"])
	require.NotNil(t, r.ServiceMonitor.Spec.Endpoints[0].Authorization, "the metrics token is sent")
	require.NotNil(t, r.PrometheusRule)
	assert.Equal(t, "kube-prometheus-stack", r.PrometheusRule.Labels["release"])
	var alerts []string
	for _, g := range r.PrometheusRule.Spec.Groups {
		for _, rule := range g.Rules {
			alerts = append(alerts, rule.Alert)
		}
	}
	assert.Contains(t, alerts, "SchedulerNoLeader")
	assert.Contains(t, alerts, "SchedulerReplicaDown")
	assert.Equal(t, 5, r.objectsRendered, "Deployment, Service, PodDisruptionBudget, ServiceMonitor, PrometheusRule")
}

func checkMinimal(t *testing.T, r rendered) {
	d := r.Deployment
	assert.Equal(t, int32(1), *d.Spec.Replicas)
	assert.Nil(t, r.Secret)
	assert.Nil(t, r.PDB, "one replica cannot keep a budget")
	assert.Empty(t, d.Spec.Template.Spec.TopologySpreadConstraints)
	assert.NotContains(t, d.Spec.Template.Annotations, "prometheus.io/scrape")
	assert.NotContains(t, d.Spec.Template.Annotations, "checksum/secret", "the chart cannot see a Secret it did not make")
	c := d.Spec.Template.Spec.Containers[0]
	assert.Equal(t, "scheduler", env(c)["DATABASE_URL"].ValueFrom.SecretKeyRef.Name)
	assert.Equal(t, 2, r.objectsRendered, "Deployment, Service")
}

// TestChartRefusesValuesThatCannotWork: values that would deploy a cluster that cannot start,
// or one that misbehaves on the first drain or rollout, stop `helm install` with what to set.
func TestChartRefusesValuesThatCannotWork(t *testing.T) {
	cases := []struct {
		name  string
		file  string
		set   map[string]any
		wants string
	}{
		{"no values", "", nil, "secret.values.DATABASE_URL is required"},
		{"no token", valuesFile("defaults"), map[string]any{"secret.values.SCHEDULER_API_TOKEN": nil},
			"secret.values.SCHEDULER_API_TOKEN"},
		{"existing Secret without the token", valuesFile("minimal"), map[string]any{"secret.keys": []any{"DATABASE_URL"}},
			"secret.keys must list SCHEDULER_API_TOKEN"},
		{"values beside an existing Secret", valuesFile("minimal"), map[string]any{"secret.values.SCHEDULER_SECRET_KEY": "k"},
			"secret.values is not used with secret.existingSecret (scheduler)"},
		{"a Secret's variable in env", valuesFile("defaults"), map[string]any{"env.SCHEDULER_API_TOKEN": "t"},
			"env.SCHEDULER_API_TOKEN: it comes from the Secret"},
		{"a chart's variable in env", valuesFile("defaults"), map[string]any{"env.GOMEMLIMIT": "200MiB"},
			"env.GOMEMLIMIT: the chart sets it"},
		{"a misspelt value", valuesFile("defaults"), map[string]any{"replicas": 5},
			"additional properties 'replicas' not allowed"},
		{"a binding without a role", valuesFile("production"), map[string]any{"oidc.bindings": []any{"system:serviceaccount:billing:*=billing"}},
			"at '/oidc/bindings/0'"},
		{"grace not above shutdown", valuesFile("defaults"), map[string]any{"terminationGracePeriodSeconds": 25},
			"terminationGracePeriodSeconds (25) must exceed shutdownTimeoutSeconds (25)"},
		{"no memory limit", valuesFile("defaults"), map[string]any{"resources.limits.memory": nil},
			"resources.limits.memory is required: GOMEMLIMIT follows it"},
		{"issuer without audience", valuesFile("defaults"), map[string]any{"oidc.issuer": "https://kubernetes.default.svc"},
			"oidc.audience is required"},
		{"bindings without issuer", valuesFile("defaults"), map[string]any{"oidc.bindings": []any{"a=b:viewer"}},
			"oidc.issuer is not set"},
		{"budget blocks drains", valuesFile("production"), map[string]any{"podDisruptionBudget.minAvailable": 3},
			"podDisruptionBudget.minAvailable (3) must be below replicaCount (3)"},
		{"no budget", valuesFile("defaults"), map[string]any{"podDisruptionBudget.maxUnavailable": nil},
			"podDisruptionBudget: set maxUnavailable or minAvailable, or enabled: false"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(t, tc.file, tc.set)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wants)
		})
	}
}

// TestChartRulesAreTheShippedAlerts: the chart's files/alerts.yml is the link to
// deploy/prometheus/alerts.yml (a copy would drift), and a change there reaches the rule.
func TestChartRulesAreTheShippedAlerts(t *testing.T) {
	link, err := os.Readlink(filepath.Join(chartDir, "files/alerts.yml"))
	require.NoError(t, err, "files/alerts.yml must be a link, not a copy that drifts")
	assert.Equal(t, "../../../prometheus/alerts.yml", link)

	r := mustRender(t, valuesFile("production"))
	require.NotNil(t, r.PrometheusRule)
	want := alertGroups(t)
	assert.Equal(t, want, r.PrometheusRule.Spec)
	var exprs []string
	for _, g := range r.PrometheusRule.Spec.Groups {
		for _, rule := range g.Rules {
			exprs = append(exprs, rule.Expr.String())
			for _, a := range rule.Annotations {
				assert.NotContains(t, a, "<no value>", "%s: Helm must not evaluate Prometheus' templates", rule.Alert)
			}
		}
	}
	assert.Contains(t, strings.Join(exprs, "\n"), `up{job="scheduler"}`)
}

// TestPackagedChartKeepsTheAlerts: `helm package` (chartutil.Save) stores the content of the
// link, so a chart pulled from a repository renders the same rules.
func TestPackagedChartKeepsTheAlerts(t *testing.T) {
	archive, err := chartutil.Save(loadChart(t), t.TempDir())
	require.NoError(t, err)
	packaged, err := loader.Load(archive)
	require.NoError(t, err)
	r, err := renderChart(t, packaged, valuesFile("production"), nil)
	require.NoError(t, err)
	require.NotNil(t, r.PrometheusRule)
	assert.Equal(t, alertGroups(t), r.PrometheusRule.Spec)
}

// TestOperationsGuideValuesRender: the values file docs/operations.md shows in "Install with
// Helm" installs, so the guide cannot drift from the chart.
func TestOperationsGuideValuesRender(t *testing.T) {
	guide, err := os.ReadFile("../../docs/operations.md")
	require.NoError(t, err)
	section := string(guide)
	start := strings.Index(section, "### Install with Helm")
	require.GreaterOrEqual(t, start, 0, "the guide's Install with Helm section")
	section = section[start:]
	m := regexp.MustCompile("(?s)in `scheduler-values.yaml`:\n\n```yaml\n(.*?)```").FindStringSubmatch(section)
	require.NotNil(t, m, "the guide's scheduler-values.yaml")
	file := filepath.Join(t.TempDir(), "scheduler-values.yaml")
	require.NoError(t, os.WriteFile(file, []byte(m[1]), 0o600))
	r, err := render(t, file, nil)
	require.NoError(t, err)
	checkCommon(t, r)
	require.NotNil(t, r.ServiceMonitor)
	require.NotNil(t, r.ServiceMonitor.Spec.Endpoints[0].Authorization, "the guide's Secret has a metrics token")
	require.NotNil(t, r.PrometheusRule)
}

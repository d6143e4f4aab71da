package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// No container engine or cluster runs where the tests do, so these tests read the files and
// check the properties the deployment relies on: what would otherwise only fail in production.

func decodeYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, v), path)
}

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
}

type composeService struct {
	Image           string            `yaml:"image"`
	Command         []string          `yaml:"command"`
	EnvFile         string            `yaml:"env_file"`
	Environment     map[string]string `yaml:"environment"`
	Ports           []string          `yaml:"ports"`
	Volumes         []string          `yaml:"volumes"`
	StopGracePeriod string            `yaml:"stop_grace_period"`
	DependsOn       map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

func TestComposeRunsThreeReplicasAgainstAHealthyPostgres(t *testing.T) {
	var compose composeFile
	decodeYAML(t, "../docker-compose.yml", &compose)

	pg := compose.Services["postgres"]
	assert.True(t, strings.HasPrefix(pg.Image, "postgres:15"), "PostgreSQL 15, as tested: %s", pg.Image)
	require.NotNil(t, pg.Healthcheck)
	assert.Contains(t, strings.Join(pg.Healthcheck.Test, " "), "pg_isready")

	ids := map[string]bool{}
	hostPorts := map[string]bool{}
	for _, name := range []string{"scheduler-1", "scheduler-2", "scheduler-3"} {
		s, ok := compose.Services[name]
		require.True(t, ok, "service %s", name)
		assert.Equal(t, []string{"serve"}, s.Command, name)
		env := s.Environment
		assert.Equal(t, "0.0.0.0:8080", env["SCHEDULER_HTTP_ADDR"], name)
		assert.Contains(t, env["DATABASE_URL"], "@postgres:5432/", "%s reaches the compose postgres service", name)
		id := env["SCHEDULER_INSTANCE_ID"]
		assert.NotEmpty(t, id, name)
		assert.False(t, ids[id], "%s: instance id %q used twice (leader fencing names backends by it)", name, id)
		ids[id] = true

		require.Len(t, s.Ports, 1, name)
		parts := strings.Split(s.Ports[0], ":")
		assert.Equal(t, "8080", parts[len(parts)-1], "%s: container port", name)
		host := parts[len(parts)-2]
		assert.False(t, hostPorts[host], "%s: host port %s used twice", name, host)
		hostPorts[host] = true

		assert.Equal(t, "service_healthy", s.DependsOn["postgres"].Condition, name)
		require.NotNil(t, s.Healthcheck, name)
		assert.NotEmpty(t, s.Healthcheck.Test, name)

		grace, err := time.ParseDuration(s.StopGracePeriod)
		require.NoError(t, err, "%s stop_grace_period", name)
		shutdown, err := time.ParseDuration(env["SCHEDULER_SHUTDOWN_TIMEOUT"])
		require.NoError(t, err, "%s SCHEDULER_SHUTDOWN_TIMEOUT", name)
		assert.Greater(t, grace, shutdown, "%s is killed before it can finish stepping down", name)

		// The token file is the operator's; the example next to it must be committed.
		assert.FileExists(t, filepath.Join("..", s.EnvFile+".example"), name)
	}
	assert.Equal(t, map[string]bool{"8080": true, "8081": true, "8082": true}, hostPorts)

	prom := compose.Services["prometheus"]
	require.NotEmpty(t, prom.Volumes)
	for _, v := range prom.Volumes {
		assert.FileExists(t, filepath.Join("..", strings.Split(v, ":")[0]), "prometheus mounts %s", v)
	}
	var promConfig struct {
		ScrapeConfigs []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	decodeYAML(t, "prometheus/prometheus.yml", &promConfig)
	var targets []string
	for _, sc := range promConfig.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	assert.ElementsMatch(t, []string{"scheduler-1:8080", "scheduler-2:8080", "scheduler-3:8080"}, targets)
}

type object struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
}

type deployment struct {
	Spec struct {
		Replicas int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Spec struct {
				TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
				SecurityContext               struct {
					RunAsNonRoot bool `yaml:"runAsNonRoot"`
					RunAsUser    int  `yaml:"runAsUser"`
				} `yaml:"securityContext"`
				Containers []container `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type container struct {
	Args  []string `yaml:"args"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
			ResourceFieldRef *struct {
				Resource string `yaml:"resource"`
			} `yaml:"resourceFieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Resources struct {
		Limits struct {
			Memory string `yaml:"memory"`
		} `yaml:"limits"`
	} `yaml:"resources"`
	ReadinessProbe  *probe `yaml:"readinessProbe"`
	LivenessProbe   *probe `yaml:"livenessProbe"`
	SecurityContext struct {
		ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
	} `yaml:"securityContext"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

func TestKubernetesManifests(t *testing.T) {
	var kustomization struct {
		Resources []string `yaml:"resources"`
	}
	decodeYAML(t, "k8s/kustomization.yaml", &kustomization)
	kinds := map[string]string{}
	for _, r := range kustomization.Resources {
		var o object
		decodeYAML(t, filepath.Join("k8s", r), &o)
		kinds[o.Kind] = r
	}
	require.Contains(t, kinds, "Deployment")
	require.Contains(t, kinds, "Service")
	require.Contains(t, kinds, "PodDisruptionBudget")

	var d deployment
	decodeYAML(t, filepath.Join("k8s", kinds["Deployment"]), &d)
	spec := d.Spec.Template.Spec
	podLabels := d.Spec.Template.Metadata.Labels
	assert.Equal(t, 3, d.Spec.Replicas)
	assert.Subset(t, podLabels, d.Spec.Selector.MatchLabels, "the selector matches the pods")
	assert.True(t, spec.SecurityContext.RunAsNonRoot)
	assert.NotZero(t, spec.SecurityContext.RunAsUser, "distroless nonroot is 65532; 0 would be root")
	require.Len(t, spec.Containers, 1)
	c := spec.Containers[0]
	assert.Equal(t, []string{"serve"}, c.Args)
	assert.True(t, c.SecurityContext.ReadOnlyRootFilesystem)
	require.NotNil(t, c.SecurityContext.AllowPrivilegeEscalation)
	assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation)

	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	require.NotNil(t, c.ReadinessProbe)
	require.NotNil(t, c.LivenessProbe)
	assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path, "ready only with the database and schema")
	assert.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path, "liveness must not depend on the database")
	assert.Equal(t, 8080, ports[c.ReadinessProbe.HTTPGet.Port])
	assert.Equal(t, 8080, ports[c.LivenessProbe.HTTPGet.Port])

	annotations := d.Spec.Template.Metadata.Annotations
	assert.Equal(t, "true", annotations["prometheus.io/scrape"])
	assert.Equal(t, "/metrics", annotations["prometheus.io/path"])
	assert.Equal(t, strconv.Itoa(ports["http"]), annotations["prometheus.io/port"])

	var secret struct {
		object     `yaml:",inline"`
		StringData map[string]string `yaml:"stringData"`
	}
	decodeYAML(t, "k8s/secret.example.yaml", &secret)
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
		if ref := e.ValueFrom.SecretKeyRef; ref != nil {
			assert.Equal(t, secret.Metadata.Name, ref.Name, "%s comes from the example Secret", e.Name)
			assert.Contains(t, secret.StringData, ref.Key, "%s: the example Secret has key %s", e.Name, ref.Key)
			env[e.Name] = "<secret>"
		}
		if ref := e.ValueFrom.FieldRef; ref != nil {
			env[e.Name] = ref.FieldPath
		}
		if ref := e.ValueFrom.ResourceFieldRef; ref != nil {
			env[e.Name] = ref.Resource
		}
	}
	assert.Equal(t, "<secret>", env["DATABASE_URL"])
	assert.Equal(t, "<secret>", env["SCHEDULER_API_TOKEN"], "a non-loopback address requires the token")
	assert.Equal(t, "0.0.0.0:8080", env["SCHEDULER_HTTP_ADDR"])
	assert.Equal(t, "metadata.name", env["SCHEDULER_INSTANCE_ID"], "each pod needs its own instance id")
	assert.Equal(t, "limits.memory", env["GOMEMLIMIT"], "the garbage collector works to stay under the container's limit")
	assert.NotEmpty(t, c.Resources.Limits.Memory, "GOMEMLIMIT needs a memory limit to follow")
	shutdown, err := time.ParseDuration(env["SCHEDULER_SHUTDOWN_TIMEOUT"])
	require.NoError(t, err)
	assert.Greater(t, time.Duration(spec.TerminationGracePeriodSeconds)*time.Second, shutdown,
		"the kubelet would kill a replica before it finished stepping down")

	var svc struct {
		Spec struct {
			Selector map[string]string `yaml:"selector"`
			Ports    []struct {
				TargetPort string `yaml:"targetPort"`
			} `yaml:"ports"`
		} `yaml:"spec"`
	}
	decodeYAML(t, filepath.Join("k8s", kinds["Service"]), &svc)
	assert.NotEmpty(t, svc.Spec.Selector)
	assert.Subset(t, podLabels, svc.Spec.Selector, "the Service selects the pods")
	require.Len(t, svc.Spec.Ports, 1)
	assert.Contains(t, ports, svc.Spec.Ports[0].TargetPort)

	var pdb struct {
		Spec struct {
			MaxUnavailable int `yaml:"maxUnavailable"`
			Selector       struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
		} `yaml:"spec"`
	}
	decodeYAML(t, filepath.Join("k8s", kinds["PodDisruptionBudget"]), &pdb)
	assert.Equal(t, 1, pdb.Spec.MaxUnavailable)
	assert.NotEmpty(t, pdb.Spec.Selector.MatchLabels)
	assert.Subset(t, podLabels, pdb.Spec.Selector.MatchLabels, "the budget covers the pods")
}

func TestDockerfileBuildsTheStaticBinaryWithTheModulesGo(t *testing.T) {
	dockerfile, err := os.ReadFile("../Dockerfile")
	require.NoError(t, err)
	goMod, err := os.ReadFile("../go.mod")
	require.NoError(t, err)
	text := string(dockerfile)

	// The builder's Go must be the minor version go.mod asks for (or the build downloads
	// another toolchain, or fails).
	want := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(goMod))
	require.NotNil(t, want)
	builder := regexp.MustCompile(`(?m)^FROM (?:--platform=\S+ )?golang:(\d+\.\d+)`).FindStringSubmatch(text)
	require.NotNil(t, builder, "a golang builder stage")
	assert.Equal(t, want[1], builder[1])

	for _, needed := range []string{
		"CGO_ENABLED=0", "-trimpath", "-tags timetzdata", "./cmd/scheduler",
		"FROM gcr.io/distroless/static-debian12:nonroot", "USER nonroot",
		"EXPOSE 8080", `ENTRYPOINT ["/scheduler"]`, `CMD ["serve"]`,
	} {
		assert.Contains(t, text, needed)
	}

	ignore, err := os.ReadFile("../.dockerignore")
	require.NoError(t, err)
	assert.Contains(t, strings.Fields(string(ignore)), "deploy/scheduler.env", "the token file must not enter the image")
	assert.Contains(t, strings.Fields(string(ignore)), ".git")
}

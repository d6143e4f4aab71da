{{/* The chart's name: also the pods' app.kubernetes.io/name, which the ServiceMonitor makes
the scrape's job label (SchedulerReplicaDown asks for job="scheduler"). */}}
{{- define "scheduler.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "scheduler.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "scheduler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "scheduler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "scheduler.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "scheduler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "scheduler.secretName" -}}
{{- .Values.secret.existingSecret | default (include "scheduler.fullname" .) }}
{{- end }}

{{/* The Secret's keys that become variables, one a line: the listed keys of an existing
Secret, or every key of the Secret the chart makes. */}}
{{- define "scheduler.secretKeys" -}}
{{- if .Values.secret.existingSecret }}
{{- join "\n" .Values.secret.keys }}
{{- else }}
{{- join "\n" (keys .Values.secret.values | sortAlpha) }}
{{- end }}
{{- end }}

{{/* Refuses values that would deploy a cluster that cannot work, each with what to set. */}}
{{- define "scheduler.validate" -}}
{{- $keys := splitList "\n" (include "scheduler.secretKeys" .) }}
{{- range list "DATABASE_URL" "SCHEDULER_API_TOKEN" }}
{{- if not (has . $keys) }}
{{- if $.Values.secret.existingSecret }}
{{- fail (printf "secret.keys must list %s: the replicas need it from Secret %s" . $.Values.secret.existingSecret) }}
{{- else }}
{{- fail (printf "secret.values.%s is required (or name a Secret of yours in secret.existingSecret)" .) }}
{{- end }}
{{- end }}
{{- end }}
{{- if and .Values.secret.existingSecret .Values.secret.values }}
{{- fail (printf "secret.values is not used with secret.existingSecret (%s): put those keys in that Secret and list them in secret.keys" .Values.secret.existingSecret) }}
{{- end }}
{{- range $name, $_ := .Values.env }}
{{- if has $name $keys }}
{{- fail (printf "env.%s: it comes from the Secret (secret.keys or secret.values); remove it from env" $name) }}
{{- end }}
{{- if has $name (list "SCHEDULER_HTTP_ADDR" "SCHEDULER_INSTANCE_ID" "SCHEDULER_SHUTDOWN_TIMEOUT" "GOMEMLIMIT" "SCHEDULER_PUBLIC_URL" "SCHEDULER_OIDC_ISSUER" "SCHEDULER_OIDC_AUDIENCE" "SCHEDULER_OIDC_JWKS_URL" "SCHEDULER_OIDC_BINDINGS") }}
{{- fail (printf "env.%s: the chart sets it (see values.yaml: shutdownTimeoutSeconds, resources.limits.memory, publicURL, oidc); remove it from env" $name) }}
{{- end }}
{{- end }}
{{- if not .Values.secret.existingSecret }}
{{- range $k, $v := .Values.secret.values }}
{{- if not $v }}
{{- fail (printf "secret.values.%s is empty: give it a value, or remove the key" $k) }}
{{- end }}
{{- end }}
{{- end }}
{{- if le (int .Values.terminationGracePeriodSeconds) (int .Values.shutdownTimeoutSeconds) }}
{{- fail (printf "terminationGracePeriodSeconds (%v) must exceed shutdownTimeoutSeconds (%v): the kubelet would kill a leader before it finished stepping down" .Values.terminationGracePeriodSeconds .Values.shutdownTimeoutSeconds) }}
{{- end }}
{{- if not (dig "limits" "memory" "" .Values.resources) }}
{{- fail "resources.limits.memory is required: GOMEMLIMIT follows it" }}
{{- end }}
{{- with .Values.oidc }}
{{- if and .issuer (not .audience) }}
{{- fail "oidc.audience is required with oidc.issuer: the audience the tokens must name, such as scheduler" }}
{{- end }}
{{- if and (not .issuer) (or .audience .jwksURL .bindings) }}
{{- fail "oidc.issuer is not set, but oidc.audience, oidc.jwksURL or oidc.bindings is: set the issuer, or empty the others" }}
{{- end }}
{{- end }}
{{- with .Values.podDisruptionBudget }}
{{- if .enabled }}
{{- /* dig: a null given for a default removes its key, which a strict template may not read. */}}
{{- $min := dig "minAvailable" nil . }}
{{- if and (kindIs "invalid" $min) (kindIs "invalid" (dig "maxUnavailable" nil .)) }}
{{- fail "podDisruptionBudget: set maxUnavailable or minAvailable, or enabled: false" }}
{{- end }}
{{- if and (not (kindIs "invalid" $min)) (not (kindIs "string" $min)) }}
{{- if ge (int $min) (int $.Values.replicaCount) }}
{{- fail (printf "podDisruptionBudget.minAvailable (%v) must be below replicaCount (%v), or no node could ever be drained" $min $.Values.replicaCount) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

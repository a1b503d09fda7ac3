{{/*
Labels of every object. They are the kustomize tree's labels (deploy/), so the chart and the tree
install the same objects and one can replace the other; the selectors depend on them.
Usage: include "tessera.labels" "scheduler"  (or "" for objects of no component)
*/}}
{{- define "tessera.labels" -}}
app.kubernetes.io/name: tessera
{{- if . }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end }}

{{/* The container image: repository:tag, the tag defaulting to the chart's appVersion. */}}
{{- define "tessera.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The ServiceAccount usernames the admission policy lets write tessera.dev/* annotations. */}}
{{- define "tessera.schedulerUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:tessera-scheduler
{{- end }}
{{- define "tessera.agentUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:tessera-agent
{{- end }}

{{/*
The scheduler configuration file: .Values.schedulerConfig plus the leaderElection section from
.Values.leaderElection, with the Lease in the release namespace (where the chart's Role grants
it). Refuses settings that would run two active schedulers or a Lease the Role does not grant.
*/}}
{{- define "tessera.config" -}}
{{- if hasKey .Values.schedulerConfig "leaderElection" }}
{{- fail "schedulerConfig.leaderElection: set leader election with the top-level `leaderElection` values (the chart's Role must grant that Lease)" }}
{{- end }}
{{- if and (gt (int .Values.scheduler.replicas) 1) (not .Values.leaderElection.enabled) }}
{{- fail "scheduler.replicas > 1 needs leaderElection.enabled: two active schedulers would bind the same GPUs twice" }}
{{- end }}
{{- $config := deepCopy .Values.schedulerConfig }}
{{- $election := dict "leaderElect" .Values.leaderElection.enabled "leaseDuration" .Values.leaderElection.leaseDuration "renewDeadline" .Values.leaderElection.renewDeadline "retryPeriod" .Values.leaderElection.retryPeriod "resourceNamespace" .Release.Namespace "resourceName" .Values.leaderElection.resourceName }}
{{- $_ := set $config "leaderElection" $election }}
{{- toYaml $config }}
{{- end }}

{{/*
Selector labels: the kustomize tree's labels (deploy/), so the chart and the tree select the same
pods and one can replace the other. Selectors are immutable: never add to them.
Usage: include "tessera.selectorLabels" "scheduler"  (or "" for objects of no component)
*/}}
{{- define "tessera.selectorLabels" -}}
app.kubernetes.io/name: tessera
{{- if . }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end }}

{{/*
Labels of every object and pod template: the selector labels plus Helm's standard labels
(https://helm.sh/docs/chart_best_practices/labels), which the kustomize tree does not have.
Usage: include "tessera.labels" (list . "scheduler")
*/}}
{{- define "tessera.labels" -}}
{{- $root := index . 0 }}
{{- include "tessera.selectorLabels" (index . 1) }}
helm.sh/chart: {{ printf "%s-%s" $root.Chart.Name $root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/version: {{ $root.Values.image.tag | default $root.Chart.AppVersion | replace "+" "_" | trunc 63 | trimSuffix "-" | quote }}
{{- end }}

{{/* The container image: repository@digest, else repository:tag (the tag defaulting to the chart's appVersion). */}}
{{- define "tessera.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}
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
{{- if not (include "tessera.replacesKubeScheduler" .) }}
{{- range (.Values.schedulerConfig.profiles | default list) }}
{{- if eq (.schedulerName | default "tessera") "default-scheduler" }}
{{- fail "schedulerConfig.profiles: schedulerName \"default-scheduler\" is kube-scheduler's (every pod without spec.schedulerName has it): both schedulers would bind those pods and `tessera run` refuses it. Use a name of Tessera's own (default tessera), or set scheduler.replaceDefaultScheduler: true if no kube-scheduler runs in this cluster" }}
{{- end }}
{{- end }}
{{- if and .Values.leaderElection.enabled (eq .Release.Namespace "kube-system") (eq .Values.leaderElection.resourceName "kube-scheduler") }}
{{- fail "leaderElection: the Lease kube-system/kube-scheduler is kube-scheduler's: whichever holds it keeps the other from leading, and `tessera run` refuses it. Set leaderElection.resourceName to a Lease of Tessera's own (default tessera), or set scheduler.replaceDefaultScheduler: true if no kube-scheduler runs in this cluster" }}
{{- end }}
{{- end }}
{{- include "tessera.checkLeaseMove" . }}
{{- include "tessera.checkOneRelease" . }}
{{- include "tessera.checkProfilesAreWhole" . }}
{{- include "tessera.checkAcrossFields" .Values.schedulerConfig }}
{{- if .Values.leaderElection.enabled }}
{{- include "tessera.checkLeaderElectionTimings" .Values.leaderElection }}
{{- end }}
{{- $config := deepCopy .Values.schedulerConfig }}
{{- $election := dict "leaderElect" .Values.leaderElection.enabled "leaseDuration" .Values.leaderElection.leaseDuration "renewDeadline" .Values.leaderElection.renewDeadline "retryPeriod" .Values.leaderElection.retryPeriod "resourceNamespace" .Release.Namespace "resourceName" .Values.leaderElection.resourceName }}
{{- $_ := set $config "leaderElection" $election }}
{{- toYaml $config }}
{{- end }}

{{/*
"true" when Tessera replaces kube-scheduler: scheduler.replaceDefaultScheduler, or the flag given in
scheduler.extraArgs (as earlier versions of deploy/README.md said). `tessera run` then accepts
kube-scheduler's scheduler name and Lease (scheduler/api/config_model.py kube_scheduler_clashes).
*/}}
{{- define "tessera.replacesKubeScheduler" -}}
{{- if or .Values.scheduler.replaceDefaultScheduler (has "--replace-default-scheduler" (.Values.scheduler.extraArgs | default list)) }}true{{ end }}
{{- end }}

{{- /*
The values of --authorization-always-allow-paths in scheduler.extraArgs (`--flag=value` or `--flag`
then its value), each followed by a newline (`splitList "\n" | initial` lists them), in order:
tessera run's argparse keeps the last. Nothing when it is not given: tessera run's default,
/healthz,/readyz,/livez.
*/}}
{{- define "tessera.alwaysAllowPathsValues" -}}
{{- $flag := "--authorization-always-allow-paths" }}
{{- $prev := "" }}
{{- range (.Values.scheduler.extraArgs | default list) }}
{{- $arg := toString . }}
{{- if eq $prev $flag }}
{{- printf "%s\n" $arg }}
{{- else if hasPrefix (printf "%s=" $flag) $arg }}
{{- printf "%s\n" (trimPrefix (printf "%s=" $flag) $arg) }}
{{- end }}
{{- $prev = $arg }}
{{- end }}
{{- end }}

{{- /*
"true" when .value (an --authorization-always-allow-paths list) serves .path (no leading /)
without a token, as upstream's path authorizer reads the list: exact, or a prefix before a
trailing *, the leading / optional.
*/}}
{{- define "tessera.alwaysAllows" -}}
{{- $path := .path }}
{{- $covered := false }}
{{- range (splitList "," .value) }}
{{- $pattern := trimPrefix "/" (trim .) }}
{{- if or (eq $pattern $path) (and (hasSuffix "*" $pattern) (hasPrefix (trimSuffix "*" $pattern) $path)) }}
{{- $covered = true }}
{{- end }}
{{- end }}
{{- if $covered }}true{{ end }}
{{- end }}

{{/*
The `tessera run` arguments after the chart's own --config, --bind-address and --port, which
scheduler.extraArgs must not repeat: the last flag wins, and a second --port or --bind-address
moves the server away from the probes (a restart loop), a second --config ignores the ConfigMap;
an --authorization-always-allow-paths without /healthz and /readyz puts the probes behind reviews.
*/}}
{{- define "tessera.schedulerExtraArgs" -}}
{{- $args := .Values.scheduler.extraArgs | default list }}
{{- range $args }}
{{- $arg := toString . }}
{{- range (list "--config" "--bind-address" "--secure-port" "--tls-cert-file" "--tls-private-key-file") }}
{{- if or (eq $arg .) (hasPrefix (printf "%s=" .) $arg) }}
{{- fail (printf "scheduler.extraArgs: %s is set by the chart (the ConfigMap, the pod IP, scheduler.port where the probes and the Service look, and scheduler.tls.secretName's files): use schedulerConfig, scheduler.port or scheduler.tls.secretName" .) }}
{{- end }}
{{- end }}
{{- if or (eq $arg "--port") (hasPrefix "--port=" $arg) }}
{{- fail "scheduler.extraArgs: --port serves plain HTTP, which the chart keeps out (tessera run takes it or --secure-port, not both): the scheduler serves HTTPS on scheduler.port" }}
{{- end }}
{{- end }}
{{- /* the kubelet's probes send no token: their paths stay always allowed */}}
{{- range (include "tessera.alwaysAllowPathsValues" . | splitList "\n" | initial) }}
{{- $value := . }}
{{- range (list "healthz" "readyz") }}
{{- if not (include "tessera.alwaysAllows" (dict "value" $value "path" .)) }}
{{- fail (printf "scheduler.extraArgs: --authorization-always-allow-paths must keep /healthz and /readyz (the kubelet's probes send no token; without them each probe waits for a SubjectAccessReview, and the liveness probe restarts the pods while the apiserver cannot answer): add them to %s" $value) }}
{{- end }}
{{- end }}
{{- end }}
{{- if and .Values.scheduler.replaceDefaultScheduler (not (has "--replace-default-scheduler" $args)) }}
{{- $args = append $args "--replace-default-scheduler" }}
{{- end }}
{{- with $args }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/* The profiles' scheduler names, as NOTES.txt lists them: `spec.schedulerName: a` or `...: b`
(no profiles: Tessera's built-in one, tessera). */}}
{{- define "tessera.schedulerNames" -}}
{{- $names := list }}
{{- range (.Values.schedulerConfig.profiles | default list) }}
{{- $names = append $names (printf "`spec.schedulerName: %s`" (.schedulerName | default "tessera")) }}
{{- end }}
{{- join " or " ($names | default (list "`spec.schedulerName: tessera`")) }}
{{- end }}

{{/*
A Go duration (values.schema.json's pattern: "30s", "1m30s", "1500ms") or a Prometheus one (also
d, w and y: 24h, 7d, 365d) in nanoseconds, as a float.
*/}}
{{- define "tessera.durationNs" -}}
{{- $units := dict "ns" 1.0 "us" 1e3 "µs" 1e3 "ms" 1e6 "s" 1e9 "m" 6e10 "h" 3.6e12 "d" 8.64e13 "w" 6.048e14 "y" 3.1536e16 }}
{{- $total := 0.0 }}
{{- range (regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h|d|w|y)" (toString .) -1) }}
{{- $number := regexFind "^[0-9]+(\\.[0-9]+)?" . | float64 }}
{{- $unit := regexReplaceAll "^[0-9]+(\\.[0-9]+)?" . "" }}
{{- $total = addf $total (mulf $number (get $units $unit)) }}
{{- end }}
{{- printf "%f" $total }}
{{- end }}

{{/*
A quantity (values.schema.json's "quantity": a number, then a suffix or an exponent) as the
float64 nearest its value, printed so that it parses back to the same float64. A decimal suffix
becomes an exponent of the written number ("1001m" parses as "1001e-3", as "1.001" does) and a
binary one a power of two (exact): the float is the exact value rounded once, so two quantities
compare as their values do, but for ones closer than a float64 tells apart (1 part in 1e16).
*/}}
{{- define "tessera.quantity" -}}
{{- $text := toString . }}
{{- $number := regexFind "^\\+?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)" $text }}
{{- $suffix := trimPrefix $number $text }}
{{- $decimal := dict "" 0 "n" -9 "u" -6 "m" -3 "k" 3 "M" 6 "G" 9 "T" 12 "P" 15 "E" 18 }}
{{- $binary := dict "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 }}
{{- if hasKey $binary $suffix }}
{{- mulf (float64 $number) (get $binary $suffix) }}
{{- else if hasKey $decimal $suffix }}
{{- float64 (printf "%se%v" $number (get $decimal $suffix)) }}
{{- else }}
{{- float64 $text }}
{{- end }}
{{- end }}

{{/*
A container's resources as the apiserver checks them (ValidateResourceRequirements: "must be
less than or equal to cpu limit of 1"): a request above its limit would render, and the
apiserver would then refuse the Deployment or DaemonSet, leaving a failed revision.
Usage: include "tessera.checkResources" (list "scheduler" .Values.scheduler.resources)
*/}}
{{- define "tessera.checkResources" -}}
{{- $component := index . 0 }}
{{- $resources := index . 1 | default dict }}
{{- $limits := $resources.limits | default dict }}
{{- range $name, $request := ($resources.requests | default dict) }}
{{- if hasKey $limits $name }}
{{- $limit := get $limits $name }}
{{- if gt (include "tessera.quantity" $request | float64) (include "tessera.quantity" $limit | float64) }}
{{- fail (printf "%s.resources.requests.%s: Invalid value: %q: must be less than or equal to %s limit of %v (%s.resources.limits.%s): the apiserver would refuse the pods' template. Lower the request or raise the limit" $component $name (toString $request) $name $limit $component $name) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The checks `tessera run` makes on leaderElection (scheduler/api/config_parse.py _leader_election),
so that breaking them fails the install rather than every start of the scheduler.
*/}}
{{- define "tessera.checkLeaderElectionTimings" -}}
{{- $rule := "the rule in values.yaml: leaseDuration > renewDeadline > retryPeriod * 1.2" }}
{{- $lease := include "tessera.durationNs" .leaseDuration | float64 }}
{{- $renew := include "tessera.durationNs" .renewDeadline | float64 }}
{{- $retry := include "tessera.durationNs" .retryPeriod | float64 }}
{{- if le $lease $renew }}
{{- fail (printf "leaderElection: leaseDuration %s must be greater than renewDeadline %s (%s)" .leaseDuration .renewDeadline $rule) }}
{{- end }}
{{- if le $renew (floor (mulf $retry 1.2)) }}
{{- fail (printf "leaderElection: renewDeadline %s must be greater than retryPeriod %s * 1.2, client-go's jitter (%s)" .renewDeadline .retryPeriod $rule) }}
{{- end }}
{{- if lt $lease 1e9 }}
{{- fail (printf "leaderElection: leaseDuration %s must be at least 1s: the Lease stores whole seconds (%s)" .leaseDuration $rule) }}
{{- end }}
{{- if le (mulf (floor (divf $lease 1e9)) 1e9) $renew }}
{{- fail (printf "leaderElection: leaseDuration %s must be greater than renewDeadline %s in whole seconds: the Lease stores whole seconds, and a successor waits only those (%s)" .leaseDuration .renewDeadline $rule) }}
{{- end }}
{{- end }}

{{/*
Every profile states both its `plugins` and its `pluginConfig`. Helm replaces a list rather than
merging it, so on the chart's default profiles (no -f file holding profiles, into which --set
merges) `--set schedulerConfig.profiles[0].schedulerName=x` renders a profile holding that one key: Tessera accepts it and runs upstream's default plugins and args (no
TesseraFragmentation) instead of the chart's, with no word said. (`--set ...enabled[0].weight=5`
leaves a plugin entry without a name, which values.schema.json refuses.) Empty ones
(`plugins: {}`, `pluginConfig: []`) ask for those defaults on purpose. The template cannot tell a values file from --set: the message says what to
add (a values file's whole profiles lacking pluginConfig were told about --set, in a trial), then
what --set does.
*/}}
{{- define "tessera.checkProfilesAreWhole" -}}
{{- range $i, $profile := (.Values.schedulerConfig.profiles | default list) }}
{{- $missing := list }}
{{- $add := list }}
{{- range (list (list "plugins" "`plugins: {}`") (list "pluginConfig" "`pluginConfig: []`")) }}
{{- if not (hasKey $profile (index . 0)) }}
{{- $missing = append $missing (index . 0) }}
{{- $add = append $add (index . 1) }}
{{- end }}
{{- end }}
{{- if $missing }}
{{- fail (printf "schedulerConfig.profiles[%d] has no %s: every profile states its plugins and pluginConfig, as one without them runs the defaults, not the chart's; add %s for the defaults (`plugins: {}` is upstream's default plugins and TesseraDevices, without TesseraFragmentation: GPUs are not packed unless plugins.score enables it, as the chart's profile does with weight 10; `pluginConfig: []` is every plugin's default args), or the ones it should have (the chart's are in its values.yaml). If you used --set schedulerConfig.profiles[...]: Helm replaces the whole list, so the profile holds only the keys set; change a profile in a values file holding the whole profile (deploy/README.md, \"Changing one weight\")" $i (join " or " $missing) (join " and " $add)) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
`tessera run`'s checks that compare two values, which JSON schema cannot say (a minimum cannot
name another value; uniqueItems compares whole profiles, not one field of them): profiles'
names are unique (an empty or absent name is default-scheduler's default, "tessera" in Tessera)
and podMaxBackoffSeconds is at least podInitialBackoffSeconds (defaults 10 and 1, as
kube-scheduler's v1 defaults.go). Messages as `tessera run` words them.
*/}}
{{- define "tessera.checkAcrossFields" -}}
{{- $seen := dict }}
{{- range $i, $profile := (.profiles | default list) }}
{{- $name := (get ($profile | default dict) "schedulerName") | default "tessera" }}
{{- if hasKey $seen $name }}
{{- fail (printf "schedulerConfig.profiles[%d].schedulerName: Duplicate value: %q: already used by profiles[%v].schedulerName" $i $name (get $seen $name)) }}
{{- end }}
{{- $_ := set $seen $name $i }}
{{- end }}
{{- $initial := hasKey . "podInitialBackoffSeconds" | ternary .podInitialBackoffSeconds 1 }}
{{- $maximum := hasKey . "podMaxBackoffSeconds" | ternary .podMaxBackoffSeconds 10 }}
{{- if lt (int64 $maximum) (int64 $initial) }}
{{- fail (printf "schedulerConfig.podMaxBackoffSeconds: Invalid value: %v: must be greater than or equal to podInitialBackoffSeconds (%v)" $maximum $initial) }}
{{- end }}
{{- end }}

{{/* The profiles' scheduler names as a JSON list, the GPU pod policy's schedulerNames
(no profiles: Tessera's built-in one, tessera). */}}
{{- define "tessera.profileNamesJson" -}}
{{- $names := list }}
{{- range (.Values.schedulerConfig.profiles | default list) }}
{{- $names = append $names (.schedulerName | default "tessera") }}
{{- end }}
{{- $names | default (list "tessera") | toJson }}
{{- end }}

{{/*
An upgrade must not run two leaders. A new Lease (leaderElection.resourceName), or leader election
turned on, rolls new pods in beside the old ones (RollingUpdate, maxSurge 1): the new pods lead on
the new Lease while the old leader still leads on the old one, or schedules with none, and one GPU
can go to two pods. Refused while the release's Deployment has replicas or its scheduler pods
still exist (as the cluster is now: nothing under `helm template` or a first install); turning
leader election off is safe (Recreate: the old pods go first).
*/}}
{{- define "tessera.checkLeaseMove" -}}
{{- if and .Release.IsUpgrade .Values.leaderElection.enabled (gt (int .Values.scheduler.replicas) 0) }}
{{- $configMap := lookup "v1" "ConfigMap" .Release.Namespace "tessera-scheduler-config" | default dict }}
{{- $config := dig "data" "config.yaml" "" $configMap | fromYaml }}
{{- if $config }}
{{- $wasElected := dig "leaderElection" "leaderElect" false $config }}
{{- $was := "none (leader election off)" }}
{{- if $wasElected }}
{{- $was = printf "%s/%s" (dig "leaderElection" "resourceNamespace" "" $config) (dig "leaderElection" "resourceName" "" $config) }}
{{- end }}
{{- $now := printf "%s/%s" .Release.Namespace .Values.leaderElection.resourceName }}
{{- if ne $was $now }}
{{- $deployment := lookup "apps/v1" "Deployment" .Release.Namespace "tessera-scheduler" | default dict }}
{{- $running := gt (int (dig "spec" "replicas" 0 $deployment)) 0 }}
{{- range (lookup "v1" "Pod" .Release.Namespace "" | default dict).items | default list }}
{{- $labels := .metadata.labels | default dict }}
{{- if and (eq (index $labels "app.kubernetes.io/name" | default "") "tessera") (eq (index $labels "app.kubernetes.io/component" | default "") "scheduler") }}
{{- $running = true }}
{{- end }}
{{- end }}
{{- if $running }}
{{- fail (printf "leaderElection: the Lease moves from %s to %s while scheduler replicas run: the new pods would lead on it beside the old leader (two schedulers: one GPU can go to two pods). Upgrade with --set scheduler.replicas=0 first, wait until `kubectl get pods -n %s -l app.kubernetes.io/component=scheduler` lists none, then upgrade with the new values (deploy/README.md, \"Changing the Lease\")" $was $now .Release.Namespace) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
One release per cluster: the cluster-scoped objects have fixed names, so Helm refuses a second
release (in another namespace or under another name) with "invalid ownership metadata". Helm
3.17's --take-ownership skips that check, and a second release then takes the ClusterRoleBinding
for its own ServiceAccount and runs a second scheduler on the same GPU nodes (one GPU can go to
two pods). Refused here while the ClusterRole is another release's (by Helm's own annotations);
one made without Helm carries none, and --take-ownership still adopts it.
*/}}
{{- define "tessera.checkOneRelease" -}}
{{- $role := lookup "rbac.authorization.k8s.io/v1" "ClusterRole" "" "tessera-scheduler" | default dict }}
{{- $annotations := dig "metadata" "annotations" dict $role }}
{{- $name := index $annotations "meta.helm.sh/release-name" | default "" }}
{{- $namespace := index $annotations "meta.helm.sh/release-namespace" | default "" }}
{{- if and $name (or (ne $name .Release.Name) (ne $namespace .Release.Namespace)) }}
{{- fail (printf "another Tessera release (%s in %s) owns ClusterRole tessera-scheduler: one release per cluster (two schedulers on the same GPU nodes can give one GPU to two pods). Add scheduler names as profiles of that release, or uninstall it first (deploy/README.md)" $name $namespace) }}
{{- end }}
{{- end }}

{{/*
Prometheus refuses a scrape config whose timeout is longer than its interval ("scrape timeout
greater than scrape interval"): the ServiceMonitor would install and never be scraped.
*/}}
{{- define "tessera.checkScrapeTimeout" -}}
{{- if gt (include "tessera.durationNs" .scrapeTimeout | float64) (include "tessera.durationNs" .interval | float64) }}
{{- fail (printf "monitoring.serviceMonitor.scrapeTimeout %s must not be longer than monitoring.serviceMonitor.interval %s: Prometheus refuses such a scrape config (scrape timeout greater than scrape interval) and never scrapes the scheduler" .scrapeTimeout .interval) }}
{{- end }}
{{- end }}

{{/*
The alert rules against the values they depend on. With the chart's ServiceMonitor the series'
job is its Service's name, and rules reading another job see nothing (TesseraSchedulerDown fires
forever). failoverWindow must be longer than a failover as Prometheus sees it (values.yaml's
rule: leaseDuration + retryPeriod * 1.2, client-go's jitter, + two scrape intervals), or
TesseraPodsUnschedulable's `for` starts over at every failover.
*/}}
{{- define "tessera.checkAlertRules" -}}
{{- $rule := .Values.monitoring.prometheusRule }}
{{- $monitor := .Values.monitoring.serviceMonitor }}
{{- if and $monitor.enabled (ne $rule.job "tessera-scheduler-metrics") }}
{{- fail (printf "monitoring.prometheusRule.job %q is not the job \"tessera-scheduler-metrics\" of the ServiceMonitor's series (monitoring.serviceMonitor.enabled): its targets take the Service's name as job, so the rules would read no series and TesseraSchedulerDown would fire forever. Leave monitoring.prometheusRule.job at its default, or scrape with your own config under that job" $rule.job) }}
{{- end }}
{{- if .Values.leaderElection.enabled }}
{{- $election := .Values.leaderElection }}
{{- $failover := addf (include "tessera.durationNs" $election.leaseDuration | float64) (mulf (include "tessera.durationNs" $election.retryPeriod | float64) 1.2) (mulf (include "tessera.durationNs" $monitor.interval | float64) 2) }}
{{- if le (include "tessera.durationNs" $rule.failoverWindow | float64) $failover }}
{{- fail (printf "monitoring.prometheusRule.failoverWindow %s must be longer than a failover as Prometheus sees it: leaderElection.leaseDuration %s + leaderElection.retryPeriod %s * 1.2 + 2 * monitoring.serviceMonitor.interval %s = %gs (the rule in values.yaml); shorter, TesseraPodsUnschedulable's `for` starts over at every failover" $rule.failoverWindow $election.leaseDuration $election.retryPeriod $monitor.interval (divf $failover 1e9)) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Names, labels and the pieces the server and replicant Deployments share.
*/}}

{{- define "lakemirror.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "lakemirror.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "lakemirror.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The name of a component's objects: <fullname>-server, <fullname>-replicant. */}}
{{- define "lakemirror.componentName" -}}
{{- printf "%s-%s" (include "lakemirror.fullname" .root | trunc 52 | trimSuffix "-") .component -}}
{{- end -}}

{{- define "lakemirror.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lakemirror.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "lakemirror.labels" -}}
helm.sh/chart: {{ include "lakemirror.chart" . }}
{{ include "lakemirror.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: lakemirror
lakemirror.io/region: {{ .Values.region | quote }}
{{- end -}}

{{/* Selector labels of one component; call with (dict "root" $ "component" "server"). */}}
{{- define "lakemirror.componentSelectorLabels" -}}
{{ include "lakemirror.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "lakemirror.componentLabels" -}}
{{ include "lakemirror.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The Prometheus job a component's ServiceMonitor produces (the alert rules match on it). */}}
{{- define "lakemirror.jobName" -}}
lakemirror-{{ .component }}
{{- end -}}

{{- define "lakemirror.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "lakemirror.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "lakemirror.secretName" -}}
{{- default (include "lakemirror.fullname" .) .Values.credentials.existingSecret -}}
{{- end -}}

{{- define "lakemirror.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "lakemirror.replicantEnabled" -}}
{{- if and .Values.replicant.enabled (eq .Values.mode "distributed") -}}true{{- end -}}
{{- end -}}

{{/* Where the configuration file is mounted, and its name in the ConfigMap. */}}
{{- define "lakemirror.configDir" -}}/etc/lakemirror{{- end -}}
{{- define "lakemirror.configFile" -}}config.yaml{{- end -}}
{{- define "lakemirror.dataDir" -}}/var/lib/lakemirror{{- end -}}

{{/* The in-cluster URL of this release's server. */}}
{{- define "lakemirror.serverUrl" -}}
{{- printf "http://%s.%s.svc:%d" (include "lakemirror.componentName" (dict "root" . "component" "server")) .Release.Namespace (int .Values.server.service.port) -}}
{{- end -}}

{{/* The in-cluster URL of this release's replicant. */}}
{{- define "lakemirror.replicantServiceUrl" -}}
{{- printf "http://%s.%s.svc:%d" (include "lakemirror.componentName" (dict "root" . "component" "replicant")) .Release.Namespace (int .Values.replicant.service.port) -}}
{{- end -}}

{{/* The replicant the web UI calls: ui.replicantUrl, else this release's when it runs. */}}
{{- define "lakemirror.uiReplicantUrl" -}}
{{- if .Values.ui.replicantUrl -}}
{{- .Values.ui.replicantUrl -}}
{{- else if include "lakemirror.replicantEnabled" . -}}
{{- include "lakemirror.replicantServiceUrl" . -}}
{{- end -}}
{{- end -}}

{{/*
LakeMirror's own configuration file (docs/configuration.md), rendered from the values. Secrets
are not in it: they come from the Secret as LAKEMIRROR_* variables (lakemirror.secretEnv).
*/}}
{{- define "lakemirror.config" -}}
{{- $v := .Values -}}
{{- $dynamo := dict "table" $v.kv.dynamodb.table "partition" $v.kv.dynamodb.partition "region" (default $v.region $v.kv.dynamodb.region) "create_table" $v.kv.dynamodb.createTable "max_attempts" (int64 $v.kv.dynamodb.maxAttempts) -}}
{{- with $v.kv.dynamodb.endpointUrl }}{{ $_ := set $dynamo "endpoint_url" . }}{{ end -}}
{{- $kv := dict "type" $v.kv.type -}}
{{- if eq $v.kv.type "dynamodb" }}{{ $_ := set $kv "dynamodb" $dynamo }}{{ end -}}
{{- /* embedded: no S3 unless asked for (a configured region makes the server check S3 at start) */ -}}
{{- $s3region := $v.blockstore.s3.region | default (ternary $v.region "" (eq $v.mode "distributed")) -}}
{{- $s3 := dict "addressing_style" $v.blockstore.s3.addressingStyle "max_attempts" (int64 $v.blockstore.s3.maxAttempts) -}}
{{- with $s3region }}{{ $_ := set $s3 "region" . }}{{ end -}}
{{- with $v.blockstore.s3.endpointUrl }}{{ $_ := set $s3 "endpoint_url" . }}{{ end -}}
{{- $s3regions := dict -}}
{{- range $name, $entry := $v.blockstore.s3.regions -}}
{{- $e := dict -}}
{{- with $entry.region }}{{ $_ := set $e "region" . }}{{ end -}}
{{- with $entry.endpointUrl }}{{ $_ := set $e "endpoint_url" . }}{{ end -}}
{{- with $entry.addressingStyle }}{{ $_ := set $e "addressing_style" . }}{{ end -}}
{{- with $entry.maxAttempts }}{{ $_ := set $e "max_attempts" (int64 .) }}{{ end -}}
{{- $_ := set $s3regions $name $e -}}
{{- end -}}
{{- if $s3regions }}{{ $_ := set $s3 "regions" $s3regions }}{{ end -}}
{{- $regions := dict -}}
{{- range $name, $entry := $v.regions -}}
{{- $_ := set $regions $name (dict "server_url" $entry.serverUrl) -}}
{{- end -}}
{{- if not (hasKey $regions $v.region) -}}
{{- $_ := set $regions $v.region (dict "server_url" (include "lakemirror.serverUrl" .)) -}}
{{- end -}}
{{- $config := dict
  "data_dir" (include "lakemirror.dataDir" .)
  "server" (dict "host" "0.0.0.0" "port" (int64 $v.server.port) "workers" (int64 $v.server.workers) "shutdown_timeout" $v.server.shutdownTimeout)
  "kv" $kv
  "blockstore" (dict "s3" $s3)
  "auth" (dict "admin_user" $v.credentials.admin.user)
  "logging" (dict "format" $v.logging.format "level" $v.logging.level)
  "replicant" (dict
    "region" $v.region
    "host" "0.0.0.0"
    "port" (int64 $v.replicant.port)
    "poll_interval" $v.replicant.pollInterval
    "lease_seconds" $v.replicant.leaseSeconds
    "concurrency" (int64 $v.replicant.concurrency)
    "list_threshold" (int64 $v.replicant.listThreshold)
    "object_cache_size" (int64 $v.replicant.objectCacheSize)
    "bulk_threshold" (int64 $v.replicant.bulkThreshold)
    "shutdown_timeout" $v.replicant.shutdownTimeout)
  "regions" $regions
  "ui" (dict "enabled" $v.ui.enabled "replicant_url" (include "lakemirror.uiReplicantUrl" .))
-}}
{{- with $v.server.ingress.gatewayDomains }}
{{- $_ := set $config "gateway" (dict "domain_names" .) -}}
{{- end -}}
{{- toYaml (mustMergeOverwrite $config (deepCopy $v.extraConfig)) -}}
{{- end -}}

{{/* A Secret key's name for a region's replicant key pair. */}}
{{- define "lakemirror.regionSecretKey" -}}
region-{{ .region }}-{{ .part }}
{{- end -}}

{{- define "lakemirror.secretRef" -}}
- name: {{ .env }}
  valueFrom:
    secretKeyRef:
      name: {{ include "lakemirror.secretName" .root }}
      key: {{ .key }}
      {{- if .optional }}
      optional: true
      {{- end }}
{{- end -}}

{{/*
The Secret's variables a component needs: the server the administrator's key, the replicant a
key pair per region (for its own region the administrator's unless credentials.regions names
that region); both the secrets' encryption key (with an existingSecret `optional` only on
SQLite) and the optional static S3 and DynamoDB keys, referenced when given (with an
existingSecret always, as `optional`).
*/}}
{{- define "lakemirror.secretEnv" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
{{- $existing := ne $v.credentials.existingSecret "" -}}
{{- if eq .component "server" }}
{{ include "lakemirror.secretRef" (dict "root" $root "env" "LAKEMIRROR_AUTH__ADMIN_ACCESS_KEY_ID" "key" "admin-access-key-id") }}
{{ include "lakemirror.secretRef" (dict "root" $root "env" "LAKEMIRROR_AUTH__ADMIN_SECRET_ACCESS_KEY" "key" "admin-secret-access-key") }}
{{- else }}
{{- $names := keys $v.regions | concat (list $v.region) | uniq | sortAlpha -}}
{{- range $name := $names }}
{{- if and (eq $name $v.region) (not (hasKey $v.credentials.regions $name)) }}
{{- /* this region's own server: the administrator's key unless a Replicator key is given */}}
{{ include "lakemirror.secretRef" (dict "root" $root "env" (printf "LAKEMIRROR_REGIONS__%s__ACCESS_KEY_ID" $name) "key" "admin-access-key-id") }}
{{ include "lakemirror.secretRef" (dict "root" $root "env" (printf "LAKEMIRROR_REGIONS__%s__SECRET_ACCESS_KEY" $name) "key" "admin-secret-access-key") }}
{{- else }}
{{- /* optional: the replicant starts before a source region's key exists (docs/deploy.md) */}}
{{ include "lakemirror.secretRef" (dict "root" $root "env" (printf "LAKEMIRROR_REGIONS__%s__ACCESS_KEY_ID" $name) "key" (include "lakemirror.regionSecretKey" (dict "region" $name "part" "access-key-id")) "optional" true) }}
{{ include "lakemirror.secretRef" (dict "root" $root "env" (printf "LAKEMIRROR_REGIONS__%s__SECRET_ACCESS_KEY" $name) "key" (include "lakemirror.regionSecretKey" (dict "region" $name "part" "secret-access-key")) "optional" true) }}
{{- end }}
{{- end }}
{{- end }}
{{- /* the secrets' encryption key: required on DynamoDB, generated on the volume with SQLite */}}
{{- if or $existing $v.credentials.encryptSecretKey }}
{{ include "lakemirror.secretRef" (dict "root" $root "env" "LAKEMIRROR_AUTH__ENCRYPT_SECRET_KEY" "key" "encrypt-secret-key" "optional" (and $existing (ne $v.kv.type "dynamodb"))) }}
{{- end }}
{{- range $store, $prefix := dict "s3" "LAKEMIRROR_BLOCKSTORE__S3" "dynamodb" "LAKEMIRROR_KV__DYNAMODB" }}
{{- $given := index $v.credentials $store -}}
{{- if or $existing $given.accessKeyId }}
{{ include "lakemirror.secretRef" (dict "root" $root "env" (printf "%s__ACCESS_KEY_ID" $prefix) "key" (printf "%s-access-key-id" $store) "optional" $existing) }}
{{ include "lakemirror.secretRef" (dict "root" $root "env" (printf "%s__SECRET_ACCESS_KEY" $prefix) "key" (printf "%s-secret-access-key" $store) "optional" $existing) }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Pod-level settings both components share; call with (dict "root" $ "component" "server"). */}}
{{- define "lakemirror.topologySpread" -}}
{{- $settings := index .root.Values .component -}}
{{- if $settings.topologySpreadConstraints }}
{{ toYaml $settings.topologySpreadConstraints }}
{{- else if .root.Values.topologySpread.enabled }}
{{- range $key := .root.Values.topologySpread.topologyKeys }}
- maxSkew: 1
  topologyKey: {{ $key }}
  whenUnsatisfiable: {{ $.root.Values.topologySpread.whenUnsatisfiable }}
  labelSelector:
    matchLabels:
      {{- include "lakemirror.componentSelectorLabels" $ | nindent 6 }}
  matchLabelKeys:
    - pod-template-hash
{{- end }}
{{- end }}
{{- end -}}

{{- define "lakemirror.probes" -}}
{{- $p := .root.Values.probes -}}
startupProbe:
  httpGet:
    path: /healthz
    port: http
  periodSeconds: {{ $p.startup.periodSeconds }}
  timeoutSeconds: {{ $p.startup.timeoutSeconds }}
  failureThreshold: {{ $p.startup.failureThreshold }}
livenessProbe:
  httpGet:
    path: /healthz
    port: http
  periodSeconds: {{ $p.liveness.periodSeconds }}
  timeoutSeconds: {{ $p.liveness.timeoutSeconds }}
  failureThreshold: {{ $p.liveness.failureThreshold }}
readinessProbe:
  httpGet:
    path: /readyz
    port: http
  periodSeconds: {{ $p.readiness.periodSeconds }}
  timeoutSeconds: {{ $p.readiness.timeoutSeconds }}
  failureThreshold: {{ $p.readiness.failureThreshold }}
{{- end -}}

{{/* Checksums of the configuration and the chart's Secret, so that a change rolls the pods. */}}
{{- define "lakemirror.checksums" -}}
checksum/config: {{ include (print .Template.BasePath "/configmap.yaml") . | sha256sum }}
{{- if not .Values.credentials.existingSecret }}
checksum/secret: {{ include (print .Template.BasePath "/secret.yaml") . | sha256sum }}
{{- end }}
{{- end -}}

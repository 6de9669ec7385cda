{{/* Names and labels shared by every template. */}}

{{- define "chamvi.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's base name; 52 characters leaves room for suffixes such as -redis. */}}
{{- define "chamvi.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else if contains (include "chamvi.name" .) .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "chamvi.name" .) | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "chamvi.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "chamvi.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "chamvi.selectorLabels" -}}
app.kubernetes.io/name: {{ include "chamvi.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "chamvi.redisSelectorLabels" -}}
app.kubernetes.io/name: {{ include "chamvi.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: redis
{{- end -}}

{{- define "chamvi.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "chamvi.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "chamvi.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding state-key (and, for the bundled Redis, redis-password and redis.conf). */}}
{{- define "chamvi.secretsName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-secrets" (include "chamvi.fullname" .)) -}}
{{- end -}}

{{/* The bundled Redis runs unless an external one is named. */}}
{{- define "chamvi.redisBundled" -}}
{{- if and (not .Values.redis.url) (not .Values.redis.urlSecretRef.name) -}}true{{- end -}}
{{- end -}}

{{- define "chamvi.redisUrl" -}}
{{- if .Values.redis.url -}}
{{- .Values.redis.url -}}
{{- else -}}
{{- printf "redis://%s-redis.%s.svc:6379" (include "chamvi.fullname" .) .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/*
allowRepo globs as RE2 regular expressions, with the operator's meaning (reconcile/allow-repo.ts):
`**` any characters, `*` one path segment, `?` one character other than `/`. regexQuoteMeta
escapes every metacharacter first, so only the wildcards become regex syntax. Returns JSON.
*/}}
{{- define "chamvi.allowRepoRegexes" -}}
{{- $regexes := list -}}
{{- range .Values.config.allowRepo -}}
{{- $quoted := regexQuoteMeta . -}}
{{- $quoted = replace "\\*\\*" "\u0000" $quoted -}}
{{- $quoted = replace "\\*" "[^/]*" $quoted -}}
{{- $quoted = replace "\\?" "[^/]" $quoted -}}
{{- $quoted = replace "\u0000" ".*" $quoted -}}
{{- $regexes = append $regexes (printf "^%s$" $quoted) -}}
{{- end -}}
{{- toJson $regexes -}}
{{- end -}}

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

{{/* repository:tag, and @digest when set: the kubelet pulls by the digest, the tag says which release it is. */}}
{{- define "chamvi.image" -}}
{{- $reference := printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $reference .Values.image.digest -}}
{{- else -}}
{{- $reference -}}
{{- end -}}
{{- end -}}

{{/* The egress proxy's name: its ServiceAccount, Roles, Deployment and Service, which the
operator's config (configmap.yaml) and the proxy's status policy (egress-proxy-status-policy.yaml)
name too. */}}
{{- define "chamvi.egressProxyName" -}}
{{- printf "%s-egress-proxy" (include "chamvi.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The Secret holding state-key (and, for the bundled Redis, redis-password and redis.conf). */}}
{{- define "chamvi.secretsName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-secrets" (include "chamvi.fullname" .)) -}}
{{- end -}}

{{/* The bundled Redis runs unless an external one is named: a URL, Sentinels or Cluster nodes. */}}
{{- define "chamvi.redisBundled" -}}
{{- if and (not .Values.redis.url) (not .Values.redis.urlSecretRef.name) (not .Values.config.redisSentinels) (not .Values.config.redisClusterNodes) -}}true{{- end -}}
{{- end -}}

{{- define "chamvi.redisUrl" -}}
{{- if .Values.redis.url -}}
{{- .Values.redis.url -}}
{{- else -}}
{{- printf "redis://%s-redis.%s.svc:6379" (include "chamvi.fullname" .) .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/*
Security #11.2: the canonical repository URL grammar, character for character the RE2 expressions
of operator/src/reconcile/canonical-repository-url.ts (CANONICAL_REPOSITORY_URL, DEFAULT_PORT_URL,
PUNYCODE_HOST_URL); test/integration/security-allow-repo.test.ts checks the copies are equal and
that the API server and the operator decide every attack URL alike. docs/repository-urls.md
explains the grammar.
*/}}
{{- define "chamvi.canonicalRepositoryUrl" -}}
^(?:(?:https|http|git)://[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*(?::(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?(?:/(?:[A-Za-z0-9_~+-][A-Za-z0-9._~+-]*|\.[A-Za-z0-9_~+-][A-Za-z0-9._~+-]*|\.\.[A-Za-z0-9._~+-]+))+|ssh://(?:[A-Za-z0-9_][A-Za-z0-9._-]{0,63}@)?[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*(?::(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?(?:/(?:[A-Za-z0-9_~+-][A-Za-z0-9._~+-]*|\.[A-Za-z0-9_~+-][A-Za-z0-9._~+-]*|\.\.[A-Za-z0-9._~+-]+))+|[A-Za-z0-9_][A-Za-z0-9._-]{0,63}@[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*:/?(?:[A-Za-z0-9_~+-][A-Za-z0-9._~+-]*|\.[A-Za-z0-9_~+-][A-Za-z0-9._~+-]*|\.\.[A-Za-z0-9._~+-]+)(?:/(?:[A-Za-z0-9_~+-][A-Za-z0-9._~+-]*|\.[A-Za-z0-9_~+-][A-Za-z0-9._~+-]*|\.\.[A-Za-z0-9._~+-]+))*|file://(?:/(?:[A-Za-z0-9_~+-][A-Za-z0-9._~+-]*|\.[A-Za-z0-9_~+-][A-Za-z0-9._~+-]*|\.\.[A-Za-z0-9._~+-]+))+)$
{{- end -}}

{{- define "chamvi.defaultPortRepositoryUrl" -}}
^(?:https://[^/]*:443|http://[^/]*:80|ssh://[^/]*:22|git://[^/]*:9418)/
{{- end -}}

{{- define "chamvi.punycodeHostRepositoryUrl" -}}
^(?:[a-z]+://)?(?:[A-Za-z0-9._-]+@)?(?:[a-z0-9-]+\.)*xn--
{{- end -}}

{{/*
allowRepo globs as RE2 regular expressions, exactly as reconcile/allow-repo.ts compiles them:
`**` any characters, `*` any characters but `/`, `?` one character but `/`. regexQuoteMeta
escapes every metacharacter first, so only the wildcards become regex syntax. A pattern that can
never match a canonical URL (its wildcards replaced by 1, it is not canonical) fails the
render, as the operator refuses it at start-up. Returns JSON: {"plain": [...], "punycode": [...]},
where "punycode" holds the patterns that spell out an xn-- label (only they may match a punycode host).
*/}}
{{- define "chamvi.allowRepoRegexes" -}}
{{- $canonical := include "chamvi.canonicalRepositoryUrl" . -}}
{{- $defaultPort := include "chamvi.defaultPortRepositoryUrl" . -}}
{{- $plain := list -}}
{{- $punycode := list -}}
{{- range .Values.config.allowRepo -}}
{{- $probe := regexReplaceAll "[*?]+" . "1" -}}
{{- if or (not (regexMatch "^[A-Za-z0-9._~+:/@*?-]+$" .)) (not (regexMatch $canonical $probe)) (regexMatch $defaultPort $probe) -}}
{{- fail (printf "config.allowRepo: pattern %q can never match a canonical repository URL (lowercase host, no default port, no %%, \\, @ outside an ssh user, empty, . or .. segments; see docs/repository-urls.md)" .) -}}
{{- end -}}
{{- $quoted := regexQuoteMeta . -}}
{{- $quoted = replace "\\*\\*" "\u0000" $quoted -}}
{{- $quoted = replace "\\*" "[^/]*" $quoted -}}
{{- $quoted = replace "\\?" "[^/]" $quoted -}}
{{- $quoted = replace "\u0000" ".*" $quoted -}}
{{- if contains "xn--" . -}}
{{- $punycode = append $punycode (printf "^%s$" $quoted) -}}
{{- else -}}
{{- $plain = append $plain (printf "^%s$" $quoted) -}}
{{- end -}}
{{- end -}}
{{- toJson (dict "plain" $plain "punycode" $punycode) -}}
{{- end -}}

{{/*
The volume source of caBundle (a ConfigMap or a Secret key, mounted as ca.crt), or nothing.
*/}}
{{- define "chamvi.caBundleVolume" -}}
{{- $ca := .Values.caBundle -}}
{{- if and $ca.configMap.name $ca.secret.name -}}
{{- fail "caBundle: set configMap.name or secret.name, not both" -}}
{{- end -}}
{{- if $ca.configMap.name -}}
configMap:
  name: {{ $ca.configMap.name }}
  items:
    - key: {{ $ca.configMap.key }}
      path: ca.crt
{{- else if $ca.secret.name -}}
secret:
  secretName: {{ $ca.secret.name }}
  items:
    - key: {{ $ca.secret.key }}
      path: ca.crt
{{- end -}}
{{- end }}

{{/* Where a release's admission policies apply: the namespaceSelector given, else with
watchNamespaces those namespaces only (another release's runs are that release's to judge:
its allowRepo, its separation of duties), else every namespace. Rendered as a binding's
matchResources, or nothing. */}}
{{- define "chamvi.policyMatchResources" -}}
{{- $selector := .selector -}}
{{- if and (not $selector) .root.Values.config.watchNamespaces -}}
{{- $selector = dict "matchExpressions" (list (dict "key" "kubernetes.io/metadata.name" "operator" "In" "values" .root.Values.config.watchNamespaces)) -}}
{{- end -}}
{{- with $selector -}}
matchResources:
  namespaceSelector:
    {{- toYaml . | nindent 4 }}
{{- end -}}
{{- end -}}

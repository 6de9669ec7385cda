{{/*
The operator's config rules that values.schema.json cannot state, checked at `helm template` /
`helm install` so a release never renders a config the operator refuses at start-up (a pod
that crash-loops, or an upgrade without --wait that reports success over one). JSON Schema
checks one value at a time, so the rules between keys are here, each failing with the
operator's own words (operator/src/config/operator-config.ts, loadOperatorConfig);
test/integration/chart.test.ts renders each. Single-key rules the operator makes in code are
in the generated schema where a keyword says them (CODE_CHECKS_AS_SCHEMA in
operator/src/config/chart-values-schema.ts).
*/}}
{{- define "chamvi.checkConfig" -}}
{{- $config := .Values.config -}}
{{- /* As client-go requires: a standby must not take the lease while the leader, still within its renew deadline, goes on acting. */ -}}
{{- $election := .Values.leaderElection -}}
{{- if le (int $election.leaseDurationSeconds) (int $election.renewDeadlineSeconds) -}}
{{- fail (printf "leaderElection: leaseDurationSeconds (%d) must be greater than renewDeadlineSeconds (%d) (or two replicas lead at once)" (int $election.leaseDurationSeconds) (int $election.renewDeadlineSeconds)) -}}
{{- end -}}
{{- if le (int $election.renewDeadlineSeconds) (int $election.retryPeriodSeconds) -}}
{{- fail (printf "leaderElection: renewDeadlineSeconds (%d) must be greater than retryPeriodSeconds (%d) (a leader must get more than one try to renew)" (int $election.renewDeadlineSeconds) (int $election.retryPeriodSeconds)) -}}
{{- end -}}
{{- /* A pool in a namespace the operator does not watch has no pod cache and no RBAC there. */ -}}
{{- $watched := $config.watchNamespaces | default list -}}
{{- $pools := dict -}}
{{- range $pool := $config.warmPools | default list -}}
{{- $id := printf "%s/%s" $pool.namespace $pool.name -}}
{{- if hasKey $pools $id -}}
{{- fail (printf "config.warmPools: two pools are named %s in namespace %s; a pool's name is unique in its namespace" $pool.name $pool.namespace) -}}
{{- end -}}
{{- $_ := set $pools $id true -}}
{{- if and $watched (not (has $pool.namespace $watched)) -}}
{{- fail (printf "config.warmPools: pool %s is in namespace %s, which config.watchNamespaces does not list; add it there or move the pool" $pool.name $pool.namespace) -}}
{{- end -}}
{{- end -}}
{{- range $index, $toleration := ($config.sandboxPlacement | default dict).tolerations | default list -}}
{{- if and (eq ($toleration.operator | default "") "Exists") $toleration.value -}}
{{- fail (printf "config.sandboxPlacement.tolerations[%d]: a toleration with operator Exists takes no value" $index) -}}
{{- end -}}
{{- if and (not (hasKey $toleration "key")) (ne ($toleration.operator | default "") "Exists") -}}
{{- fail (printf "config.sandboxPlacement.tolerations[%d]: a toleration without a key needs operator Exists" $index) -}}
{{- end -}}
{{- end -}}
{{- $endpoint := include "chamvi.canonicalEndpointPattern" . -}}
{{- $defaultPort := include "chamvi.defaultPortEndpointPattern" . -}}
{{- range $config.allowModelEndpoints | default list -}}
{{- if or (not (regexMatch $endpoint .)) (regexMatch $defaultPort .) -}}
{{- fail (printf "config.allowModelEndpoints: %q is not a canonical endpoint URL, which the operator refuses at start-up: write the scheme and host in lower case, leave out a default port (:443 of https, :80 of http), and give a path of segments that are not empty, . or .. (such as https://llm.internal/v1)" .) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
What parseEndpointPattern (operator/src/reconcile/model-endpoints.ts) accepts, as an RE2
expression: http or https, a lower-case DNS name or a bracketed IPv6 address, a port from 1 to
65535 without leading zeros, then path segments of its characters (`*` among them), none empty,
. or .., and an optional trailing /. The operator's last check, that a URL parser writes the
pattern back unchanged, is not here: an IP address in another form than its canonical one
(127.1, 0x7f.0.0.1, [0::1]) passes this and is refused at start-up.
*/}}
{{- define "chamvi.canonicalEndpointPattern" -}}
^https?://(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*|\[[0-9a-f:.]+\])(?::(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?(?:/(?:[A-Za-z0-9_~!$&'()+,;=:*-][A-Za-z0-9._~!$&'()+,;=:*-]*|\.[A-Za-z0-9_~!$&'()+,;=:*-][A-Za-z0-9._~!$&'()+,;=:*-]*|\.\.[A-Za-z0-9._~!$&'()+,;=:*-]+))*/?$
{{- end -}}

{{- define "chamvi.defaultPortEndpointPattern" -}}
^(?:https://[^/]*:443|http://[^/]*:80)(?:/|$)
{{- end -}}
